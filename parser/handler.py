"""The parser's pure logic: one fetched page in, its messages for `links` and `urls` out (no Kafka).

DESIGN.md section 3, step 6. For every page that names a valid URL, :meth:`PageParser.parse`
returns, in the order to produce them:

1. the page's ``PageLinks`` on `links`, keyed by the canonical URL the body came from
   (``final_url``, else ``url``), in parts under the topic's 4 MiB limit; exactly one empty
   message when the page has no links or is not parsed at all;
2. ``DiscoveredUrls`` on `urls`, one per target host (parts if large), first-seen host order,
   depth + 1, ``source_url`` the page; then, when the page refreshes to another URL (a redirect,
   `parser.refresh`), one for its target at the page's own depth with one more redirect hop,
   origin ``<lease id>/refresh``; then, in a crawl of page requisites (``find_requisites``), the
   page's requisites by host (`parser.requisites`), flagged ``requisites``, at the page's own
   depth with one more hop, origin ``<lease id>/requisites``;
3. the ``ParseReport`` on `urls`, keyed by the leased page's host, counting the messages of step 2
   (``redirect_messages``: how many of them are at the page's own depth, the refresh's and the
   requisites').

Between 1 and 2, an HTML page whose fetch carried the crawl's selectors (``FetchedPage.extract``)
gets its ``ExtractedItem`` on `items`, keyed by the same URL (`parser.items`); other pages
(sitemaps, pages not parsed) get none.

What is parsed: HTML (``text/html``, ``application/xhtml+xml``, or no Content-Type and no sitemap
look) when the status is 2xx (any status with ``parse_error_pages``); sitemaps and feeds (XML, RSS,
Atom or gzip content types, or a ``.xml``/``.xml.gz`` path or a sitemap or feed root element with
no telling content type), whose ``<loc>`` URLs (a feed's item links) become DiscoveredUrls with
their priority and time and no edges (`parser.sitemaps`); JSON Feeds (``application/feed+json``,
or JSON that names the jsonfeed.org version) likewise (`parser.jsonfeed`); in a crawl of page
requisites, stylesheets (``text/css``), whose fonts, images and imports are requisites too.
Anything else passes through with an empty PageLinks and a report of zero. A body the fetcher cut
at its limit is parsed as far as it goes.

What is discovered: every edge's target except the page itself, and except, unless the crawl has
``follow_nofollow``, links with rel nofollow, ugc or sponsored (all three ask crawlers not to
endorse, hence not to follow). A crawl's ``follow_within`` keeps only the links inside the regions
it matches (`parser.items.links_within`). A page-level robots ``nofollow`` (meta or X-Robots-Tag)
suppresses all discovery, whatever ``follow_nofollow`` says; the edges still go to the link graph.
A refresh target is followed whatever these say, as the fetcher follows an HTTP redirect: it is
where the page went, not a link on it. The frontier refuses it past the crawl's ``max_redirects``.
With ``use_feeds`` (`schemas.seeds.CrawlRequest`), the feeds a page announces in its head are
discovered like its links (unless the page says nofollow), whatever ``follow_within`` matches.
A page's requisites are sent whatever nofollow and ``follow_within`` say: they are not links but
what the page is made of, as a browser loads them.

Output is a function of the input only: ``discovered_at`` defaults to the page's ``fetched_at``, so
a redelivered page yields identical messages, and the link graph's upserts stay idempotent.

The handler never raises on page content. An undecodable body (binary bytes where text is expected)
is a ``undecodable`` result, and an unexpected error inside extraction a ``failed`` one that keeps
the exception for the service to log; both still carry the empty PageLinks and the report, so the
frontier can finish the crawl. Only a page whose URL has no http(s) host gets no messages
(``invalid_page``): nothing can be keyed by it, so the service dead-letters it. A ``revisit`` page
(a recrawl that found unchanged content; it has no body) gets no messages either: its outcome told
the frontier to expect no report, and its links are the ones already sent.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from pydantic import BaseModel

from parser.decoding import decode_body, is_wide_encoding, looks_binary
from parser.extract import (
    PageExtract,
    canonical_host_key,
    extract_page,
    header_value,
    is_nofollow,
)
from parser.items import ItemFields
from parser.jsonfeed import looks_like_json_feed, parse_json_feed
from parser.requisites import css_requisites
from parser.settings import ParserSettings
from parser.sitemaps import Sitemap, SitemapEntry, is_gzip, parse_sitemap
from schemas import items as items_topic
from schemas import links as links_topic
from schemas import urls as urls_topic
from schemas.canonical import canonical_url, host_key
from schemas.items import ExtractedItem
from schemas.links import MAX_TITLE_CHARS, LinkEdge, PageLinks, PageMeta
from schemas.pages import FetchedPage
from schemas.seeds import FEED_MEDIA_TYPES, SITEMAP_MEDIA_TYPES
from schemas.serde import PART_HEADROOM_BYTES, encode, split_into_parts
from schemas.urls import DiscoveredUrl, DiscoveredUrls, ParseReport

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

ParseStatus = Literal[
    "html",
    "sitemap",
    "feed",
    "stylesheet",
    "skipped",
    "undecodable",
    "failed",
    "invalid_page",
    "revisit",
]
BodyKind = Literal["html", "sitemap", "jsonfeed", "css", "other"]
"""Which parser reads a body: `parser.extract`, `parser.sitemaps` (sitemaps and XML feeds),
`parser.jsonfeed`, `parser.requisites` (a stylesheet, in a crawl of page requisites), none."""

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_JSON_TYPES = frozenset({"application/feed+json", "application/json"})
_SITEMAP_TYPES = (frozenset(SITEMAP_MEDIA_TYPES) | frozenset(FEED_MEDIA_TYPES)) - _JSON_TYPES
_UNTELLING_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
_SITEMAP_SUFFIXES = (".xml", ".xml.gz")
_SITEMAP_ROOT = re.compile(rb"<(?:[A-Za-z][\w.-]*:)?(?:urlset|sitemapindex|rss|RDF|feed)[\s>]")
"""The root element of a sitemap or a feed, namespace prefix or not, near the start of a body."""
_SNIFF_BYTES = 2048

_UrlItem = dict[str, str | float | int | None]
"""A DiscoveredUrl as a dict: validated with its message in one call, which is much cheaper."""


@dataclass(frozen=True, slots=True)
class Outbound:
    """One message to produce: topic suffix (`links`, `items` or `urls`), key, the model, and its
    encoding (`schemas.serde.encode`, the bytes produced; made once, for the size check that
    decides on parts)."""

    topic: str
    key: str
    value: PageLinks | ExtractedItem | DiscoveredUrls | ParseReport
    encoded: bytes = field(repr=False, compare=False)


@dataclass(frozen=True)
class ParseResult:
    """What the service produces for one page, plus what it learnt, for logs and metrics."""

    status: ParseStatus
    messages: list[Outbound]
    error: str | None = None
    failure: Exception | None = None
    """The unexpected exception behind a ``failed`` result, traceback included."""
    encoding: str | None = None
    extract: PageExtract | None = None
    sitemap: Sitemap | None = None
    discovered_messages: int = field(init=False)

    def __post_init__(self) -> None:
        count = sum(isinstance(message.value, DiscoveredUrls) for message in self.messages)
        object.__setattr__(self, "discovered_messages", count)


class PageParser:
    """Parses fetched pages into link and URL messages; stateless, so one instance serves all."""

    def __init__(self, settings: ParserSettings | None = None) -> None:
        self.settings = settings or ParserSettings()

    @classmethod
    def from_settings(cls, settings: ParserSettings) -> PageParser:
        return cls(settings)

    def parse(
        self, page: FetchedPage, body: bytes, discovered_at: int | None = None
    ) -> ParseResult:
        """The messages for ``page`` and its ``body``; see the module docstring."""
        if page.revisit:
            return ParseResult("revisit", [])
        from_url = canonical_url(page.final_url) or canonical_url(page.url)
        try:
            report_host = host_key(page.url)
        except ValueError:
            report_host = None
        if from_url is None or report_host is None:
            return ParseResult("invalid_page", [], error=f"no http(s) host in {page.url[:200]!r}")
        at = page.fetched_at if discovered_at is None else discovered_at
        output = _Output(page, from_url, report_host, at)
        kind = body_kind(page, from_url, body)
        if kind == "other" or not (self.settings.parse_error_pages or 200 <= page.status < 300):
            return output.result("skipped")
        try:
            if kind == "sitemap":
                sitemap = self._parse_sitemap(output, body)
                return self._listing(output, sitemap, "feed" if sitemap.is_feed else "sitemap")
            if kind == "css":
                return self._stylesheet(output, body)
            if kind == "jsonfeed":
                max_urls = self.settings.max_sitemap_urls
                return self._listing(
                    output, parse_json_feed(body, output.from_url, max_urls=max_urls), "feed"
                )
            return self._html(output, body)
        except Exception as error:  # mapped to a "failed" result: the page is still reported
            return output.result("failed", error=f"{type(error).__name__}: {error}", failure=error)

    def _html(self, output: _Output, body: bytes) -> ParseResult:
        page = output.page
        decoded = decode_body(body, content_type_of(page))
        if not is_wide_encoding(decoded.encoding) and looks_binary(body):
            return output.result("undecodable", error="binary data in a text body")
        extract = extract_page(
            output.from_url,
            page.headers,
            decoded.text,
            discovered_at=output.discovered_at,
            max_links=self.settings.max_links,
            robots_names=self.settings.robots_names,
            selectors=page.extract.fields if page.extract is not None else None,
            follow_within=page.follow_within,
            max_refresh_delay_s=self.settings.max_refresh_delay_s,
            sign_text=page.sign_text,
            find_requisites=page.find_requisites,
        )
        targets: list[tuple[str, _UrlItem]] = []
        followable = extract.followable
        refresh = extract.refresh
        if not extract.robots.nofollow:
            targets = [
                (link.host, {"url": link.edge.to_url})
                for link in extract.links
                if link.edge.to_url != output.from_url
                and link is not refresh
                and (page.follow_nofollow or not is_nofollow(link.edge))
                and (followable is None or link.edge.to_url in followable)
            ]
            if page.use_feeds:
                targets += _feed_targets(extract.feeds, output.from_url, targets)
        return output.result(
            "html",
            edges=extract.edges,
            targets=targets,
            redirects=[] if refresh is None else [(refresh.host, {"url": refresh.edge.to_url})],
            requisites=_requisite_targets(extract.requisites, output.from_url),
            error=extract.parse_error,
            encoding=decoded.encoding,
            extract=extract,
        )

    def _stylesheet(self, output: _Output, body: bytes) -> ParseResult:
        """A stylesheet's fonts, images and imports, as the requisites of the page it serves."""
        decoded = decode_body(body, content_type_of(output.page))
        if not is_wide_encoding(decoded.encoding) and looks_binary(body):
            return output.result("undecodable", error="binary data in a text body")
        found = css_requisites(decoded.text, output.from_url)
        return output.result(
            "stylesheet",
            requisites=_requisite_targets(found, output.from_url),
            encoding=decoded.encoding,
        )

    def _parse_sitemap(self, output: _Output, body: bytes) -> Sitemap:
        return parse_sitemap(
            body,
            output.from_url,
            max_bytes=self.settings.max_sitemap_bytes,
            max_urls=self.settings.max_sitemap_urls,
        )

    def _listing(self, output: _Output, sitemap: Sitemap, status: ParseStatus) -> ParseResult:
        """A sitemap's or a feed's entries as DiscoveredUrls, one link deeper, without edges."""
        targets: list[tuple[str, _UrlItem]] = [
            (canonical_host_key(entry.url), _sitemap_item(entry))
            for entry in sitemap.entries
            if entry.url != output.from_url
        ]
        return output.result(status, targets=targets, error=sitemap.error, sitemap=sitemap)


