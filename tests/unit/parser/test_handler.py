"""The page handler: which messages a page yields, in which order, under which keys."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parser.handler import Outbound, PageParser, ParseResult
from parser.settings import ParserSettings
from schemas import links as links_topic
from schemas import urls as urls_topic
from schemas.links import PageLinks
from schemas.serde import encode
from schemas.urls import DiscoveredUrls, ParseReport
from tests.unit.parser.pages import FETCHED_AT, fetched_page

GOLDEN = Path(__file__).parent / "golden"
PAGE_URL = "https://www.example.com/start"
LINKS_PAGE = b"""<html><body>
<a href="/a">A</a> <a href="/b" rel="nofollow">B</a> <a href="https://other.example/c">C</a>
<a href="https://other.example/d" rel="ugc">D</a> <a href="/start">self</a> <a href="/a">A again</a>
</body></html>"""


def parse(
    body: bytes, *, url: str = PAGE_URL, settings: ParserSettings | None = None, **fields: Any
) -> ParseResult:
    return PageParser(settings).parse(fetched_page(url, body, **fields), body)


def of_type(result: ParseResult, kind: type) -> list[Outbound]:
    return [message for message in result.messages if isinstance(message.value, kind)]


def discovered_urls(result: ParseResult) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for message in of_type(result, DiscoveredUrls):
        assert isinstance(message.value, DiscoveredUrls)
        found.setdefault(message.key, []).extend(url.url for url in message.value.urls)
    return found


def test_a_revisit_page_gets_no_messages_since_its_outcome_promised_no_report() -> None:
    result = parse(b"", revisit=True, status=304, sha256="ab" * 32)
    assert (result.status, result.messages) == ("revisit", [])


def test_messages_order_topics_and_keys() -> None:
    result = parse(LINKS_PAGE)
    assert result.status == "html" and result.error is None
    first, *middle, last = result.messages
    assert (first.topic, first.key) == (links_topic.TOPIC.suffix, PAGE_URL)
    assert isinstance(first.value, PageLinks)
    assert first.value.crawl_id == "c1" and first.value.fetched_at == FETCHED_AT
    assert (first.value.part, first.value.parts) == (0, 1)
    assert [edge.to_url for edge in first.value.edges] == [
        "https://www.example.com/a",
        "https://www.example.com/b",
        "https://other.example/c",
        "https://other.example/d",
        PAGE_URL,
    ]
    assert all(isinstance(message.value, DiscoveredUrls) for message in middle)
    assert all(message.topic == urls_topic.TOPIC.suffix for message in middle)
    assert (last.topic, last.key) == (urls_topic.TOPIC.suffix, "www.example.com")
    # What is produced is each model's encoding, made once (for the size check).
    assert all(message.encoded == encode(message.value) for message in result.messages)
    assert all(message.encoded for message in [first, *middle])
    assert last.value == ParseReport(
        crawl_id="c1", page_url=PAGE_URL, lease_id="lease-1", discovered_messages=2
    )
    assert result.discovered_messages == 2


def test_discovered_urls_by_host_skip_self_and_nofollow() -> None:
    result = parse(LINKS_PAGE)
    assert discovered_urls(result) == {
        "www.example.com": ["https://www.example.com/a"],
        "other.example": ["https://other.example/c"],
    }
    for message in of_type(result, DiscoveredUrls):
        assert isinstance(message.value, DiscoveredUrls)
        assert message.value.host == message.key
        assert message.value.depth == 2
        assert message.value.source_url == PAGE_URL
        assert message.value.discovered_at == FETCHED_AT
        assert message.value.origin == "lease-1"  # the frontier counts a repeat of it once


def test_follow_nofollow_discovers_nofollow_links() -> None:
    result = parse(LINKS_PAGE, follow_nofollow=True)
    assert discovered_urls(result) == {
        "www.example.com": ["https://www.example.com/a", "https://www.example.com/b"],
        "other.example": ["https://other.example/c", "https://other.example/d"],
    }


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        (b'<meta name="robots" content="nofollow">' + LINKS_PAGE, {"follow_nofollow": True}),
        (LINKS_PAGE, {"headers": {"Content-Type": "text/html", "X-Robots-Tag": "nofollow"}}),
    ],
    ids=["meta-even-with-follow-nofollow", "header"],
)
def test_page_level_nofollow_discovers_nothing(body: bytes, fields: dict[str, Any]) -> None:
    result = parse(body, **fields)
    assert discovered_urls(result) == {}
    assert result.discovered_messages == 0
    page_links = of_type(result, PageLinks)[0].value
    assert isinstance(page_links, PageLinks) and len(page_links.edges) == 5
    report = result.messages[-1].value
    assert isinstance(report, ParseReport) and report.discovered_messages == 0


def test_explicit_discovered_at_and_final_url() -> None:
    result = PageParser().parse(
        fetched_page(PAGE_URL, LINKS_PAGE, final_url="https://www.example.com/moved/"),
        LINKS_PAGE,
        discovered_at=42,
    )
    page_links = result.messages[0]
    assert page_links.key == "https://www.example.com/moved/"
    assert isinstance(page_links.value, PageLinks)
    assert all(edge.discovered_at == 42 for edge in page_links.value.edges)
    # Relative links resolve against the final URL, and the leased URL is not a self-link there.
    assert "https://www.example.com/start" in discovered_urls(result)["www.example.com"]
    assert result.messages[-1].value == ParseReport(
        crawl_id="c1", page_url=PAGE_URL, lease_id="lease-1", discovered_messages=2
    )


@pytest.mark.parametrize(
    ("fields", "body"),
    [
        ({"headers": {"Content-Type": "image/png"}}, b"\x89PNG\r\n\x1a\n"),
        ({"headers": {"Content-Type": "application/json"}}, b'{"href": "/x"}'),
        ({"status": 404}, LINKS_PAGE),
        ({"status": 301}, LINKS_PAGE),
    ],
    ids=["image", "json", "404", "301"],
)
def test_pages_not_parsed_still_get_links_and_a_report(fields: dict[str, Any], body: bytes) -> None:
    result = parse(body, **fields)
    assert result.status == "skipped"
    assert [type(message.value) for message in result.messages] == [PageLinks, ParseReport]
    page_links = result.messages[0].value
    assert isinstance(page_links, PageLinks) and page_links.edges == []


def test_error_pages_can_be_parsed_on_request() -> None:
    result = parse(LINKS_PAGE, settings=ParserSettings(parse_error_pages=True), status=404)
    assert result.status == "html" and result.discovered_messages == 2


def test_binary_body_is_undecodable_but_reported() -> None:
    body = b"%PDF-1.7\n" + bytes(range(256)) * 20
    result = parse(body)
    assert result.status == "undecodable" and result.error
    assert [type(message.value) for message in result.messages] == [PageLinks, ParseReport]


def test_a_page_without_an_http_url_gets_no_messages() -> None:
    result = parse(LINKS_PAGE, url="ftp://www.example.com/x")
    assert result.status == "invalid_page" and result.messages == []


@pytest.mark.parametrize(
    ("url", "fields", "compress"),
    [
        (
            "https://www.example.com/sitemap.xml",
            {"headers": {"Content-Type": "application/xml"}},
            False,
        ),
        ("https://www.example.com/feed", {"headers": {"Content-Type": "text/xml"}}, False),
        ("https://www.example.com/sitemap.xml", {"headers": {}}, False),
        (
            "https://www.example.com/s.xml.gz",
            {"headers": {"Content-Type": "application/octet-stream"}},
            True,
        ),
        ("https://www.example.com/s", {"headers": {"Content-Type": "application/x-gzip"}}, True),
        ("https://www.example.com/no-type", {"headers": {}}, False),
    ],
    ids=["xml-type", "text-xml", "xml-suffix", "gz-suffix", "gzip-type", "sniffed"],
)
def test_sitemaps_are_routed_by_type_suffix_or_content(
    url: str, fields: dict[str, Any], compress: bool
) -> None:
    body = (GOLDEN / "sitemap_urlset.xml").read_bytes()
    result = parse(gzip.compress(body) if compress else body, url=url, **fields)
    assert result.status == "sitemap"
    assert result.sitemap is not None and len(result.sitemap.entries) == 6
    page_links = result.messages[0].value
    assert isinstance(page_links, PageLinks) and page_links.edges == []
    discovered = of_type(result, DiscoveredUrls)
    assert [message.key for message in discovered] == ["www.example.com"]
    urls = discovered[0].value
    assert isinstance(urls, DiscoveredUrls)
    assert (urls.urls[0].url, urls.urls[0].priority) == ("https://www.example.com/", 1.0)
    assert urls.urls[0].modified_at == 1_735_689_600_000  # <lastmod>2025-01-01</lastmod>
    assert urls.depth == 2 and urls.source_url == url


def test_html_served_as_xml_suffix_is_still_html() -> None:
    result = parse(LINKS_PAGE, url="https://www.example.com/page.xml")
    assert result.status == "html"


def test_hundred_thousand_links_are_capped_by_default() -> None:
    body = many_links(100_000)
    result = parse(body)
    assert result.extract is not None
    assert len(result.extract.links) == 10_000 and result.extract.dropped.cap == 90_000


def test_hundred_thousand_links_go_out_in_parts() -> None:
    body = many_links(100_000)
    result = parse(body, settings=ParserSettings(max_links=100_000))
    parts = [message for message in result.messages if isinstance(message.value, PageLinks)]
    assert len(parts) > 1
    limit = links_topic.TOPIC.max_message_bytes
    edges = []
    for index, message in enumerate(parts):
        assert isinstance(message.value, PageLinks)
        assert (message.value.part, message.value.parts) == (index, len(parts))
        assert message.key == PAGE_URL
        assert message.encoded == encode(message.value)
        assert len(message.encoded) < limit
        assert (message.value.page is not None) == (index == 0)  # the metadata once, in part 0
        edges += message.value.edges
    assert len(edges) == 100_000 and len({edge.to_url for edge in edges}) == 100_000
    discovered = of_type(result, DiscoveredUrls)
    assert all(message.encoded == encode(message.value) for message in discovered)
    assert all(len(message.encoded) < urls_topic.TOPIC.max_message_bytes for message in discovered)
    own_host = [message.value for message in discovered if message.key == "www.example.com"]
    assert len(own_host) > 1
    assert [(urls.part, urls.parts) for urls in own_host if isinstance(urls, DiscoveredUrls)] == [
        (index, len(own_host)) for index in range(len(own_host))
    ]
    assert sum(len(urls) for urls in discovered_urls(result).values()) == 100_000
    report = result.messages[-1].value
    assert isinstance(report, ParseReport) and report.discovered_messages == len(discovered)


def many_links(count: int) -> bytes:
    """A page of ``count`` distinct links, most on the page's host, with longish anchors."""
    rows = (
        f'<li><a href="/item/{index}?ref=list">Item number {index} of the long list</a> text</li>'
        if index % 10
        else f'<li><a href="https://h{index % 97}.example.net/{index}">External {index}</a></li>'
        for index in range(count)
    )
    return ("<html><body><ul>" + "\n".join(rows) + "</ul></body></html>").encode()


