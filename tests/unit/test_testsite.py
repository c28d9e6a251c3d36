"""The generated test site and its ground truth: deterministic, what the parser reads, layered.

The end-to-end tests trust the site's ground truth, so it is checked here against the parser's
real extraction (every page of a site), the canonicaliser and the frontier's trap guard, and its
reference crawl against the properties seed document 000 gives a breadth-first crawl.
"""

from __future__ import annotations

import statistics
import urllib.error
import urllib.request
from collections import Counter

import pytest

from frontier.traps import check_traps
from parser.extract import extract_page
from schemas.canonical import canonical_url
from streamcrawl.testsite import Address, BoundSite, SiteServer, generate_site, reference_crawl
from streamcrawl.testsite.graph import LOGIN_PATH, TRAP_ROOT, TRAP_STEP
from streamcrawl.testsite.pages import context_window, relative_path

PORTS = [8101, 8102, 8103]


def trap_guard(url: str) -> bool:
    return check_traps(url) is not None


@pytest.fixture(scope="module")
def site() -> BoundSite:
    return BoundSite(generate_site(300, hosts=3, levels=5, seed=1), PORTS)


def documents(site: BoundSite) -> list[Address]:
    trap = [Address(0, TRAP_ROOT + TRAP_STEP * steps) for steps in range(3)]
    return [a for a in site.graph.pages if site.is_document(a)] + trap


def test_the_same_seed_gives_the_same_site() -> None:
    first = BoundSite(generate_site(120, seed=5), PORTS)
    second = BoundSite(generate_site(120, seed=5), PORTS)
    other = BoundSite(generate_site(120, seed=6), PORTS)
    pages = sorted(first.graph.pages, key=lambda a: (a.host, a.path))
    assert pages == sorted(second.graph.pages, key=lambda a: (a.host, a.path))
    assert [first.render_html(a) for a in pages] == [second.render_html(a) for a in pages]
    assert [first.render_html(a) for a in pages[:20]] != [other.render_html(a) for a in pages[:20]]


def test_every_expected_edge_is_what_the_parser_extracts(site: BoundSite) -> None:
    """Target, anchor, context window, link type, rel and position of every edge of every page."""
    checked = 0
    for address in documents(site):
        extracted = extract_page(site.url(address), {}, site.render_html(address), discovered_at=1)
        got = [
            (e.to_url, e.anchor_text, e.context_window, e.link_type, tuple(e.rel), e.position)
            for e in extracted.edges
        ]
        expected = [
            (e.to_url, e.anchor_text, e.context_window, e.link_type, e.rel, e.position)
            for e in site.expected_edges(address)
        ]
        assert got == expected, site.url(address)
        checked += len(expected)
    assert checked > 2000


def test_the_site_has_every_feature_the_tests_rely_on(site: BoundSite) -> None:
    kinds = Counter(page.kind for page in site.graph.pages.values())
    assert {"html", "missing", "error", "redirect", "private"} <= set(kinds)
    assert {page.address.host for page in site.graph.pages.values()} == {0, 1, 2}
    chains = [
        p
        for p in site.graph.pages.values()
        if p.kind == "redirect" and p.redirect_to and site.graph.pages[p.redirect_to].redirect_to
    ]
    assert chains, "at least one chain of two redirects"
    edges = [e for a in documents(site) for e in site.expected_edges(a)]
    assert {e.position for e in edges} == {"NAV", "CONTENT", "SIDEBAR", "FOOTER"}
    assert {e.link_type for e in edges} == {"INTERNAL", "EXTERNAL", "NOFOLLOW", "UGC", "SPONSORED"}
    hrefs = [
        site.href(a, spec) for a in site.graph.pages for spec in site.graph.pages[a].content_links
    ]
    assert any(h.startswith("../") for h in hrefs), "relative links"
    assert any(h.startswith("//") for h in hrefs), "scheme-relative links"
    assert any(h.startswith("http://") for h in hrefs), "absolute links"
    assert any("#" in h for h in hrefs) and any("utm_source=" in h for h in hrefs)


def test_out_degree_follows_a_power_law(site: BoundSite) -> None:
    degrees = [len(p.content_links) for p in site.graph.pages.values() if p.kind == "html"]
    assert statistics.median(degrees) <= 3
    assert max(degrees) >= 8 * statistics.median(degrees)


def test_every_spelling_canonicalises_to_its_target(site: BoundSite) -> None:
    for address, page in site.graph.pages.items():
        for spec in [*page.content_links, *page.aside_links]:
            href = site.href(address, spec)
            assert canonical_url(href, site.url(address)) == site.target_url(address, spec), href