def _feed_targets(
    feeds: Sequence[str], from_url: str, targets: list[tuple[str, _UrlItem]]
) -> list[tuple[str, _UrlItem]]:
    """The page's feeds as targets, those it also links to or is itself left out."""
    linked = {item["url"] for _, item in targets}
    return [
        (canonical_host_key(feed), {"url": feed})
        for feed in feeds
        if feed != from_url and feed not in linked
    ]


def _sitemap_item(entry: SitemapEntry) -> _UrlItem:
    """A sitemap entry as a DiscoveredUrl, its hints given only when the sitemap has them."""
    item: _UrlItem = {"url": entry.url, "priority": entry.priority}
    if entry.modified_at is not None:
        item["modified_at"] = entry.modified_at
    return item


def content_type_of(page: FetchedPage) -> str:
    """The Content-Type header value, parameters included, else the page's ``content_type``."""
    return header_value(page.headers, "content-type") or page.content_type or ""


def body_kind(page: FetchedPage, url: str, body: bytes) -> BodyKind:
    """Which parser a body goes to, by media type, then path suffix, then a look at the bytes."""
    media = content_type_of(page).partition(";")[0].strip().lower()
    if media in _HTML_TYPES:
        return "html"
    if media == "text/css":
        return "css" if page.find_requisites else "other"
    if media in _SITEMAP_TYPES:
        return "sitemap"
    if media in _JSON_TYPES or media in _UNTELLING_TYPES:
        if media == "application/feed+json" or looks_like_json_feed(body[:_SNIFF_BYTES]):
            return "jsonfeed"
        if media in _JSON_TYPES:
            return "other"
    if media not in _UNTELLING_TYPES:
        return "other"
    if url.partition("?")[0].lower().endswith(_SITEMAP_SUFFIXES) or is_gzip(body):
        return "sitemap"
    if _SITEMAP_ROOT.search(body, 0, _SNIFF_BYTES):
        return "sitemap"
    return "html" if media == "" else "other"


