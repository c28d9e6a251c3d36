"""`streamcrawl broken CRAWL_ID [--limit N] [--links N] [--json]`: a crawl's broken links.

What a site owner runs a crawler for as often as anything (Xenu, Screaming Frog's "broken links"):
each URL of the crawl that ended dead for the link's sake, and the pages that link to it, with the
anchor text a reader clicked. The dead URLs are the frontier's dead letters of the crawl
(`streamcrawl deadletters`); the pages linking to each come from the link graph's in-links
(`streamcrawl graph in`), so the answer covers every page of every crawl that links there, not
only the one that happened to be followed first.

Broken means a permanent failure (a 404, a 410, a 403, ...), retries exhausted (5xx, timeouts,
DNS), or a redirect that leads nowhere or too far. Not broken: a URL robots.txt denies, and a
lease that expired (the fetcher's trouble, not the link's). The `--limit` newest broken URLs are
listed, oldest first, each with at most `--links` pages linking to it. With no linkgraph instance
running the URLs are listed alone, with a note, and the exit status is 1.

A crawl with page requisites (``--page-requisites``) also names the pages a broken stylesheet,
image, script or font is a requisite of (a site audit's broken images): requisites are no links,
so the link graph does not know them, and they are read from the parser's requisite messages on
`urls` instead (`embedded_in`), for the broken URLs no page links to.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from schemas import urls
from schemas.exceptions import DecodeError
from schemas.outcomes import FetchOutcome
from schemas.serde import decode
from streamcrawl.console import counted, note, say
from streamcrawl.deadletter_cli import Letter, read_letters
from streamcrawl.graph_cli import GraphApiError, call_any, graph_api_addresses
from streamcrawl.kafka import read_to_end
from streamcrawl.newest import Newest
from streamcrawl.settings import Settings
from streamcrawl.status import require_broker
from streamcrawl.topics import topic_name
from streamcrawl.watch import crawl_state

BROKEN_REASONS = frozenset(
    {"permanent", "retries_exhausted", "too_many_redirects", "redirect_no_target"}
)
DEFAULT_LIMIT = 100
DEFAULT_LINKS = 20


@dataclass
class BrokenUrl:
    """A dead URL of the crawl, its failure, and the pages linking to it."""

    url: str
    reason: str
    status: int | None
    error: str | None
    at: int
    linked_from: list[dict[str, Any]] = field(default_factory=list)
    more_links: bool = False
    embedded_in: list[str] = field(default_factory=list)
    """The pages it is a requisite of (crawls with page requisites)."""

    @classmethod
    def of(cls, letter: Letter) -> BrokenUrl | None:
        """The broken URL a dead letter names, or None when the letter is no broken link."""
        if letter.letter.stage != "frontier" or letter.url is None:
            return None
        if letter.reason not in BROKEN_REASONS:
            return None
        try:
            outcome = decode(FetchOutcome, letter.letter.payload)
        except DecodeError:
            outcome = None
        return cls(
            url=letter.url,
            reason=letter.reason,
            status=None if outcome is None else outcome.status,
            error=None if outcome is None else outcome.error,
            at=letter.letter.at,
        )

    @property
    def failure(self) -> str:
        """The status when there was one, else the error's label (timeout, dns, ...)."""
        if self.status is not None:
            return str(self.status)
        return (self.error or self.reason).split(":", 1)[0]

    def lines(self) -> list[str]:
        lines = [f"{self.failure:<7} {self.url}  ({self.reason})"]
        for link in self.linked_from:
            anchor = f"  {link['anchor_text']!r}" if link.get("anchor_text") else ""
            lines.append(f"        <- {link['from_url']}{anchor}  [{link['link_type']}]")
        if self.more_links:
            lines.append("        <- ... (more: streamcrawl graph in URL)")
        lines += [f"        <- {page}  [requisite]" for page in self.embedded_in]
        return lines

    def as_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "reason": self.reason,
            "status": self.status,
            "error": self.error,
            "linked_from": self.linked_from,
            "more_links": self.more_links,
            "embedded_in": self.embedded_in,
        }


