"""`items`: fields extracted from pages with a crawl's selectors, keyed by the page's URL.

A crawl may name fields and the selectors that fill them (`CrawlRequest.extract`, as a Scrapy
spider's ``response.css(...).getall()`` or StormCrawler's XPath parse filters do), and a URL pattern
limiting them to some pages (`CrawlRequest.extract_pattern`). The frontier sends the selectors with
each fetch of a matching URL (`Extraction`); the parser applies them to the page and produces one
`ExtractedItem` per page, fields without a match included, so a consumer sees which pages lacked
what. Producer: the parser. Consumers: whoever wants the data (`streamcrawl items` writes a crawl's
as JSON lines). Keyed by URL like `pages`; a recrawl produces the page's item again.

A selector is CSS (parsel's, with ``::text`` and ``::attr(name)``), or XPath after ``xpath:``.
Each match is a string as parsel's ``getall()`` gives it (an element as its HTML), stripped of
surrounding whitespace; empty strings are left out. ``jsonld:TYPE`` reads the page's JSON-LD
(schema.org structured data, what ``extruct`` and the Web Data Commons read): every top-level
object, or member of an ``@graph``, whose ``@type`` is TYPE (``Product``, or the full
``https://schema.org/Product``), as compact JSON; ``jsonld:`` alone, every object.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated, Literal

from cssselect import SelectorError
from lxml import etree
from parsel import css2xpath
from pydantic import Field

from schemas.base import EpochMillis, InternalModel
from schemas.topic import MIB, TopicSpec

TOPIC = TopicSpec(suffix="items", key="url", max_message_bytes=1 * MIB, compression="zstd")

MAX_FIELDS = 50
MAX_SELECTOR_LENGTH = 1000
MAX_VALUES_PER_FIELD = 100
MAX_VALUE_CHARS = 10_000
MAX_ITEM_CHARS = 256 * 1024
"""Characters of values in one item; past it values are left out and the item marked truncated."""
XPATH_PREFIX = "xpath:"
CSS_PREFIX = "css:"
JSONLD_PREFIX = "jsonld:"
_JSONLD_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_:/.#-]{0,200}$")
FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")

FieldName = Annotated[str, Field(max_length=64)]
"""Checked by `check_fields`, which names what is wrong."""
Selector = Annotated[str, Field(min_length=1, max_length=MAX_SELECTOR_LENGTH)]


Completeness = Literal["complete", "partial", "empty"]


def key(url: str) -> str:
    return url


def completeness(fields: dict[str, list[str]]) -> Completeness:
    """complete: every field has a value; empty: none has; partial: in between."""
    filled = sum(1 for values in fields.values() if values)
    if filled == len(fields):
        return "complete"
    return "empty" if filled == 0 else "partial"


@functools.lru_cache(maxsize=1024)
def selector_xpath(selector: str) -> str:
    """The XPath a selector stands for (CSS translated as parsel does); ValueError saying why
    when it does not compile."""
    text = selector.strip()
    if text.startswith(XPATH_PREFIX):
        xpath = text.removeprefix(XPATH_PREFIX).strip()
    else:
        try:
            xpath = css2xpath(text.removeprefix(CSS_PREFIX).strip())
        except SelectorError as error:
            raise ValueError(f"CSS selector does not parse: {error}") from error
    try:
        etree.XPath(xpath)
    except etree.XPathSyntaxError as error:
        raise ValueError(f"XPath does not compile: {error}") from error
    return xpath


def jsonld_type(selector: str) -> str | None:
    """The type a ``jsonld:`` selector asks for ("" for every object), or None when it is no
    JSON-LD selector; ValueError when the type is no type name."""
    text = selector.strip()
    if not text.startswith(JSONLD_PREFIX):
        return None
    wanted = text.removeprefix(JSONLD_PREFIX).strip()
    if wanted and not _JSONLD_TYPE.match(wanted):
        raise ValueError(f"JSON-LD type {wanted[:100]!r} is no type name (Product, Article, ...)")
    return wanted


def check_selector(selector: str) -> None:
    """ValueError saying why when ``selector`` is no field selector (CSS, XPath or JSON-LD)."""
    if jsonld_type(selector) is None:
        selector_xpath(selector)


def check_fields(fields: dict[str, str]) -> dict[str, str]:
    """The fields when every name is one and every selector compiles, and there are not too
    many; else ValueError naming each bad one."""
    if len(fields) > MAX_FIELDS:
        raise ValueError(f"{len(fields)} fields, at most {MAX_FIELDS}")
    problems: list[str] = []
    for name, selector in fields.items():
        if not FIELD_NAME.match(name):
            problems.append(
                f"field name {name[:100]!r}: a letter or _ first, then letters, digits, _ . or -"
                " (64 at most)"
            )
            continue
        try:
            check_selector(selector)
        except ValueError as error:
            problems.append(f"field {name!r}: {error}")
    if problems:
        raise ValueError("; ".join(problems))
    return fields


class Extraction(InternalModel):
    """The selectors a fetch of one URL carries to the parser (`FetchRequest`, `FetchedPage`)."""

    fields: dict[FieldName, Selector]


class ExtractedItem(InternalModel):
    """One page's fields: every field the crawl names, with its matches (none: an empty list)."""

    crawl_id: str
    url: str
    """The page as fetched (the final URL after the fetcher's own redirect handling)."""
    fetched_at: EpochMillis
    status: int
    fields: dict[str, list[str]]
    errors: dict[str, str] = Field(default_factory=dict)
    """Fields whose selector failed on this page, with why (they have no values)."""
    truncated: bool = False
    """Some values were cut to ``MAX_VALUE_CHARS`` or left out past the per-field or per-item
    limits."""
