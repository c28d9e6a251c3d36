"""XML sitemaps and sitemap indexes (sitemaps.org protocol 0.9), and news feeds (RSS 2.0, RSS 1.0,
Atom), plain or gzip-compressed: documents that list URLs, read by one locked-down pull parser.

They come from anyone, so the XML parser is locked down the defusedxml way: no entity is
expanded (``resolve_entities=False``: no billion laughs, no quadratic blow-up), no DTD or external
entity is loaded (``load_dtd=False``, ``no_network=True``: no XXE), libxml2's size and depth limits
stay on (``huge_tree=False``), and comments and processing instructions are dropped. Entity
references other than the five predefined ones and character references therefore vanish from the
text. The parser recovers from malformed XML, and a bare ``&`` (the commonest sitemap error, in
query strings) is escaped before parsing so the URL survives. When libxml2 stops at one of its
limits (entity amplification, nesting depth), the entries finished before that are kept and the
error says the parser stopped. That is read from its error log, not from the root's end tag, which
lxml 6.2 and later make up at ``close`` for whatever was left open.

Limits, from the protocol: at most :data:`MAX_DECOMPRESSED_BYTES` (50 MiB) of XML, after gunzip,
and :data:`MAX_URLS` (50,000) entries; what lies beyond is counted, not returned. The document is
fed to a pull parser in chunks and finished entries are cleared, so memory stays near the size of
the input, whatever its shape.

Every ``<loc>`` is resolved against the sitemap's URL (the protocol wants absolute URLs; a relative
one is resolved, not refused) and canonicalised; invalid ones and repeats are counted, not
returned. ``<priority>`` is a float in 0..1, anything else is None. ``<lastmod>`` is a W3C
datetime (``2026-12-07``, ``2026-12-07T10:30:00+01:00``, ``2026-12-07T09:30Z``; a year or a month
alone too), read as epoch milliseconds, UTC where no zone is given; anything else, or a time
before 1970, is None. Only a ``<loc>`` that is a
direct child of ``<url>`` or ``<sitemap>`` counts, so image and video extensions
(``<image:loc>``) are not taken for pages.

Feeds, by their root: ``<rss>`` (RSS 2.0), ``<rdf:RDF>`` (RSS 1.0), ``<feed>`` (Atom). Each item's
(entry's) page is its first non-empty ``<link>`` (Atom: the ``href`` of its first ``alternate``
link, the default relation), else an RSS ``<guid>`` not marked ``isPermaLink="false"``, else an
RSS 1.0 item's ``rdf:about``; channel-level links are not items. Its time is Atom's ``<updated>``
(else ``<published>``), RSS's ``<pubDate>`` (RFC 822, as `email.utils` reads it) or a Dublin Core
``<dc:date>``, so a recrawling crawl fetches again at once an article a feed says was updated.
Feeds have no priorities. ``xml:base`` is not applied: links resolve against the feed's URL.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

from lxml import etree

from schemas.canonical import canonical_url

MAX_DECOMPRESSED_BYTES = 50 * 1024 * 1024
MAX_URLS = 50_000

SitemapKind = Literal["urlset", "sitemapindex", "rss", "atom", "jsonfeed", "unknown"]
FEED_KINDS = frozenset({"rss", "atom", "jsonfeed"})

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK_BYTES = 256 * 1024
# A CDATA section (kept as it is) or an ampersand that starts no reference (escaped).
_BARE_AMPERSAND = re.compile(
    rb"<!\[CDATA\[.*?(?:\]\]>|$)|&(?!#[0-9]+;|#[xX][0-9a-fA-F]+;|[A-Za-z][A-Za-z0-9._-]*;)",
    re.DOTALL,
)
_RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"
_HALTS = frozenset({etree.ErrorTypes.ERR_RESOURCE_LIMIT, etree.ErrorTypes.ERR_ENTITY_LOOP})
"""libxml2's errors on which it stops parsing on purpose (entity amplification, nesting depth)."""
_ROOT_KINDS: dict[str, SitemapKind] = {
    "urlset": "urlset",
    "sitemapindex": "sitemapindex",
    "rss": "rss",
    "RDF": "rss",
    "feed": "atom",
}
_ENTRY_OF_KIND = {"urlset": "url", "sitemapindex": "sitemap", "rss": "item", "atom": "entry"}
_FEED_TIMES = {"updated": 0, "pubDate": 0, "date": 0, "published": 1}
"""The entry's time elements by preference (lower wins; the first of equals)."""


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """One ``<url>``, ``<sitemap>`` or feed item: a canonical URL, its priority hint, and whether it
    is a sitemap."""

    url: str
    priority: float | None
    is_sitemap: bool
    modified_at: int | None = None
    """Its ``<lastmod>`` (a feed item's time), epoch milliseconds."""