class _Output:
    """Builds one page's messages; holds what every message of the page shares."""

    def __init__(self, page: FetchedPage, from_url: str, report_host: str, at: int) -> None:
        self.page = page
        self.from_url = from_url
        self.report_host = report_host
        self.discovered_at = at

    def result(
        self,
        status: ParseStatus,
        *,
        edges: list[LinkEdge] | None = None,
        targets: Iterable[tuple[str, _UrlItem]] = (),
        redirects: Iterable[tuple[str, _UrlItem]] = (),
        requisites: Iterable[tuple[str, _UrlItem]] = (),
        error: str | None = None,
        failure: Exception | None = None,
        encoding: str | None = None,
        extract: PageExtract | None = None,
        sitemap: Sitemap | None = None,
    ) -> ParseResult:
        messages = self._page_links(edges or [], self._meta(extract))
        if extract is not None and extract.item is not None:
            messages.append(self._item(extract.item))
        page = self.page
        discovered = self._discovered(targets, page.depth + 1, 0, page.lease_id)
        hops = page.redirect_hops + 1
        redirected = self._discovered(redirects, page.depth, hops, f"{page.lease_id}/refresh")
        embedded = self._discovered(
            requisites, page.depth, hops, f"{page.lease_id}/requisites", requisites=True
        )
        same_depth = len(redirected) + len(embedded)
        report = ParseReport(
            crawl_id=page.crawl_id,
            page_url=page.url,
            lease_id=page.lease_id,
            discovered_messages=len(discovered) + same_depth,
            redirect_messages=same_depth,
        )
        messages += discovered + redirected + embedded
        report_key = urls_topic.key(self.report_host)
        messages.append(Outbound(urls_topic.TOPIC.suffix, report_key, report, encode(report)))
        return ParseResult(status, messages, error, failure, encoding, extract, sitemap)

    def _item(self, fields: ItemFields) -> Outbound:
        item = ExtractedItem(
            crawl_id=self.page.crawl_id,
            url=self.from_url,
            fetched_at=self.page.fetched_at,
            status=self.page.status,
            fields=fields.values,
            errors=fields.errors,
            truncated=fields.truncated,
        )
        return Outbound(
            items_topic.TOPIC.suffix, items_topic.key(self.from_url), item, encode(item)
        )

    def _meta(self, extract: PageExtract | None) -> PageMeta:
        meta = PageMeta(status=self.page.status, content_type=self.page.content_type)
        if extract is None:
            return meta
        return meta.model_copy(
            update={
                "title": extract.title[:MAX_TITLE_CHARS] if extract.title else None,
                "canonical": extract.canonical,
                "language": extract.language,
                "noindex": extract.robots.noindex,
                "nofollow": extract.robots.nofollow,
                "text_length": extract.visible_text_length,
                "text_minhash": extract.text_minhash,
            }
        )

    def _page_links(self, edges: list[LinkEdge], meta: PageMeta) -> list[Outbound]:
        build = functools.partial(_build_page_links, self.page, self.from_url, meta)
        whole = build(edges, 0, 1)
        key = links_topic.key(self.from_url)
        parts = _in_parts(whole, whole.edges, build, links_topic.TOPIC.max_message_bytes)
        return [Outbound(links_topic.TOPIC.suffix, key, part, encoded) for part, encoded in parts]

    def _discovered(
        self,
        targets: Iterable[tuple[str, _UrlItem]],
        depth: int,
        hops: int,
        origin: str,
        *,
        requisites: bool = False,
    ) -> list[Outbound]:
        """``targets`` as DiscoveredUrls, one message per host (parts if large)."""
        by_host: dict[str, list[_UrlItem]] = {}
        for host, url in targets:
            by_host.setdefault(host, []).append(url)
        messages: list[Outbound] = []
        for host, urls in by_host.items():
            build = functools.partial(
                _build_discovered, self, host, depth, hops, origin, requisites
            )
            whole = build(urls, 0, 1)
            parts = _in_parts(whole, whole.urls, build, urls_topic.TOPIC.max_message_bytes)
            key = urls_topic.key(host)
            messages += [
                Outbound(urls_topic.TOPIC.suffix, key, part, encoded) for part, encoded in parts
            ]
        return messages


