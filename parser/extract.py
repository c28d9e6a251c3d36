"""From one HTML page to its metadata and its typed link edges (seed document 002's edge record).

:func:`extract_page` parses the text once (lxml through parsel), reads the head with one filtered
C-level iteration, walks the tree once for visible text and links (:mod:`parser.linkwalk`), and
resolves hrefs with a per-page :class:`parser.resolve.LinkResolver` (``canonical_url``'s answers,
faster). libxml2 keeps elements down to a depth of about 2,048; what lies deeper is lost.

Choices, beyond the seed document:

- **Base URL**: the first ``<base href>`` of the document, resolved against the page URL, if it is
  http(s); otherwise the page URL. ``<link rel=canonical>`` resolves against that base.
- **Targets**: every ``a[href]`` and ``area[href]``, resolved against the base and put in
  :func:`schemas.canonical.canonical_url` form (fragment dropped). A href whose scheme is not
  http(s) (mailto, javascript, tel, data, ...) is dropped as ``scheme``; one that is no URL as
  ``invalid``.
- **Duplicates**: one edge per target, from its first occurrence in document order (the first
  anchor is the one a reader meets first, usually the most prominent); later occurrences only add
  to the link's ``occurrences`` count. Self-links (``#top``, the logo on the home page) are edges
  too: the link graph decides whether to count them; the handler does not rediscover them.
- **Cap**: at most ``max_links`` distinct targets. Past the cap, a href already seen is still
  counted as what it was (duplicate, invalid, scheme); any other is dropped as ``cap`` without
  being canonicalised, so links past the cap cost little more than the walk that finds them.
- **Anchor text**: the link's visible text, whitespace-normalised; if empty, the ``alt`` of its
  first image (of the ``area`` itself), then its ``title``. Capped at :data:`MAX_ANCHOR_CHARS`.
- **Context window**: about :data:`CONTEXT_CHARS` characters of visible text before the link, its
  anchor text, and as many after, whitespace-normalised. A word cut at the outer edge is dropped.
- **Link type** (:func:`link_type`): SPONSORED > UGC > NOFOLLOW > INTERNAL/EXTERNAL. Sponsored is
  the strongest statement (paid: no endorsement at all), ugc next (untrusted author), plain nofollow
  last; a page-level robots ``nofollow`` makes every other link NOFOLLOW. INTERNAL means the same
  registered domain (public suffix list, private section included) as the page. ``rel`` keeps every
  token, lowercased and de-duplicated (bounded in number and length).
- **Robots**: ``<meta name=robots>`` (and any configured crawler name) and ``X-Robots-Tag``, merged.
- **Language**: ``<html lang>``, else the first ``Content-Language`` header value.
- **Refresh** (`parser.refresh`): a ``Refresh`` header, else the first ``<meta http-equiv=refresh>``
  outside ``noscript`` (there it is the fallback of pages that need scripts, often to an "enable
  JavaScript" page, which Scrapy ignores too), naming another http(s) URL within
  ``max_refresh_delay_s`` (Scrapy's default, 100 s): the page redirects there, ``refresh`` is the
  target and its edge has type REDIRECT (an ``<a>`` to the same target, the usual "click here if
  nothing happens", lends it its anchor text and place). A longer delay is a page that changes
  after a while, not a redirect, and a refresh to the page itself a reload: neither is one.
- **Feeds**: the ``<link rel=alternate>`` of an RSS, Atom or JSON Feed type (at most
  :data:`MAX_FEEDS`), resolved against the base, in ``feeds``; they are no edges (a head link is
  not a link a reader follows), and only a crawl with ``use_feeds`` discovers them.
- **Main text** (`parser.linkwalk`): the visible text outside NAV, FOOTER and SIDEBAR landmarks,
  which a site's template repeats on every page. A crawl that finds near duplicates signs it
  (`parser.minhash`), so two pages of one template with different articles are not alike.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lxml import etree
from parsel.selector import create_root_node

from parser.items import ItemFields, extract_fields, links_within
from parser.linkwalk import LinkOccurrence, WalkedPage, walk_page
from parser.minhash import text_minhash
from parser.refresh import parse_refresh
from parser.requisites import html_requisites
from parser.resolve import LinkResolver
from parser.robots import (
    DEFAULT_ROBOTS_NAMES,
    NO_DIRECTIVES,
    RobotsDirectives,
    meta_robots,
    x_robots_tag,
)
from schemas.canonical import canonical_url, registered_domain
from schemas.links import LinkEdge, LinkType

DEFAULT_MAX_LINKS = 10_000
DEFAULT_MAX_REFRESH_DELAY_S = 100
MAX_FEEDS = 16
FEED_LINK_TYPES = frozenset(
    {"application/rss+xml", "application/atom+xml", "application/rdf+xml", "application/feed+json"}
)
"""Not ``application/json``: WordPress announces its REST API so on every page."""
MAX_ANCHOR_CHARS = 500
CONTEXT_CHARS = 50
MAX_TITLE_CHARS = 1000
MAX_LANGUAGE_CHARS = 35
MAX_REL_TOKENS = 16
MAX_REL_TOKEN_CHARS = 64

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_C0_OR_SPACE = "".join(map(chr, range(0x21)))
_DROP_TAB_AND_NEWLINE = str.maketrans("", "", "\t\n\r")
_NO_FOLLOW_RELS = frozenset({"sponsored", "ugc", "nofollow"})
_EMPTY_DOCUMENT = "<html></html>"
_SURROGATE = re.compile("[\ud800-\udfff]")
_LINK_EDGE = LinkEdge.__pydantic_validator__


@dataclass(frozen=True, slots=True)
class DroppedLinks:
    """Link occurrences that became no edge, by reason."""

    invalid_url: int = 0
    scheme: int = 0
    cap: int = 0


@dataclass(slots=True)
class ExtractedLink:
    """One edge of the page, with the host key of its target and how often the page links there."""

    edge: LinkEdge
    host: str
    """``schemas.canonical.host_key`` of ``edge.to_url`` (the authority of a canonical URL)."""
    occurrences: int = 1


@dataclass(frozen=True)
class PageExtract:
    """What a page says about itself and where it links."""

    page_url: str
    base_url: str
    canonical: str | None
    title: str | None
    language: str | None
    robots: RobotsDirectives
    visible_text_length: int
    links: list[ExtractedLink]
    dropped: DroppedLinks
    duplicates: int
    """Occurrences of a target that already has an edge (see ``ExtractedLink.occurrences``)."""
    parse_error: str | None = None
    """Set when lxml could not build a tree; the page then reads as empty."""
    item: ItemFields | None = None
    """The crawl's fields read from the page, when it named selectors (`parser.items`)."""
    followable: frozenset[str] | None = None
    """With ``follow_within``: the canonical targets of the links inside what it matched, the
    only ones to discover (None: every link may be)."""
    refresh: ExtractedLink | None = None
    """The page's refresh target, a redirect (its REDIRECT edge is in ``links`` too)."""
    feeds: tuple[str, ...] = ()
    """The canonical URLs of the feeds the page announces, in document order, without repeats."""
    text_minhash: str | None = None
    """With ``sign_text``: the MinHash signature of the page's main text (`parser.minhash`)."""
    requisites: tuple[str, ...] = ()
    """With ``find_requisites``: the canonical URLs of what the page needs to be shown
    (`parser.requisites`), in document order, without repeats."""
    edges: list[LinkEdge] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "edges", [link.edge for link in self.links])


