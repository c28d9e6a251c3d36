"""Fields extracted with a crawl's selectors: the request's checks, the values, the item message."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from parser.extract import _parse
from parser.items import extract_fields
from schemas import items as items_topic
from schemas.items import (
    MAX_ITEM_CHARS,
    MAX_VALUE_CHARS,
    MAX_VALUES_PER_FIELD,
    ExtractedItem,
    Extraction,
    selector_xpath,
)
from schemas.seeds import CrawlRequest, extraction_for
from tests.unit.parser.pages import FETCHED_AT
from tests.unit.parser.test_handler import discovered_urls, of_type, parse

PRODUCT = b"""<html><head><title> Blue kettle | Shop </title></head><body>
<h1>Blue <em>kettle</em></h1>
<span class="price" data-currency="EUR">  19.90 </span>
<ul class="tags"><li>kitchen</li><li> </li><li>blue</li></ul>
<a class="next" href="/product/2">next</a>
</body></html>"""

SELECTORS = {
    "title": "title::text",
    "heading": "h1",
    "price": "css:span.price::text",
    "currency": "span.price::attr(data-currency)",
    "tags": "xpath://ul[@class='tags']/li/text()",
    "links": "xpath:count(//a)",
    "missing": "div.reviews::text",
}


def _fields(body: bytes, selectors: dict[str, str]) -> items_topic.Completeness:
    item = extract_fields(_parse(body.decode())[0], selectors)
    return item.completeness


def test_every_field_holds_what_parsel_gives_stripped_and_without_empty_values() -> None:
    root, _ = _parse(PRODUCT.decode())
    item = extract_fields(root, SELECTORS)
    assert item.values == {
        "title": ["Blue kettle | Shop"],
        "heading": ["<h1>Blue <em>kettle</em></h1>"],
        "price": ["19.90"],
        "currency": ["EUR"],
        "tags": ["kitchen", "blue"],
        "links": ["1.0"],
        "missing": [],
    }
    assert (item.errors, item.truncated, item.completeness) == ({}, False, "partial")


def test_completeness_says_whether_every_some_or_no_field_matched() -> None:
    assert _fields(PRODUCT, {"title": "title::text"}) == "complete"
    assert _fields(PRODUCT, {"title": "title::text", "none": "table"}) == "partial"
    assert _fields(PRODUCT, {"none": "table", "nothing": "xpath://video/@src"}) == "empty"


def test_values_are_bounded_per_value_per_field_and_per_item() -> None:
    long_text = "x" * (MAX_VALUE_CHARS + 10)
    many = "".join(f"<li>{n}</li>" for n in range(MAX_VALUES_PER_FIELD + 5))
    body = f"<p>{long_text}</p><ul>{many}</ul>".encode()
    root, _ = _parse(body.decode())
    item = extract_fields(root, {"long": "p::text", "many": "li::text"})
    assert item.truncated
    assert len(item.values["long"][0]) == MAX_VALUE_CHARS
    assert len(item.values["many"]) == MAX_VALUES_PER_FIELD
    paragraphs = "".join(f"<p>{'y' * 9_000}{n}</p>" for n in range(40))
    root, _ = _parse(paragraphs)
    capped = extract_fields(root, {"a": "p::text", "b": "p::text", "c": "p::text"})
    assert capped.truncated
    assert sum(len(value) for values in capped.values.values() for value in values) <= (
        MAX_ITEM_CHARS
    )


def test_a_selector_failing_on_the_page_leaves_its_field_empty_with_the_reason() -> None:
    root, _ = _parse(PRODUCT.decode())
    item = extract_fields(root, {"bad": "xpath:no-such-function(//a)", "title": "title::text"})
    assert item.values == {"bad": [], "title": ["Blue kettle | Shop"]}
    assert "bad" in item.errors and item.completeness == "partial"


# ----- the crawl request ---------------------------------------------------------------------


def test_selectors_are_checked_when_the_crawl_is_requested() -> None:
    with pytest.raises(ValidationError) as refused:
        CrawlRequest(
            seeds=["https://shop.example/"],
            extract={"ok": "h1::text", "css": "h1::nope", "xp": "xpath://a[", "1st": "h1"},
        )
    message = str(refused.value)
    assert "field 'css': CSS selector does not parse" in message
    assert "field 'xp': XPath does not compile" in message
    assert "field name '1st'" in message
    with pytest.raises(ValidationError, match="none are named"):
        CrawlRequest(seeds=["https://shop.example/"], extract_pattern="/product/")
    with pytest.raises(ValidationError, match="at most 50"):
        CrawlRequest(seeds=["https://a.example/"], extract={f"f{n}": "p" for n in range(51)})
    assert selector_xpath("xpath: //h1/text()") == "//h1/text()"
    assert selector_xpath("css:h1") == selector_xpath("h1") == "descendant-or-self::h1"


def test_a_fetch_carries_the_selectors_only_where_the_pattern_matches() -> None:
    request = CrawlRequest(
        seeds=["https://shop.example/"], extract={"title": "h1::text"}, extract_pattern="/product/"
    )
    assert extraction_for(request, "https://shop.example/product/1") == Extraction(
        fields={"title": "h1::text"}
    )
    assert extraction_for(request, "https://shop.example/about") is None
    everywhere = request.model_copy(update={"extract_pattern": None})
    assert extraction_for(everywhere, "https://shop.example/about") is not None
    plain = CrawlRequest(seeds=["https://shop.example/"])
    assert extraction_for(plain, "https://shop.example/product/1") is None


# ----- the parser's message ------------------------------------------------------------------


def test_a_page_with_selectors_yields_its_item_after_its_links_keyed_by_its_url() -> None:
    url = "https://shop.example/product/1"
    result = parse(PRODUCT, url=url, extract=Extraction(fields={"price": "span.price::text"}))
    [message] = of_type(result, ExtractedItem)
    assert (message.topic, message.key) == (items_topic.TOPIC.suffix, url)
    assert result.messages.index(message) == 1
    assert message.value == ExtractedItem(
        crawl_id="c1", url=url, fetched_at=FETCHED_AT, status=200, fields={"price": ["19.90"]}
    )
    assert result.extract is not None and result.extract.item is not None


def test_pages_without_selectors_or_not_parsed_as_html_yield_no_item() -> None:
    selectors = Extraction(fields={"price": "span.price::text"})
    assert of_type(parse(PRODUCT), ExtractedItem) == []
    not_found = parse(PRODUCT, status=404, extract=selectors)
    assert not_found.status == "skipped" and of_type(not_found, ExtractedItem) == []
    revisit = parse(b"", revisit=True, status=304, sha256="ab" * 32, extract=selectors)
    assert revisit.messages == []


def test_regular_expressions_work_as_in_scrapy_through_exslt() -> None:
    root, _ = _parse(PRODUCT.decode())
    item = extract_fields(
        root,
        {
            "amount": "xpath:re:replace(//span[@class='price']/text(), '[^0-9.]', 'g', '')",
            "next": "xpath://a[re:test(@href, '^/product/[0-9]+$')]/@href",
        },
    )
    assert item.values == {"amount": ["19.90"], "next": ["/product/2"]}


# ----- follow_within -------------------------------------------------------------------------

LISTING = b"""<html><body>
<nav><a href="/about">About</a> <a href="/cart">Cart</a></nav>
<ul class="products"><li><a href="/product/1">One</a></li><li><a href="product/2">Two</a></li></ul>
<div class="pagination"><a href="?page=2">2</a> <area href="/page/3"></div>
<footer><a href="https://other.example/">elsewhere</a></footer>
</body></html>"""


def test_follow_within_discovers_only_the_links_inside_its_regions_and_keeps_every_edge() -> None:
    url = "https://shop.example/list/"
    result = parse(LISTING, url=url, follow_within=".products, .pagination")
    assert discovered_urls(result) == {
        "shop.example": [
            "https://shop.example/product/1",
            "https://shop.example/list/product/2",
            "https://shop.example/list/?page=2",
            "https://shop.example/page/3",
        ]
    }
    assert len(result.extract.edges if result.extract else []) == 7
    everything = parse(LISTING, url=url)
    assert sum(len(urls) for urls in discovered_urls(everything).values()) == 7


def test_a_follow_within_region_that_is_not_there_or_no_element_discovers_nothing() -> None:
    url = "https://shop.example/list/"
    for selector in (".no-such-region", "xpath://ul/@class", "xpath:no-such-function()"):
        assert discovered_urls(parse(LISTING, url=url, follow_within=selector)) == {}, selector
    with pytest.raises(ValidationError, match="CSS selector does not parse"):
        CrawlRequest(seeds=["https://shop.example/"], follow_within="ul::nope")


# ----- JSON-LD -------------------------------------------------------------------------------

STRUCTURED = b"""<html><head>
<script type="application/ld+json">{"@context": "https://schema.org", "@graph": [
  {"@type": "Product", "name": "Blue kettle", "offers": {"@type": "Offer", "price": "19.90"}},
  {"@type": "BreadcrumbList", "itemListElement": []}]}</script>
