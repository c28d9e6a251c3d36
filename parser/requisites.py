"""A page's requisites: what a browser loads to show it (Heritrix's embeds, wget's ``-p``).

An archive that replays a page needs its stylesheets, scripts, images, fonts, media and frames,
not only its HTML; Heritrix fetches them as embeds (``E`` hops) whatever the link depth. A crawl
with ``fetch_page_requisites`` (`schemas.seeds.CrawlRequest`) has the parser find them:

- in HTML (:func:`html_requisites`): ``img`` (``src``, ``srcset``), ``picture``/``video``/``audio``
  ``source`` (``src``, ``srcset``), ``video`` (``src``, ``poster``), ``audio``, ``track``,
  ``script``, ``embed`` (``src``), ``object`` (``data``), ``iframe`` and ``frame`` (``src``),
  ``input type=image``, the ``background`` attribute, the ``link`` elements a browser loads
  (``rel`` stylesheet, icon, apple-touch-icon, mask-icon, manifest, preload, modulepreload), and
  the ``url()`` and ``@import`` of ``style`` elements and attributes;
- in CSS (:func:`css_requisites`): ``url()`` and ``@import``, fonts and background images.

Each is resolved against the page's base URL and put in canonical form; ``data:``, ``blob:``,
``javascript:`` and other non-http(s) references are no requisite. At most `MAX_REQUISITES` a
page, in document order, without repeats.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from schemas.canonical import canonical_url

MAX_REQUISITES = 1_000
MAX_CSS_CHARS = 2_000_000
"""Only the first characters of a larger stylesheet are read (a CSS bomb reads no further)."""
MAX_SRCSET_CHARS = 10_000
"""Only the first characters of a ``srcset`` are read (it is read a character at a time)."""

_LINK_RELS = frozenset(
    {
        *("stylesheet", "icon", "apple-touch-icon", "apple-touch-icon-precomposed"),
        *("mask-icon", "manifest", "preload", "modulepreload"),
    }
)
_SOURCE_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "img": ("src",),
    "source": ("src",),
    "video": ("src", "poster"),
    "audio": ("src",),
    "track": ("src",),
    "script": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "iframe": ("src",),
    "frame": ("src",),
}
_SRCSET_TAGS = frozenset({"img", "source"})
_BACKGROUND_TAGS = frozenset({"body", "table", "td", "th"})

_CSS_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)", re.DOTALL)
_CSS_REFERENCE = re.compile(
    r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s"']*))\s*\)|@import\s+(?:"([^"]*)"|'([^']*)')""",
    re.IGNORECASE,
)
_CSS_ESCAPE = re.compile(r"\\([0-9a-fA-F]{1,6}\s?|.)", re.DOTALL)
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def html_requisites(root: Any, base_url: str) -> list[str]:
    """The canonical URLs of the requisites of the page under ``root`` (an lxml tree)."""
    return _resolved(_html_references(root), base_url)


def css_requisites(text: str, base_url: str) -> list[str]:
    """The canonical URLs a stylesheet ``text`` served from ``base_url`` refers to."""
    return _resolved(_css_references(text), base_url)


def _html_references(root: Any) -> Iterator[str]:
    for element in root.iter():
        tag = element.tag
        if not isinstance(tag, str):  # a comment or a processing instruction
            continue
        if tag == "style":
            yield from _css_references(element.text or "")
            continue
        style = element.get("style")
        if style:
            yield from _css_references(style)
        if tag == "link":
            rels = (element.get("rel") or "").lower().split()
            if not _LINK_RELS.isdisjoint(rels):
                yield element.get("href") or ""
        elif tag == "input":
            if (element.get("type") or "").strip().lower() == "image":
                yield element.get("src") or ""
        elif tag in _BACKGROUND_TAGS:
            yield element.get("background") or ""
        elif tag in _SOURCE_ATTRIBUTES:
            for attribute in _SOURCE_ATTRIBUTES[tag]:
                yield element.get(attribute) or ""
            if tag in _SRCSET_TAGS:
                yield from srcset_urls(element.get("srcset") or "")


def srcset_urls(srcset: str) -> list[str]:
    """The image URLs of a ``srcset`` (HTML's candidate list: a URL, then descriptors up to a
    comma; a URL ending in commas has none)."""
    urls = []
    srcset = srcset[:MAX_SRCSET_CHARS]
    position, length = 0, len(srcset)
    while position < length:
        while position < length and (srcset[position].isspace() or srcset[position] == ","):
            position += 1
        start = position
        while position < length and not srcset[position].isspace():
            position += 1
        url = srcset[start:position]
        if url.endswith(","):
            url = url.rstrip(",")
        else:
            depth = 0  # descriptors, up to a comma outside parentheses
            while position < length and (srcset[position] != "," or depth > 0):
                depth += {"(": 1, ")": -1}.get(srcset[position], 0)
                position += 1
        if url:
            urls.append(url)
    return urls


def _css_references(text: str) -> Iterator[str]:
    text = _CSS_COMMENT.sub(" ", text[:MAX_CSS_CHARS])
    for match in _CSS_REFERENCE.finditer(text):
        reference = next(group for group in match.groups() if group is not None)
        yield _CSS_ESCAPE.sub(_unescape, reference.strip())


def _unescape(match: re.Match[str]) -> str:
    """CSS escapes: hex digits (and one space after them) name a code point, a backslash before
    a newline continues the line, before any other character is that character."""
    escaped = match.group(1)
    if escaped[0] in _HEX_DIGITS:
        code = int(escaped.strip(), 16)
        valid = 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF
        return chr(code) if valid else "\ufffd"
    return "" if escaped == "\n" else escaped


def _resolved(references: Iterable[str], base_url: str) -> list[str]:
    found: dict[str, None] = {}
    for written in references:
        reference = written.strip()
        if not reference or reference.startswith("#"):
            continue
        url = canonical_url(reference, base_url)
        if url is not None:
            found[url] = None
            if len(found) >= MAX_REQUISITES:
                break
    return list(found)
