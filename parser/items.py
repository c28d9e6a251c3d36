"""A crawl's selectors applied to one parsed page: its fields (`schemas.items`), and the links
inside its ``follow_within`` regions.

Each selector runs on the tree `parser.extract` already built (no second parse), through parsel, so
a field holds what ``Selector.xpath(...).getall()`` gives in Scrapy: text and attribute values as
they are, an element as its HTML. Values are stripped; empty ones are left out. The limits of
`schemas.items` bound an item whatever the page: past them values are cut or left out and the item
says so (``truncated``). A selector that fails on a page (an XPath function lxml does not know)
leaves its field empty with the reason in ``errors``; the other fields are still read. A
``jsonld:`` selector reads the page's JSON-LD blocks, parsed once a page whatever the number of
such fields; a block that does not parse is named in the field's ``errors``.
"""

from __future__ import annotations

import json
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
    jsonld_type,
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
    structured: JsonLd | None = None
    item = ItemFields(values={})
    budget = MAX_ITEM_CHARS
    for name, selector in selectors.items():
        kept: list[str] = []
        item.values[name] = kept
        try:
            wanted = jsonld_type(selector)
            if wanted is None:
                matches = document.xpath(selector_xpath(selector)).getall()
            else:
                if structured is None:
                    structured = JsonLd.of(document)
                matches = structured.of_type(wanted)
                if structured.errors:
                    item.errors[name] = "; ".join(structured.errors)[:300]
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


@dataclass
class JsonLd:
    """A page's JSON-LD objects: each ``<script type="application/ld+json">`` block's top-level
    objects and the members of their ``@graph``s. A block that does not parse is left out and
    said in ``errors``."""

    objects: list[dict[str, Any]]
    errors: list[str]

    @classmethod
    def of(cls, document: Selector) -> JsonLd:
        found = cls([], [])
        blocks = document.xpath(_JSONLD_BLOCKS).getall()
        for number, block in enumerate(blocks, start=1):
            try:
                parsed = json.loads(block)
            except (ValueError, RecursionError) as error:  # nested too deep: RecursionError
                found.errors.append(f"JSON-LD block {number} does not parse: {error}")
                continue
            for value in parsed if isinstance(parsed, list) else [parsed]:
                if isinstance(value, dict):
                    graph = value.get("@graph")
                    members = graph if isinstance(graph, list) else [value]
                    found.objects += [member for member in members if isinstance(member, dict)]
        return found

    def of_type(self, wanted: str) -> list[str]:
        """Each object whose ``@type`` is ``wanted`` (every object when ""), as compact JSON."""
        return [
            json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            for value in self.objects
            if not wanted or wanted in _types(value)
        ]


_JSONLD_BLOCKS = "//script[@type='application/ld+json']/text()"


def _types(value: dict[str, Any]) -> set[str]:
    """An object's ``@type``s, each also by its last IRI segment (schema.org/Product: Product)."""
    declared = value.get("@type")
    names = (
        [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else []
    )
    types: set[str] = set()
    for name in names:
        if isinstance(name, str):
            types.add(name)
            types.add(name.rstrip("/").rsplit("/", 1)[-1].rsplit("#", 1)[-1])
    return types


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