def link_type(rel: list[str], internal: bool, page_nofollow: bool = False) -> LinkType:
    """The edge's single type: SPONSORED > UGC > NOFOLLOW > INTERNAL/EXTERNAL."""
    if "sponsored" in rel:
        return "SPONSORED"
    if "ugc" in rel:
        return "UGC"
    if page_nofollow or "nofollow" in rel:
        return "NOFOLLOW"
    return "INTERNAL" if internal else "EXTERNAL"


def is_nofollow(edge: LinkEdge) -> bool:
    """Whether the page asked crawlers not to follow this link (nofollow, ugc or sponsored)."""
    return not _NO_FOLLOW_RELS.isdisjoint(edge.rel)


def extract_page(
    page_url: str,
    headers: Mapping[str, str],
    text: str,
    *,
    discovered_at: int,
    max_links: int = DEFAULT_MAX_LINKS,
    robots_names: frozenset[str] = DEFAULT_ROBOTS_NAMES,
    selectors: Mapping[str, str] | None = None,
    follow_within: str | None = None,
    max_refresh_delay_s: int = DEFAULT_MAX_REFRESH_DELAY_S,
    sign_text: bool = False,
    find_requisites: bool = False,
) -> PageExtract:
    """Parse ``text`` (the decoded page) fetched from ``page_url``, a canonical http(s) URL.

    ``headers`` are the response headers (any key case); ``discovered_at`` stamps every edge;
    ``selectors`` (field name -> selector) fill the page's item; ``follow_within`` (a selector)
    sets ``followable``; a refresh waiting longer than ``max_refresh_delay_s`` is no redirect;
    ``sign_text`` signs the main text (``text_minhash``); ``find_requisites`` fills
    ``requisites``.
    Raises ValueError only when ``page_url`` is not an http(s) URL.
    """
    page = canonical_url(page_url)
    if page is None:
        raise ValueError(f"not an http(s) page URL: {page_url[:200]!r}")
    root, parse_error = _parse(text)
    head = _read_head(root, robots_names)
    base = (
        canonical_url(head.base_href, page, tracking_params=frozenset()) if head.base_href else None
    )
    base = base or page
    robots = head.robots
    header_robots = header_value(headers, "x-robots-tag")
    if header_robots:
        robots = robots.merge(x_robots_tag(header_robots, robots_names))
    walked = walk_page(root)
    builder = _EdgeBuilder(page, base, walked, discovered_at, max_links, robots.nofollow)
    for occurrence in walked.links:
        builder.add(occurrence)
    refresh_href = _refresh_href(
        header_value(headers, "refresh") or head.refresh, max_refresh_delay_s
    )
    refresh = builder.redirect(refresh_href) if refresh_href is not None else None
    canonical = canonical_url(head.canonical_href, base) if head.canonical_href else None
    language = head.language or header_value(headers, "content-language").split(",")[0]
    return PageExtract(
        page_url=page,
        base_url=base,
        canonical=canonical,
        title=head.title,
        language=language.strip().lower()[:MAX_LANGUAGE_CHARS] or None,
        robots=robots,
        visible_text_length=walked.visible_text_length(),
        links=list(builder.links.values()),
        dropped=DroppedLinks(builder.invalid, builder.scheme, builder.cap),
        duplicates=builder.duplicates,
        parse_error=parse_error,
        item=extract_fields(root, selectors) if selectors else None,
        followable=links_within(root, follow_within, base) if follow_within else None,
        refresh=refresh,
        feeds=_feeds(head.feed_hrefs, base),
        text_minhash=text_minhash(walked.main_text()) if sign_text else None,
        requisites=tuple(html_requisites(root, base)) if find_requisites else (),
    )