def _in_parts(
    whole: M, items: Sequence[T], build: Callable[[list[T], int, int], M], max_bytes: int
) -> list[tuple[M, bytes]]:
    """``whole`` and its encoding when it fits (nearly always), else its ``items`` (models) split
    into parts, each with its encoding.

    One encoding of the whole message is much cheaper than ``split_into_parts``' per-item sizing,
    and it is the one produced.
    """
    encoded = encode(whole)
    if len(encoded) <= max_bytes - PART_HEADROOM_BYTES:
        return [(whole, encoded)]
    return [(part, encode(part)) for part in split_into_parts(items, build, max_bytes)]


def _build_page_links(
    page: FetchedPage, from_url: str, meta: PageMeta, edges: list[LinkEdge], part: int, parts: int
) -> PageLinks:
    """One part of the page's out-links; the first carries the page's metadata."""
    return PageLinks(
        crawl_id=page.crawl_id,
        from_url=from_url,
        fetched_at=page.fetched_at,
        edges=edges,
        part=part,
        parts=parts,
        page=meta if part == 0 else None,
    )


def _build_discovered(
    output: _Output,
    host: str,
    depth: int,
    hops: int,
    origin: str,
    requisites: bool,
    urls: list[_UrlItem] | list[DiscoveredUrl],
    part: int,
    parts: int,
) -> DiscoveredUrls:
    return DiscoveredUrls.model_validate(
        {
            "crawl_id": output.page.crawl_id,
            "host": host,
            "depth": depth,
            "source_url": output.from_url,
            "redirect_hops": hops,
            "discovered_at": output.discovered_at,
            "urls": urls,
            "part": part,
            "parts": parts,
            "origin": origin,
            "requisites": requisites,
        }
    )


def _requisite_targets(urls: Iterable[str], page_url: str) -> list[tuple[str, _UrlItem]]:
    """The requisites to discover, by host: all but the page itself."""
    return [(canonical_host_key(url), {"url": url}) for url in urls if url != page_url]