def test_output_is_deterministic() -> None:
    first = [encode(message.value) for message in parse(LINKS_PAGE).messages]
    second = [encode(message.value) for message in parse(LINKS_PAGE).messages]
    assert first == second


_CONTENT_TYPES = st.sampled_from(
    [
        "text/html",
        "text/html; charset=utf-8",
        "text/html; charset=utf-16",
        "text/html; charset=shift_jis",
        "application/xhtml+xml",
        "application/xml",
        "application/x-gzip",
        "",
        "image/png",
    ]
)
_HTML_BITS = st.sampled_from(
    [
        b"<a href='",
        b"'>",
        b"</a>",
        b"<base href='",
        b"<nav>",
        b"<template>",
        b"<script>",
        b"<meta name=robots content=nofollow>",
        b"<meta charset=utf-16>",
        b"<![CDATA[",
        b"&#0;",
        b"<urlset><url><loc>",
        b"</loc></url>",
        b"<area href=",
        b"\xff\xfe",
        b"\x00",
        b"\xef\xbb\xbf",
        b"javascript:",
        b"//",
        b"http://[",
        b"\xe2\x80",
        b"<!--",
        b"<?xml version='1.0'?>",
    ]
)
_BODIES = st.one_of(
    st.binary(max_size=4096),
    st.lists(st.one_of(_HTML_BITS, st.binary(max_size=16)), max_size=40).map(b"".join),
    st.lists(_HTML_BITS, max_size=20).map(b"".join).map(gzip.compress),
)