@dataclass(frozen=True)
class Sitemap:
    """What one sitemap document yielded, and what it did not and why."""

    kind: SitemapKind
    entries: list[SitemapEntry]
    invalid_urls: int = 0
    """``<loc>`` values that are missing, not http(s), or not a URL."""
    duplicates: int = 0
    """Entries whose canonical URL an earlier entry already had (the first one is kept)."""
    over_cap: int = 0
    """Valid entries past :data:`MAX_URLS`."""
    truncated: bool = False
    """The decompressed document was cut at the size limit (or the gzip stream ended early)."""
    error: str | None = None
    """Why the document is not (wholly) a sitemap: corrupt gzip, not XML, an unknown root."""

    @property
    def is_feed(self) -> bool:
        return self.kind in FEED_KINDS


def is_gzip(body: bytes) -> bool:
    return body.startswith(_GZIP_MAGIC)


def parse_sitemap(
    body: bytes,
    sitemap_url: str,
    *,
    max_bytes: int = MAX_DECOMPRESSED_BYTES,
    max_urls: int = MAX_URLS,
) -> Sitemap:
    """Parse a sitemap, sitemap index or feed, gzip-compressed or not; never raises on bad input."""
    error = None
    truncated = False
    if is_gzip(body):
        body, truncated, error = _gunzip(body, max_bytes)
    elif len(body) > max_bytes:
        body, truncated = body[:max_bytes], True
    reader = _SitemapReader(sitemap_url, max_urls)
    parse_error = reader.read(_BARE_AMPERSAND.sub(_escape_ampersand, body))
    if error is None:
        if reader.kind == "unknown":
            root = reader.root_name or ""
            error = parse_error or f"not a sitemap or feed: root element <{root}>"
        elif not reader.complete and not truncated:
            # libxml2 stops at what it deems an attack (entity amplification) or a fatal error.
            error = parse_error or "the XML parser stopped before the end of the document"
    return Sitemap(
        kind=reader.kind,
        entries=reader.entries,
        invalid_urls=reader.invalid_urls,
        duplicates=reader.duplicates,
        over_cap=reader.over_cap,
        truncated=truncated,
        error=error,
    )


def _escape_ampersand(match: re.Match[bytes]) -> bytes:
    return b"&amp;" if match.group() == b"&" else match.group()


def _gunzip(body: bytes, max_bytes: int) -> tuple[bytes, bool, str | None]:
    """Decompress up to ``max_bytes``: (data, truncated, error).

    Concatenated gzip members are all read (RFC 1952); bytes after the last one that start no
    member (padding) are ignored, as ``gzip -d`` does.
    """
    output = bytearray()
    remaining = body
    try:
        while remaining.startswith(_GZIP_MAGIC):
            if len(output) >= max_bytes:  # (a max_length of 0 would mean no limit at all)
                return bytes(output), True, None
            inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
            output += inflater.decompress(remaining, max_bytes - len(output))
            if not inflater.eof:
                # Either the size limit was reached or the stream ends early (a cut download).
                return bytes(output), True, None
            remaining = inflater.unused_data
    except zlib.error as error:
        return bytes(output), True, f"corrupt gzip data: {error}"
    return bytes(output), False, None


