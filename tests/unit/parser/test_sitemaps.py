"""Sitemaps: compression, limits, priorities, and XML that tries to hurt the parser."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parser.sitemaps import parse_sitemap

GOLDEN = Path(__file__).parent / "golden"
SITEMAP_URL = "https://www.example.com/sitemap.xml"


def urlset(*entries: str) -> bytes:
    body = "".join(f"<url>{entry}</url>" for entry in entries)
    return f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</urlset>'.encode()


def test_gzip_sitemap_reads_like_the_plain_one() -> None:
    plain = (GOLDEN / "sitemap_urlset.xml").read_bytes()
    expected = parse_sitemap(plain, SITEMAP_URL)
    assert parse_sitemap(gzip.compress(plain), SITEMAP_URL + ".gz") == expected
    assert len(expected.entries) == 6


def test_concatenated_gzip_members_are_all_read() -> None:
    first, second = (
        urlset("<loc>https://a.example/1</loc>"),
        urlset("<loc>https://a.example/2</loc>"),
    )
    document = first[: first.rindex(b"</urlset>")] + second[second.index(b"<url>") :]
    middle = len(document) // 2
    sitemap = parse_sitemap(
        gzip.compress(document[:middle]) + gzip.compress(document[middle:]), SITEMAP_URL
    )
    assert [entry.url for entry in sitemap.entries] == [
        "https://a.example/1",
        "https://a.example/2",
    ]
    assert not sitemap.truncated


def test_gzip_bomb_stops_at_the_size_limit() -> None:
    bomb = gzip.compress(urlset("<loc>https://a.example/</loc>")[:-10] + b" " * 20_000_000)
    sitemap = parse_sitemap(bomb, SITEMAP_URL, max_bytes=1_000_000)
    assert sitemap.truncated
    assert [entry.url for entry in sitemap.entries] == ["https://a.example/"]


def test_plain_body_over_the_size_limit_is_cut() -> None:
    sitemap = parse_sitemap(
        urlset(*["<loc>https://a.example/x</loc>"] * 100), SITEMAP_URL, max_bytes=500
    )
    assert sitemap.truncated and len(sitemap.entries) == 1


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xff\xff\xff\xff", "corrupt gzip data"),
        (gzip.compress(urlset("<loc>https://a.example/</loc>"))[:-12], None),
        (b"", "not XML"),
        (b"\x00\xff\xfe garbage", "not a sitemap"),
        (
            b"<svg xmlns='http://www.w3.org/2000/svg'><a href='/x'/></svg>",
            "not a sitemap or feed: root element <svg>",
        ),
        (
            b"<html><body><a href='/x'>x</a></body></html>",
            "not a sitemap or feed: root element <html>",
        ),
    ],
    ids=["corrupt-gzip", "cut-gzip", "empty", "binary", "svg", "html"],
)
def test_broken_or_foreign_documents_are_reported(body: bytes, error: str | None) -> None:
    sitemap = parse_sitemap(body, SITEMAP_URL)
    if error is None:
        assert sitemap.truncated and sitemap.error is None
    else:
        assert sitemap.error is not None and sitemap.error.startswith(error)


def test_url_cap_counts_the_rest() -> None:
    locs = [f"<loc>https://a.example/{index}</loc>" for index in range(30)]
    sitemap = parse_sitemap(urlset(*locs), SITEMAP_URL, max_urls=10)
    assert len(sitemap.entries) == 10 and sitemap.over_cap == 20


def test_protocol_maximum_is_the_default_cap() -> None:
    locs = [f"<loc>https://a.example/{index}</loc>" for index in range(50_010)]
    sitemap = parse_sitemap(urlset(*locs), SITEMAP_URL)
    assert len(sitemap.entries) == 50_000 and sitemap.over_cap == 10


@pytest.mark.parametrize(
    ("text", "priority"),
    [
        ("0.5", 0.5),
        (" 1.0 ", 1.0),
        ("0", 0.0),
        ("1.0001", None),
        ("-0.1", None),
        ("nan", None),
        ("inf", None),
        ("high", None),
        ("", None),
    ],
)
def test_priority(text: str, priority: float | None) -> None:
    sitemap = parse_sitemap(
        urlset(f"<loc>https://a.example/</loc><priority>{text}</priority>"), SITEMAP_URL
    )
    assert sitemap.entries[0].priority == priority


@pytest.mark.parametrize(
    ("text", "modified_at"),
    [
        ("2026-12-07", 1_796_601_600_000),
        ("2026-12-07T10:30:00+01:00", 1_796_635_800_000),
        ("2026-12-07T09:30Z", 1_796_635_800_000),
        ("2026-12-07T09:30:00.250Z", 1_796_635_800_250),
        ("2026-12-07T09:30:00", 1_796_635_800_000),  # no zone: UTC
        (" 2026 ", 1_767_225_600_000),
        ("2026-05", 1_777_593_600_000),
        ("2026-13-01", None),
        ("1969-12-31", None),
        ("yesterday", None),
        ("", None),
    ],
)
def test_lastmod(text: str, modified_at: int | None) -> None:
    sitemap = parse_sitemap(
        urlset(f"<loc>https://a.example/</loc><lastmod>{text}</lastmod>"), SITEMAP_URL
    )
    assert sitemap.entries[0].modified_at == modified_at


def test_bare_ampersands_survive() -> None:
    sitemap = parse_sitemap(urlset("<loc>https://a.example/?b=2&a=1&amp;c=3</loc>"), SITEMAP_URL)
    assert sitemap.entries[0].url == "https://a.example/?a=1&b=2&c=3"


def test_sitemap_without_namespace_and_with_cdata() -> None:
    sitemap = parse_sitemap(
        b"<urlset><url><loc><![CDATA[https://a.example/x?y=1&z=2]]></loc></url></urlset>",
        SITEMAP_URL,
    )
    assert sitemap.kind == "urlset"
    assert [entry.url for entry in sitemap.entries] == ["https://a.example/x?y=1&z=2"]


def test_xxe_reads_no_file_and_calls_no_network() -> None:
    sitemap = parse_sitemap((GOLDEN / "sitemap_xxe.xml").read_bytes(), SITEMAP_URL)
    urls = [entry.url for entry in sitemap.entries]
    assert urls == [
        "https://www.example.com/leak?data=",
        "https://www.example.com/remote",
        "https://www.example.com/safe",
    ]
    assert not any("root" in url or "%3A" in url for url in urls)


def test_billion_laughs_is_not_expanded() -> None:
    body = (GOLDEN / "sitemap_billion_laughs.xml").read_bytes()
    sitemap = parse_sitemap(body, SITEMAP_URL)
    assert sitemap.error is not None
    assert not any("lol" in entry.url for entry in sitemap.entries)


def test_nesting_past_the_depth_limit_stops_with_an_error() -> None:
    deep = "<a>" * 300 + "x" + "</a>" * 300
    body = urlset("<loc>https://a.example/1</loc>").removesuffix(b"</urlset>")
    body += f"{deep}<url><loc>https://a.example/2</loc></url></urlset>".encode()
    sitemap = parse_sitemap(body, SITEMAP_URL)
    assert sitemap.error == "the XML parser stopped before the end of the document"
    assert [entry.url for entry in sitemap.entries] == ["https://a.example/1"]


def test_quadratic_blowup_is_not_expanded() -> None:
    big = "A" * 100_000
    body = (
        f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY big "{big}">]>'
        + "<urlset><url><loc>https://a.example/"
        + "&big;" * 10_000
        + "</loc></url></urlset>"
    ).encode()
    sitemap = parse_sitemap(body, SITEMAP_URL)
    assert [entry.url for entry in sitemap.entries] in ([], ["https://a.example/"])


@settings(deadline=None, max_examples=200)
@given(body=st.one_of(st.binary(max_size=2048), st.binary(max_size=512).map(gzip.compress)))
def test_never_raises(body: bytes) -> None:
    sitemap = parse_sitemap(body, SITEMAP_URL)
    assert all(entry.url.startswith(("http://", "https://")) for entry in sitemap.entries)


def test_padding_after_the_gzip_stream_is_ignored() -> None:
    compressed = gzip.compress(urlset("<loc>https://a.example/</loc>")) + b"\x00" * 512
    sitemap = parse_sitemap(compressed, SITEMAP_URL)
    assert (sitemap.error, sitemap.truncated) == (None, False)
    assert [entry.url for entry in sitemap.entries] == ["https://a.example/"]


def test_index_entries_carry_no_priority_and_url_entries_in_an_index_are_ignored() -> None:
    sitemap = parse_sitemap((GOLDEN / "sitemap_index.xml").read_bytes(), SITEMAP_URL)
    assert sitemap.kind == "sitemapindex"
    assert all(entry.is_sitemap and entry.priority is None for entry in sitemap.entries)
    assert "https://www.example.com/not-in-an-index" not in [e.url for e in sitemap.entries]