@settings(deadline=None, max_examples=200)
@given(
    body=_BODIES,
    content_type=_CONTENT_TYPES,
    url=st.sampled_from([PAGE_URL, "https://www.example.com/sitemap.xml", "http://[::1]:8080/x"]),
    follow_nofollow=st.booleans(),
)
def test_never_raises_on_arbitrary_bytes(
    body: bytes, content_type: str, url: str, follow_nofollow: bool
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    result = parse(body, url=url, headers=headers, follow_nofollow=follow_nofollow)
    assert result.status not in ("failed", "invalid_page"), result.error
    assert isinstance(result.messages[0].value, PageLinks)
    report = result.messages[-1].value
    assert isinstance(report, ParseReport)
    assert report.discovered_messages == len(of_type(result, DiscoveredUrls))


REQUISITES_PAGE = b"""<html><head><link rel="stylesheet" href="/site.css">
<script src="https://cdn.example.net/app.js"></script></head>
<body><img src="/logo.png"><img src="/start"><a href="/a">A</a></body></html>"""


def test_a_crawl_of_page_requisites_sends_them_at_the_pages_depth() -> None:
    result = parse(REQUISITES_PAGE, find_requisites=True, depth=2, redirect_hops=1)
    messages = [m.value for m in of_type(result, DiscoveredUrls)]
    assert all(isinstance(message, DiscoveredUrls) for message in messages)
    links = [m for m in messages if isinstance(m, DiscoveredUrls) and not m.requisites]
    embeds = [m for m in messages if isinstance(m, DiscoveredUrls) and m.requisites]
    assert [(m.depth, m.redirect_hops, [u.url for u in m.urls]) for m in links] == [
        (3, 0, ["https://www.example.com/a"])
    ]
    assert [
        (m.host, m.depth, m.redirect_hops, m.origin, [u.url for u in m.urls]) for m in embeds
    ] == [
        (
            "www.example.com",
            2,
            2,
            "lease-1/requisites",
            ["https://www.example.com/site.css", "https://www.example.com/logo.png"],
        ),
        ("cdn.example.net", 2, 2, "lease-1/requisites", ["https://cdn.example.net/app.js"]),
    ]
    [report] = [m.value for m in of_type(result, ParseReport)]
    assert isinstance(report, ParseReport)
    assert (report.discovered_messages, report.redirect_messages) == (3, 2)


def test_requisites_are_fetched_whatever_the_page_says_of_its_links() -> None:
    nofollow = REQUISITES_PAGE.replace(b"<head>", b'<head><meta name="robots" content="nofollow">')
    assert set(discovered_urls(parse(nofollow, find_requisites=True))) == {
        "www.example.com",
        "cdn.example.net",
    }
    assert discovered_urls(parse(REQUISITES_PAGE)) == {
        "www.example.com": ["https://www.example.com/a"]
    }


def test_a_stylesheet_in_a_crawl_of_page_requisites_sends_its_fonts_and_images() -> None:
    css = b"@import 'theme.css'; @font-face { src: url(/fonts/f.woff2) } a { color: red }"
    fields = {"content_type": "text/css", "headers": {"content-type": "text/css"}}
    result = parse(css, url="https://www.example.com/css/site.css", find_requisites=True, **fields)
    assert result.status == "stylesheet"
    [message] = [m.value for m in of_type(result, DiscoveredUrls)]
    assert isinstance(message, DiscoveredUrls) and message.requisites
    assert [u.url for u in message.urls] == [
        "https://www.example.com/css/theme.css",
        "https://www.example.com/fonts/f.woff2",
    ]
    [links] = [m.value for m in of_type(result, PageLinks)]
    assert isinstance(links, PageLinks) and links.edges == []
    plain = parse(css, url="https://www.example.com/css/site.css", **fields)
    assert plain.status == "skipped" and discovered_urls(plain) == {}
