"""A crawl's selectors applied to one parsed page: its fields (`schemas.items`), and the links
inside its ``follow_within`` regions.

Each selector runs on the tree `parser.extract` already built (no second parse), through parsel, so
a field holds what ``Selector.xpath(...).getall()`` gives in Scrapy: text and attribute values as
they are, an element as its HTML. Values are stripped; empty ones are left out. The limits of
`schemas.items` bound an item whatever the page: past them values are cut or left out and the item
says so (``truncated``). A selector that fails on a page (an XPath function lxml does not know)
leaves its field empty with the reason in ``errors``; the other fields are still read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lxml import etree
from parsel import Selector

from schemas.canonical import canonical_url
from schemas.items import (
    MAX_ITEM_CHARS,
    MAX_VALUE_CHARS,
    MAX_VALUES_PER_FIELD,
    Completeness,
    completeness,
    selector_xpath,
)


@dataclass
class ItemFields:
    """One page's fields: every name the crawl gave, with its values (possibly none)."""

    values: dict[str, list[str]]
    errors: dict[str, str] = field(default_factory=dict)
    truncated: bool = False

    @property
    def completeness(self) -> Completeness:
        return completeness(self.values)


def extract_fields(root: Any, selectors: Mapping[str, str]) -> ItemFields:
    """The fields ``selectors`` (name -> selector) read from the lxml ``root`` of a page."""
    document = Selector(root=root, type="html")
    item = ItemFields(values={})
    budget = MAX_ITEM_CHARS
    for name, selector in selectors.items():
        kept: list[str] = []
        item.values[name] = kept
        try:
            matches = document.xpath(selector_xpath(selector)).getall()
        except (ValueError, etree.XPathError) as error:
            item.errors[name] = str(error)[:300]
            continue
        for match in matches:
            value = match.strip()
            if not value:
                continue
            if len(kept) == MAX_VALUES_PER_FIELD or budget == 0:
                item.truncated = True
                break
            if len(value) > min(MAX_VALUE_CHARS, budget):
                value = value[: min(MAX_VALUE_CHARS, budget)]
                item.truncated = True
            budget -= len(value)
            kept.append(value)
    return item


_LINKS_BELOW = "descendant-or-self::*[self::a or self::area]/@href"


def links_within(root: Any, selector: str, base: str) -> frozenset[str]:
    """The canonical targets (against ``base``) of the ``a`` and ``area`` links inside the
    elements ``selector`` matches; what is not an element (a text, an attribute) holds none.
    A selector that fails on the page holds none either: the page's links are then not
    followed, which is what a region that is not there means."""
    try:
        regions = Selector(root=root, type="html").xpath(selector_xpath(selector))
    except (ValueError, etree.XPathError):
        return frozenset()
    targets = set()
    for region in regions:
        if not isinstance(region.root, etree._Element):
            continue
        for href in region.xpath(_LINKS_BELOW).getall():
            target = canonical_url(href.strip(), base)
            if target is not None:
                targets.add(target)
    return frozenset(targets)