def _feeds(hrefs: list[str], base: str) -> tuple[str, ...]:
    feeds = (canonical_url(href, base) for href in hrefs)
    return tuple(dict.fromkeys(feed for feed in feeds if feed is not None))[:MAX_FEEDS]


def _refresh_href(content: str, max_delay_s: int) -> str | None:
    """The URL a refresh ``content`` redirects to, as written, when it is a redirect."""
    refresh = parse_refresh(content) if content else None
    if refresh is None or refresh.href is None or refresh.delay_s > max_delay_s:
        return None
    return refresh.href


def _parse(text: str) -> tuple[Any, str | None]:
    """The lxml root of ``text`` as HTML, or of an empty document when lxml cannot build one.

    parsel builds the tree exactly as ``Selector(text=..., type="html")`` does, but with lxml's
    plain HTML parser rather than ``lxml.html``'s, whose element class lookup runs Python code for
    every element the walk touches; nothing here needs ``HtmlElement``'s extra methods.
    """
    try:
        return create_root_node(text, etree.HTMLParser), None
    except UnicodeEncodeError:
        # Lone surrogates: only a str made in Python, never decoded bytes, can hold them.
        return _parse(_SURROGATE.sub("\ufffd", text))
    except etree.LxmlError as error:
        empty = create_root_node(_EMPTY_DOCUMENT, etree.HTMLParser)
        return empty, f"{type(error).__name__}: {error}"


@dataclass
class _Head:
    base_href: str | None = None
    canonical_href: str | None = None
    title: str | None = None
    language: str = ""
    robots: RobotsDirectives = NO_DIRECTIVES
    refresh: str = ""
    feed_hrefs: list[str] = field(default_factory=list)


def _read_head(root: Any, robots_names: frozenset[str]) -> _Head:
    """First ``<base href>``, canonical link, title and refresh (outside ``noscript``); feed links;
    every robots meta; ``<html lang>``."""
    head = _Head(language=(root.get("lang") or "") if root.tag == "html" else "")
    for element in root.iter("base", "link", "meta", "title"):
        tag = element.tag
        if tag == "meta":
            name = (element.get("name") or "").strip().lower()
            if name in robots_names:
                head.robots = head.robots.merge(meta_robots(element.get("content") or ""))
            elif (
                not head.refresh
                and (element.get("http-equiv") or "").strip().lower() == "refresh"
                and not any(True for _ in element.iterancestors("noscript"))
            ):
                head.refresh = element.get("content") or ""
        elif tag == "base":
            if head.base_href is None:
                head.base_href = element.get("href")
        elif tag == "link":
            rel = (element.get("rel") or "").lower().split()
            if head.canonical_href is None and "canonical" in rel:
                head.canonical_href = element.get("href")
            elif "alternate" in rel and len(head.feed_hrefs) < 4 * MAX_FEEDS:
                kind = (element.get("type") or "").partition(";")[0].strip().lower()
                href = element.get("href")
                if kind in FEED_LINK_TYPES and href:
                    head.feed_hrefs.append(href)
        elif head.title is None:
            head.title = " ".join((element.text or "").split())[:MAX_TITLE_CHARS]
    return head