<script type="application/ld+json">[{"@type": ["Organization", "Brand"], "name": "K\\u00e9ttles"},
  {"@type": "https://schema.org/Product", "name": "Red kettle"}]</script>
<script type="application/ld+json">{"@type": "Product", "name": "broken",</script>
<script type="application/json">{"@type": "Product", "name": "not JSON-LD"}</script>
</head><body><h1>Kettles</h1></body></html>"""


def test_jsonld_fields_hold_the_objects_of_a_type_as_compact_json() -> None:
    root, _ = _parse(STRUCTURED.decode())
    item = extract_fields(
        root, {"product": "jsonld:Product", "brand": "jsonld: Brand", "every": "jsonld:"}
    )
    assert item.values["product"] == [
        '{"@type":"Product","name":"Blue kettle","offers":{"@type":"Offer","price":"19.90"}}',
        '{"@type":"https://schema.org/Product","name":"Red kettle"}',
    ]
    assert item.values["brand"] == ['{"@type":["Organization","Brand"],"name":"Kéttles"}']
    assert len(item.values["every"]) == 4
    assert "JSON-LD block 3 does not parse" in item.errors["product"]


def test_a_jsonld_selector_names_a_type_or_nothing() -> None:
    CrawlRequest(seeds=["https://shop.example/"], extract={"p": "jsonld:Product", "all": "jsonld:"})
    with pytest.raises(ValidationError, match="is no type name"):
        CrawlRequest(seeds=["https://shop.example/"], extract={"p": "jsonld:Pro duct"})
    root, _ = _parse("<p>no structured data</p>")
    assert extract_fields(root, {"p": "jsonld:Product"}).values == {"p": []}
