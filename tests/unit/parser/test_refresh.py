"""A page's declarative refresh (`parser.refresh`): read as browsers read it, and followed as a
redirect (`parser.extract`, `parser.handler`)."""

from __future__ import annotations

from typing import Any

import pytest

from parser.extract import extract_page
from parser.handler import PageParser, ParseResult
from parser.refresh import Refresh, parse_refresh
from parser.settings import ParserSettings
from schemas.links import PageLinks
from schemas.urls import DiscoveredUrls, ParseReport
from tests.unit.parser.pages import FETCHED_AT, fetched_page

PAGE = "https://www.example.com/old/page"
HTML = {"Content-Type": "text/html"}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("0; url=/new", Refresh(0, "/new")),
        ("0;URL='/a b'x", Refresh(0, "/a b")),  # the quote ends the URL
        ('  3 , url = "/q" ', Refresh(3, "/q")),
        ("0; /direct", Refresh(0, "/direct")),  # "url=" is optional
        ("0;urlx=/y", Refresh(0, "urlx=/y")),  # not "url=": the rest is the URL
        ("0;u/x", Refresh(0, "u/x")),
        (".5;/y", Refresh(0, "/y")),  # whole seconds
        ("1.5.6 ;url=/z", Refresh(1, "/z")),
        ("5", Refresh(5, None)),  # a reload
        ("0 ; url=", Refresh(0, None)),
        ("9" * 5000 + ";url=/a", Refresh(10**9, "/a")),  # int() would refuse the digits
        ("url=/x", None),  # no delay: browsers ignore it
        ("0x;url=/a", None),
        (" ; url=/a", None),
        ("", None),
    ],
)
def test_content_is_read_as_the_html_standard_reads_it(
    content: str, expected: Refresh | None
) -> None:
    assert parse_refresh(content) == expected


def refresh_of(body: str, headers: dict[str, str] | None = None, **options: Any) -> str | None:
    extract = extract_page(PAGE, headers or {}, body, discovered_at=FETCHED_AT, **options)
    return None if extract.refresh is None else extract.refresh.edge.to_url


@pytest.mark.parametrize(
    ("body", "headers", "expected"),
    [
        ('<meta http-equiv="refresh" content="0; url=/new">', {}, "https://www.example.com/new"),
        ('<META HTTP-EQUIV="Refresh" CONTENT="2;URL=new">', {}, "https://www.example.com/old/new"),
        (
            '<base href="https://cdn.example/x/"><meta http-equiv=refresh content="0;url=y">',
            {},
            "https://cdn.example/x/y",
        ),
        ("<p>body</p>", {"Refresh": "0; url=https://b.example/"}, "https://b.example/"),
        (
            '<meta http-equiv="refresh" content="0; url=/meta">',
            {"refresh": "0; url=/header"},
            "https://www.example.com/header",
        ),
        (
            '<meta http-equiv="refresh" content="0; url=/first">'
            '<meta http-equiv="refresh" content="0; url=/second">',
            {},
            "https://www.example.com/first",
        ),
        (
            '<noscript><meta http-equiv="refresh" content="0; url=/enable-js"></noscript>'
            '<meta http-equiv="refresh" content="1; url=/real">',
            {},
            "https://www.example.com/real",
        ),
        ('<noscript><meta http-equiv="refresh" content="0; url=/nojs"></noscript>', {}, None),
        ('<meta http-equiv="refresh" content="300">', {}, None),  # a reload
        ('<meta http-equiv="refresh" content="0; url=/old/page#top">', {}, None),  # itself
        ('<meta http-equiv="refresh" content="0; url=mailto:a@b.example">', {}, None),
        ('<meta http-equiv="refresh" content="101; url=/later">', {}, None),  # past 100 s
        ('<meta name="refresh" content="0; url=/new">', {}, None),  # a name, not http-equiv
    ],
    ids=[
        "meta",
        "case-and-relative",
        "base",
        "header",
        "header-first",
        "first-meta",
        "noscript-skipped",
        "only-noscript",
        "reload",
        "self",
        "scheme",
        "too-late",
        "name",
    ],
)
def test_the_refresh_target(body: str, headers: dict[str, str], expected: str | None) -> None:
    assert refresh_of(f"<html><head>{body}</head><body></body></html>", headers) == expected