def test_the_reference_depth_of_a_page_is_its_level(site: BoundSite) -> None:
    crawl = reference_crawl(site, -1, refuse=trap_guard)
    for url, depth in crawl.depth.items():
        address = site.address(url)
        assert address is not None
        page = site.graph.page(address)
        if page is not None:
            assert depth == page.level, url
    on_site = {site.url(a) for a, p in site.graph.pages.items() if p.kind != "private"}
    assert on_site <= crawl.fetched, "with no depth limit every page is reached"


def test_the_reference_crawl_obeys_depth_robots_nofollow_and_redirects(site: BoundSite) -> None:
    crawl = reference_crawl(site, 3, refuse=trap_guard)
    assert max(crawl.depth.values()) == 3
    assert crawl.robots_denied and not crawl.robots_denied & crawl.fetched
    assert all(
        site.graph.disallowed(site.address(u) or Address(9, "")) for u in crawl.robots_denied
    )
    assert not [u for u in crawl.depth if u.endswith(LOGIN_PATH) or "/u/" in u]
    for url in crawl.fetched:
        page = site.graph.page(site.address(url) or Address(9, ""))
        if page is not None and page.redirect_to is not None:
            assert crawl.depth[site.url(page.redirect_to)] == crawl.depth[url]
            assert [e.link_type for e in crawl.edges[url]] == ["REDIRECT"]
    errors = [u for u, status in crawl.statuses.items() if status == 500]
    assert errors and all(crawl.attempts[u] == 2 for u in errors)
    assert all(crawl.depth[u] <= 3 for u in crawl.fetched)


def test_the_trap_is_bounded_only_by_the_guard(site: BoundSite) -> None:
    def trap_pages(max_depth: int, guarded: bool) -> int:
        refuse = trap_guard if guarded else (lambda url: False)
        crawl = reference_crawl(site, max_depth, refuse=refuse)
        return sum(1 for url in crawl.fetched if TRAP_ROOT in url)

    assert trap_pages(6, guarded=False) < trap_pages(9, guarded=False)
    assert trap_pages(6, guarded=True) == trap_pages(9, guarded=True) == 4


def test_a_budget_keeps_a_breadth_first_prefix(site: BoundSite) -> None:
    full = reference_crawl(site, 4, refuse=trap_guard)
    capped = reference_crawl(site, 4, refuse=trap_guard, max_links=70)
    assert len(capped.depth) == 70
    boundary = max(capped.depth.values())
    # A redirect target is admitted only when its redirect is fetched, after links of one level
    # deeper may have taken the budget: the prefix holds for linked pages.
    targets = {site.url(p.redirect_to) for p in site.graph.pages.values() if p.redirect_to}
    shallow = {u for u, d in full.depth.items() if d < boundary and u not in targets}
    assert shallow <= set(capped.depth)


def test_context_window_drops_words_cut_at_the_edges() -> None:
    stream = "alpha beta gamma LINK delta epsilon zeta"
    start = stream.index("LINK")
    assert context_window(stream, start, start + 4, side=8) == "gamma LINK delta"
    assert relative_path("/guide/page-1", "/api/page-2") == "../api/page-2"
    assert relative_path("/trap/next/", "/trap/next/next/") == "next/"
    assert relative_path("/a/b", "/a/") == "./"


def test_the_server_answers_as_the_model_says() -> None:
    graph = generate_site(60, hosts=2, levels=3, seed=3)
    with SiteServer(graph) as server:
        site = server.site

        def get(url: str) -> tuple[int, str, str]:
            opener = urllib.request.build_opener(_NoRedirect)
            try:
                with opener.open(url, timeout=10) as response:
                    return response.status, response.read().decode(), ""
            except urllib.error.HTTPError as error:
                return error.code, "", error.headers.get("Location", "")

        assert get(site.seed_url) == (200, site.render_html(graph.home), "")
        assert "Disallow: /private/" in get(site.origin(0) + "/robots.txt")[1]
        assert get(site.origin(1) + "/nowhere")[0] == 404
        redirect = next(p for p in graph.pages.values() if p.kind == "redirect")
        status, _, location = get(site.url(redirect.address))
        assert status == 301 and redirect.redirect_to is not None
        assert canonical_url(location, site.url(redirect.address)) == site.url(redirect.redirect_to)
        broken = next((p for p in graph.pages.values() if p.kind == "error"), None)
        if broken is not None:
            assert get(site.url(broken.address))[0] == 500
        assert len(server.page_requests()) >= 3
        assert set(server.smallest_gap_s()) <= {0, 1}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None
