"""The ground truth of a crawl of a generated site: seed document 000's breadth-first search.

:func:`reference_crawl` runs the seed document's loop over the site's own model (no HTTP, no
parser): start at the home page at depth 0; a fetched HTML page's followed links (not nofollow, ugc
or sponsored) to the site's hosts are admitted at depth + 1 when that is within ``max_depth``; a
redirect's target is admitted at the redirect's own depth, one hop more, up to ``max_redirects``;
``refuse`` stands for the crawler's trap guards (a URL it refuses by shape). Scope is the site's
registered domain (every host is a port of 127.0.0.1), so links to other domains are edges but
never admitted. A URL in a host's robots.txt-disallowed section is admitted (and leased) but never
requested. ``max_links`` caps the distinct URLs admitted, in breadth-first order.

What it returns is what an end-to-end test compares against: the depth of every admitted URL, the
URLs the server must see (once each, a 500 page ``1 + max_retries`` times), and every edge of every
fetched page as the parser must report it, with each redirect as a REDIRECT edge.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from streamcrawl.testsite.graph import Address
from streamcrawl.testsite.pages import BoundSite, ExpectedEdge

REDIRECT_EDGE_POSITION = "CONTENT"


@dataclass
class ReferenceCrawl:
    depth: dict[str, int] = field(default_factory=dict)
    """Every admitted canonical URL and the depth it was admitted at."""
    fetched: set[str] = field(default_factory=set)
    """URLs the server is asked for (robots.txt aside)."""
    robots_denied: set[str] = field(default_factory=set)
    attempts: dict[str, int] = field(default_factory=dict)
    """How often each fetched URL is requested: 1, or 1 + max_retries for a page answering 500."""
    edges: dict[str, list[ExpectedEdge]] = field(default_factory=dict)
    """Out-edges of each fetched page that has any (HTML pages, redirects) by source URL."""
    statuses: dict[str, int] = field(default_factory=dict)
    """The HTTP status each fetched URL answers."""

    @property
    def edge_count(self) -> int:
        return sum(len(edges) for edges in self.edges.values())


def reference_crawl(
    site: BoundSite,
    max_depth: int,
    *,
    max_links: int = -1,
    max_retries: int = 1,
    max_redirects: int = 5,
    refuse: Callable[[str], bool] = lambda url: False,
) -> ReferenceCrawl:
    crawl = ReferenceCrawl()
    queue: deque[tuple[str, int, int]] = deque()

    def admit(url: str, depth: int, hops: int) -> None:
        if url in crawl.depth or site.address(url) is None or refuse(url):
            return
        if max_depth != -1 and depth > max_depth:
            return
        if max_links != -1 and len(crawl.depth) >= max_links:
            return
        crawl.depth[url] = depth
        queue.append((url, depth, hops))

    admit(site.seed_url, 0, 0)
    while queue:
        url, depth, hops = queue.popleft()
        address = site.address(url)
        if address is None:
            continue
        if site.graph.disallowed(address):
            crawl.robots_denied.add(url)
            continue
        crawl.fetched.add(url)
        status = status_of(site, address)
        crawl.statuses[url] = status
        crawl.attempts[url] = 1 + max_retries if status >= 500 else 1
        page = site.graph.page(address)
        if page is not None and page.kind == "redirect" and page.redirect_to is not None:
            target = site.url(page.redirect_to)
            crawl.edges[url] = [redirect_edge(target)]
            if hops + 1 <= max_redirects:
                admit(target, depth, hops + 1)
            continue
        if status != 200:
            continue
        edges = site.expected_edges(address)
        crawl.edges[url] = edges
        for edge in edges:
            if edge.followed:
                admit(edge.to_url, depth + 1, 0)
    return crawl


def status_of(site: BoundSite, address: Address) -> int:
    """What the site answers for an address (redirects 301, unknown paths 404)."""
    page = site.graph.page(address)
    if page is None:
        return 200 if site.is_document(address) else 404
    return {"html": 200, "private": 200, "missing": 404, "error": 500, "redirect": 301}[page.kind]


def redirect_edge(target: str) -> ExpectedEdge:
    """The edge the fetcher reports for a redirect: no anchor, no context, type REDIRECT."""
    return ExpectedEdge(target, "", "", "REDIRECT", (), REDIRECT_EDGE_POSITION)