def add_command(commands: Any) -> None:
    parser = commands.add_parser(
        "broken", help="a crawl's broken links: dead URLs and the pages linking to them"
    )
    parser.add_argument("crawl_id", metavar="CRAWL_ID", help="the crawl (see streamcrawl crawls)")
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help="the N newest broken URLs (default: %(default)s)",
    )
    parser.add_argument(
        "--links",
        type=int,
        default=DEFAULT_LINKS,
        help="pages linking to each, at most (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per broken URL")
    parser.set_defaults(run=cmd_broken)


def cmd_broken(args: argparse.Namespace, settings: Settings) -> int:
    require_broker(settings)
    broken = newest_broken(read_letters(settings), args.crawl_id, max(args.limit, 0))
    graph_error = None
    if broken:
        try:
            addresses = graph_api_addresses(settings)
            for item in broken:
                link_to(item, addresses, max(args.links, 1))
        except GraphApiError as error:
            graph_error = str(error)
        state = crawl_state(settings, args.crawl_id)
        if state is not None and state.request.fetch_page_requisites:
            topic = topic_name(settings, urls.TOPIC)
            values = (value for _, value, _ in read_to_end(settings, topic))
            embed_in(broken, values, args.crawl_id, max(args.links, 1))
    for item in broken:
        if args.json:
            say(json.dumps(item.as_json()))
        else:
            for line in item.lines():
                say(line)
    note(summary(broken, args.crawl_id))
    if graph_error is not None:
        note(f"no pages linking to them: the link graph did not answer ({graph_error})")
        return 1
    return 0


def newest_broken(letters: Iterable[Letter], crawl_id: str, limit: int) -> list[BrokenUrl]:
    """The ``limit`` newest broken URLs of the crawl, oldest first, each once (its last letter)."""
    latest: dict[str, BrokenUrl] = {}
    for letter in letters:
        if letter.crawl_id != crawl_id:
            continue
        item = BrokenUrl.of(letter)
        if item is not None:
            latest[item.url] = item
    newest: Newest[BrokenUrl] = Newest(limit, lambda item: item.at)
    for item in latest.values():
        newest.add(item)
    return newest.oldest_first()


def link_to(item: BrokenUrl, addresses: list[str], links: int) -> None:
    """Fill in the pages linking to the URL: the graph's live in-links, at most ``links``."""
    params = {"url": item.url, "limit": str(links), "live": "1"}
    status, body = call_any(addresses, "/v1/graph/in", params)
    if status >= 400:
        raise GraphApiError(f"in-links of {item.url}: {status} {body[:200]!r}")
    answer = json.loads(body)
    item.linked_from = [
        {
            "from_url": edge["from_url"],
            "anchor_text": edge["anchor_text"],
            "link_type": edge["link_type"],
            "position": edge["position"],
        }
        for edge in answer["edges"]
    ]
    item.more_links = bool(answer.get("next_cursor"))


_REQUISITES_FLAG = b'"requisites":true'


def embed_in(
    broken: list[BrokenUrl], records: Iterable[bytes | None], crawl_id: str, pages: int
) -> None:
    """Fill in the pages each broken URL no page links to is a requisite of, at most ``pages``,
    from the values of `urls` (the parser's DiscoveredUrls flagged ``requisites``)."""
    wanted = {item.url: item for item in broken if not item.linked_from}
    if not wanted:
        return
    for value in records:
        if value is None or _REQUISITES_FLAG not in value:
            continue
        try:
            message = orjson.loads(value)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(message, dict) or message.get("crawl_id") != crawl_id:
            continue
        source = message.get("source_url")
        for entry in message.get("urls") or ():
            url = entry.get("url") if isinstance(entry, dict) else None
            item = wanted.get(url) if isinstance(url, str) else None
            if item is None or not isinstance(source, str) or len(item.embedded_in) >= pages:
                continue
            if source not in item.embedded_in:
                item.embedded_in.append(source)


def summary(broken: list[BrokenUrl], crawl_id: str) -> str:
    if not broken:
        return f"no broken links in crawl {crawl_id}"
    pages = {link["from_url"] for item in broken for link in item.linked_from}
    pages |= {page for item in broken for page in item.embedded_in}
    unlinked = sum(not item.linked_from and not item.embedded_in for item in broken)
    tail = (
        f"; {unlinked} with no page linking (seeds, sitemap entries, page requisites)"
        if unlinked
        else ""
    )
    urls = counted(len(broken), "broken URL")
    return f"{urls} in crawl {crawl_id}, linked from {counted(len(pages), 'page')}{tail}"