class _SitemapReader:
    """Pull-parser events to entries; one instance per document."""

    def __init__(self, sitemap_url: str, max_urls: int) -> None:
        self.sitemap_url = sitemap_url
        self.max_urls = max_urls
        self.kind: SitemapKind = "unknown"
        self.root_name: str | None = None
        self.complete = False
        """The root element's end was seen and libxml2 did not give up half way (`read`)."""
        self.entries: list[SitemapEntry] = []
        self.invalid_urls = 0
        self.duplicates = 0
        self.over_cap = 0
        self._seen: set[str] = set()
        self._entry_tag = ""
        self._entry: Any = None
        self._loc: str | None = None
        self._fallback: str | None = None
        """A feed item's guid or rdf:about, its page when it has no link."""
        self._priority: float | None = None
        self._modified_at: int | None = None
        self._time_rank = len(_FEED_TIMES)

    def read(self, data: bytes) -> str | None:
        """Feed the whole document; returns libxml2's complaint when it could not make a tree."""
        parser = etree.XMLPullParser(
            events=("start", "end"),
            resolve_entities=False,
            no_network=True,
            load_dtd=False,
            huge_tree=False,
            recover=True,
            remove_comments=True,
            remove_pis=True,
        )
        try:
            for start in range(0, len(data), _CHUNK_BYTES):
                parser.feed(data[start : start + _CHUNK_BYTES])
                self._consume(parser.read_events())
            parser.close()
        except etree.LxmlError as error:
            return f"not XML: {error}"
        if any(entry.type in _HALTS for entry in parser.feed_error_log):
            # libxml2 gave up half way: the elements it left open were cut short. lxml 6.2 and
            # later end them at `close` as if the document had; those ends are not taken.
            return None
        self._consume(parser.read_events())
        return None

    def _consume(self, events: Any) -> None:
        for event, element in events:
            tag = element.tag
            if not isinstance(tag, str):
                continue
            name = tag.rpartition("}")[2]
            if event == "start":
                if self.root_name is None:
                    self.root_name = name
                    self.kind = _ROOT_KINDS.get(name, "unknown")
                    self._entry_tag = _ENTRY_OF_KIND.get(self.kind, "")
                elif self._entry is None and name == self._entry_tag:
                    self._entry, self._loc, self._priority = element, None, None
                    self._modified_at, self._time_rank = None, len(_FEED_TIMES)
                    self._fallback = element.get(f"{_RDF}about")
            elif self._entry is not None:
                self._end_inside_entry(name, element)
            elif element.getparent() is None:
                self.complete = True

    def _end_inside_entry(self, name: str, element: Any) -> None:
        if element is self._entry:
            self._finish_entry(self.kind == "sitemapindex")
            element.clear()
            parent = element.getparent()
            while parent is not None and element.getprevious() is not None:
                del parent[0]
            self._entry = None
        elif element.getparent() is self._entry:
            if self.kind in FEED_KINDS:
                self._feed_field(name, element)
            elif name == "loc":
                self._loc = (element.text or "").strip()
            elif name == "priority":
                self._priority = _priority(element.text)
            elif name == "lastmod":
                self._modified_at = lastmod_ms(element.text)

    def _feed_field(self, name: str, element: Any) -> None:
        if name == "link" and not self._loc:
            if self.kind == "atom":
                if (element.get("rel") or "alternate").strip().lower() == "alternate":
                    self._loc = (element.get("href") or "").strip()
            else:
                self._loc = (element.text or "").strip()
        elif name == "guid" and self._fallback is None:
            if (element.get("isPermaLink") or "true").strip().lower() != "false":
                self._fallback = (element.text or "").strip()
        elif name in _FEED_TIMES and _FEED_TIMES[name] < self._time_rank:
            moment = pubdate_ms(element.text) if name == "pubDate" else lastmod_ms(element.text)
            if moment is not None:
                self._modified_at, self._time_rank = moment, _FEED_TIMES[name]

    def _finish_entry(self, is_sitemap: bool) -> None:
        if self.kind == "unknown":
            return
        location = self._loc or self._fallback
        url = canonical_url(location, self.sitemap_url) if location else None
        if url is None:
            self.invalid_urls += 1
        elif url in self._seen:
            self.duplicates += 1
        elif len(self.entries) >= self.max_urls:
            self.over_cap += 1
        else:
            self._seen.add(url)
            priority = None if is_sitemap else self._priority
            self.entries.append(SitemapEntry(url, priority, is_sitemap, self._modified_at))


_YEAR_OR_MONTH = re.compile(r"^(\d{4})(?:-(\d{2}))?$")


def lastmod_ms(text: str | None) -> int | None:
    """A ``<lastmod>`` (W3C datetime) as epoch milliseconds; None when it is not one."""
    value = (text or "").strip()
    short = _YEAR_OR_MONTH.match(value)
    try:
        if short is not None:
            moment = datetime(int(short[1]), int(short[2] or 1), 1, tzinfo=UTC)
        else:
            moment = datetime.fromisoformat(value)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
    except ValueError:
        return None
    millis = round(moment.timestamp() * 1000)
    return millis if millis >= 0 else None


def pubdate_ms(text: str | None) -> int | None:
    """An RSS ``<pubDate>`` (RFC 822, ``Mon, 07 Dec 2026 10:30:00 GMT``) as epoch milliseconds;
    None when it is not one. Feeds get it wrong often: a W3C datetime is taken too."""
    value = (text or "").strip()
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return lastmod_ms(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    millis = round(moment.timestamp() * 1000)
    return millis if millis >= 0 else None


def _priority(text: str | None) -> float | None:
    try:
        value = float((text or "").strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and 0.0 <= value <= 1.0 else None