def header_value(headers: Mapping[str, str], name: str) -> str:
    """A header's value by lowercase ``name``, whatever the case of the keys; "" when absent."""
    value = headers.get(name)
    if value is None:
        for key, candidate in headers.items():
            if key.lower() == name:
                return candidate
    return value or ""


@functools.lru_cache(maxsize=16384)
def _site(host: str) -> str:
    """The registered domain of an authority (port dropped); cached as hosts repeat a lot."""
    return registered_domain(host)


def canonical_host_key(url: str) -> str:
    """``host_key`` of a canonical URL without parsing it again: its authority is that key."""
    start = url.index("://") + 3
    end = url.find("/", start)
    return url[start:end] if end >= 0 else url[start:]


class _EdgeBuilder:
    """Turns link occurrences into de-duplicated edges, counting what it drops and why."""

    def __init__(
        self,
        page: str,
        base: str,
        walked: WalkedPage,
        discovered_at: int,
        max_links: int,
        page_nofollow: bool,
    ) -> None:
        self.walked = walked
        self.page = page
        self.discovered_at = discovered_at
        self.max_links = max_links
        self.page_nofollow = page_nofollow
        self.page_site = _site(canonical_host_key(page))
        self.links: dict[str, ExtractedLink] = {}
        self.resolver = LinkResolver(base)
        self.invalid = self.scheme = self.cap = self.duplicates = 0

    def add(self, occurrence: LinkOccurrence) -> None:
        href = occurrence.href
        if len(self.links) >= self.max_links and not self.resolver.seen(href):
            self.cap += 1
            return
        target = self.resolver.resolve(href)
        if target is None:
            if _is_other_scheme(href):
                self.scheme += 1
            else:
                self.invalid += 1
            return
        existing = self.links.get(target)
        if existing is not None:
            existing.occurrences += 1
            self.duplicates += 1
            return
        host = canonical_host_key(target)
        self.links[target] = ExtractedLink(self._edge(target, host, occurrence), host)

    def redirect(self, href: str) -> ExtractedLink | None:
        """The page's refresh to ``href``: its target's link, made or turned into a REDIRECT edge;
        None when ``href`` is no other http(s) URL. It counts as no occurrence and past the cap."""
        target = self.resolver.resolve(href)
        if target is None or target == self.page:
            return None
        link = self.links.get(target)
        if link is None:
            edge = LinkEdge(to_url=target, link_type="REDIRECT", discovered_at=self.discovered_at)
            link = self.links[target] = ExtractedLink(edge, canonical_host_key(target))
        else:
            link.edge = link.edge.model_copy(update={"link_type": "REDIRECT"})
        return link

    def _edge(self, target: str, host: str, occurrence: LinkOccurrence) -> LinkEdge:
        rel = _rel_tokens(occurrence.rel)
        anchor, context = self._anchor_and_context(occurrence)
        kind = link_type(rel, _site(host) == self.page_site, self.page_nofollow)
        # Validated like LinkEdge(...), minus a Python frame: this runs once per edge.
        edge: LinkEdge = _LINK_EDGE.validate_python(
            {
                "to_url": target,
                "anchor_text": anchor,
                "context_window": context,
                "link_type": kind,
                "rel": rel,
                "position": occurrence.position,
                "discovered_at": self.discovered_at,
            }
        )
        return edge

    def _anchor_and_context(self, occurrence: LinkOccurrence) -> tuple[str, str]:
        shown = self.walked.anchor_text(occurrence, MAX_ANCHOR_CHARS)
        context = self.walked.context(occurrence, shown, CONTEXT_CHARS)
        anchor = shown or _normalised(occurrence.image_alt) or _normalised(occurrence.title)
        return anchor, context


def _normalised(text: str | None) -> str:
    return " ".join(text.split())[:MAX_ANCHOR_CHARS] if text else ""


def _rel_tokens(rel: str | None) -> list[str]:
    if not rel:
        return []
    tokens = dict.fromkeys(token[:MAX_REL_TOKEN_CHARS] for token in rel.lower().split())
    return list(tokens)[:MAX_REL_TOKENS]


def _is_other_scheme(href: str) -> bool:
    """Whether ``href`` names a scheme other than http(s), read as ``canonical_url`` reads it."""
    match = _SCHEME.match(href.strip(_C0_OR_SPACE).translate(_DROP_TAB_AND_NEWLINE))
    return match is not None and match.group(1).lower() not in ("http", "https")