def test_the_delay_limit_is_a_setting() -> None:
    late = '<meta http-equiv="refresh" content="600; url=/slides/2">'
    assert refresh_of(late) is None
    assert refresh_of(late, max_refresh_delay_s=600) == "https://www.example.com/slides/2"


def test_the_refresh_edge_is_a_redirect_and_borrows_the_anchor_of_a_link_there() -> None:
    body = (
        '<head><meta http-equiv="refresh" content="0; url=/new"></head><body><main>'
        '<p>Moved. <a href="/new">Go to the new page</a> now.</p><a href="/other">x</a>'
        "</main></body>"
    )
    extract = extract_page(PAGE, {}, body, discovered_at=FETCHED_AT)
    by_target = {edge.to_url: edge for edge in extract.edges}
    moved = by_target["https://www.example.com/new"]
    assert (moved.link_type, moved.anchor_text, moved.position) == (
        "REDIRECT",
        "Go to the new page",
        "CONTENT",
    )
    assert "Moved." in moved.context_window
    assert by_target["https://www.example.com/other"].link_type == "INTERNAL"
    assert extract.refresh is not None and extract.refresh.edge is moved

    bare = extract_page(PAGE, {"Refresh": "0;url=https://b.example/"}, "", discovered_at=1)
    [edge] = bare.edges
    assert (edge.to_url, edge.link_type, edge.anchor_text, edge.discovered_at) == (
        "https://b.example/",
        "REDIRECT",
        "",
        1,
    )


def parse(body: bytes, **fields: Any) -> ParseResult:
    page = fetched_page(PAGE, body, **fields)
    return PageParser(ParserSettings()).parse(page, body)


def discovered(result: ParseResult) -> list[DiscoveredUrls]:
    return [m.value for m in result.messages if isinstance(m.value, DiscoveredUrls)]


def test_the_target_is_discovered_at_the_page_depth_with_one_more_redirect_hop() -> None:
    body = (
        b'<meta http-equiv="refresh" content="0; url=https://b.example/moved">'
        b'<a href="/a">a</a><a href="https://b.example/moved">here</a><a href="https://b.example/x">'
        b"x</a>"
    )
    result = parse(body, depth=3, redirect_hops=1)
    links, *urls, report = result.messages
    assert isinstance(links.value, PageLinks)
    assert [edge.link_type for edge in links.value.edges] == ["INTERNAL", "REDIRECT", "EXTERNAL"]
    by_depth = {
        (message.depth, message.host, message.redirect_hops, message.origin): [
            url.url for url in message.urls
        ]
        for message in discovered(result)
    }
    assert by_depth == {
        (4, "www.example.com", 0, "lease-1"): ["https://www.example.com/a"],
        (4, "b.example", 0, "lease-1"): ["https://b.example/x"],
        (3, "b.example", 2, "lease-1/refresh"): ["https://b.example/moved"],
    }
    assert [m.key for m in urls] == ["www.example.com", "b.example", "b.example"]
    assert report.value == ParseReport(
        crawl_id="c1",
        page_url=PAGE,
        lease_id="lease-1",
        discovered_messages=3,
        redirect_messages=1,
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"headers": {**HTML, "X-Robots-Tag": "nofollow"}},
        {"follow_within": ".nothing"},
    ],
    ids=["page-nofollow", "follow-within"],
)
def test_the_refresh_is_followed_whatever_limits_the_links(fields: dict[str, Any]) -> None:
    body = b'<meta http-equiv="refresh" content="0; url=/new"><a href="/a">a</a>'
    [message] = discovered(parse(body, **fields))
    assert (message.origin, [url.url for url in message.urls]) == (
        "lease-1/refresh",
        ["https://www.example.com/new"],
    )


def test_a_page_without_a_refresh_reports_no_redirect_messages() -> None:
    result = parse(b'<a href="/a">a</a>')
    report = result.messages[-1].value
    assert isinstance(report, ParseReport) and report.redirect_messages == 0
    assert "redirect_messages" not in result.messages[-1].encoded.decode()
