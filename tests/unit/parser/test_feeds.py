"""News feeds: RSS 2.0, RSS 1.0 and Atom read as lists of pages (`parser.sitemaps`), the feeds a
page announces (`parser.extract`), and what the handler discovers from both (`parser.handler`)."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from typing import Any

import pytest

from parser.extract import MAX_FEEDS, extract_page
from parser.handler import PageParser, ParseResult
from parser.jsonfeed import parse_json_feed
from parser.sitemaps import parse_sitemap, pubdate_ms
from schemas.seeds import CrawlRequest, fetched_content_types
from schemas.urls import DiscoveredUrls
from tests.unit.parser.pages import FETCHED_AT, fetched_page

FEED_URL = "https://news.example/feed/"


def ms(*moment: int) -> int:
    return round(datetime(*moment, tzinfo=UTC).timestamp() * 1000)


RSS = b"""<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"
     xmlns:atom="http://www.w3.org/2005/Atom">
<channel>
  <title>News</title><link>https://news.example/</link>
  <atom:link href="https://news.example/feed/" rel="self" type="application/rss+xml"/>
  <item><title>One</title><link>/2026/12/one?a=1&b=2</link>
    <pubDate>Mon, 07 Dec 2026 10:30:00 +0100</pubDate></item>
  <item><title>Two</title><guid>https://news.example/2026/12/two</guid>
    <dc:date>2026-12-06T08:00:00Z</dc:date></item>
  <item><title>Three</title><guid isPermaLink="false">tag:news.example,3</guid></item>
  <item><title>One again</title><link>https://news.example/2026/12/one?a=1&amp;b=2</link></item>
</channel></rss>"""

RSS1 = b"""<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
  xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="https://news.example/"><link>https://news.example/</link></channel>
  <item rdf:about="https://news.example/a"><title>A</title><dc:date>2026-11-30</dc:date></item>
  <item rdf:about="https://news.example/b"><link>https://news.example/b-moved</link></item>
</rdf:RDF>"""

ATOM = b"""<feed xmlns="http://www.w3.org/2005/Atom">
  <link rel="self" href="/feed.atom"/><link href="/"/>
  <entry><link rel="edit" href="/edit/1"/><link rel="alternate" type="text/html" href="/post/1"/>
    <published>2026-01-01T00:00:00Z</published><updated>2026-12-01T10:00:00+01:00</updated>
  </entry>
  <entry><link href="https://blog.example/post/2"/><published>2026-11-02T00:00:00Z</published>
  </entry>
  <entry><id>urn:uuid:3</id><link rel="enclosure" href="/3.mp3"/></entry>
</feed>"""


def entries(body: bytes, url: str = FEED_URL) -> list[tuple[str, int | None]]:
    return [(entry.url, entry.modified_at) for entry in parse_sitemap(body, url).entries]


def test_rss2_items_are_their_links_or_permalink_guids_with_their_dates() -> None:
    feed = parse_sitemap(RSS, FEED_URL)
    assert (feed.kind, feed.is_feed, feed.error) == ("rss", True, None)
    assert entries(RSS) == [
        ("https://news.example/2026/12/one?a=1&b=2", ms(2026, 12, 7, 9, 30)),
        ("https://news.example/2026/12/two", ms(2026, 12, 6, 8)),
    ]
    assert (feed.invalid_urls, feed.duplicates) == (1, 1)  # no permalink; the same page again
    assert all(entry.priority is None and not entry.is_sitemap for entry in feed.entries)


def test_rss1_items_are_their_links_else_their_rdf_about() -> None:
    assert entries(RSS1) == [
        ("https://news.example/a", ms(2026, 11, 30)),
        ("https://news.example/b-moved", None),
    ]
    assert parse_sitemap(RSS1, FEED_URL).kind == "rss"


def test_atom_entries_are_their_alternate_links_updated_before_published() -> None:
    feed = parse_sitemap(ATOM, "https://blog.example/feed.atom")
    assert feed.kind == "atom"
    assert entries(ATOM, "https://blog.example/feed.atom") == [
        ("https://blog.example/post/1", ms(2026, 12, 1, 9)),
        ("https://blog.example/post/2", ms(2026, 11, 2)),
    ]
    assert feed.invalid_urls == 1  # an entry with only an enclosure names no page


def test_a_gzipped_feed_reads_the_same() -> None:
    assert entries(gzip.compress(RSS)) == entries(RSS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mon, 07 Dec 2026 10:30:00 GMT", ms(2026, 12, 7, 10, 30)),
        ("7 Dec 2026 10:30 -0500", ms(2026, 12, 7, 15, 30)),
        ("Mon, 07 Dec 2026 10:30:00", ms(2026, 12, 7, 10, 30)),  # no zone: UTC
        ("2026-12-07T10:30:00Z", ms(2026, 12, 7, 10, 30)),  # a W3C time where RFC 822 belongs
        ("yesterday", None),
        ("", None),
        (None, None),
    ],
)
def test_pubdate(text: str | None, expected: int | None) -> None:
    assert pubdate_ms(text) == expected


HEAD = (
    '<html><head><base href="https://news.example/section/">'
    '<link rel="alternate" type="application/rss+xml" href="feed.rss" title="RSS">'
    '<link rel="ALTERNATE" type="application/atom+xml; charset=utf-8" href="/atom">'
    '<link rel="alternate" type="application/rss+xml" href="/section/feed.rss">'
    '<link rel="alternate" hreflang="de" href="/de/">'
    '<link rel="alternate" type="application/rss+xml">'
    '<link rel="stylesheet" type="application/rss+xml" href="/not-a-feed">'
    "</head><body>{body}</body></html>"
)


def test_a_page_announces_its_feeds_in_its_head() -> None:
    extract = extract_page(
        "https://news.example/section/", {}, HEAD.format(body=""), discovered_at=1
    )
    assert extract.feeds == ("https://news.example/section/feed.rss", "https://news.example/atom")
    assert extract.edges == []  # head links are not edges

    many = "".join(
        f'<link rel="alternate" type="application/atom+xml" href="/f{n}">' for n in range(40)
    )
    crowded = extract_page("https://a.example/", {}, many, discovered_at=1)
    assert len(crowded.feeds) == MAX_FEEDS


def parse(body: bytes, **fields: Any) -> ParseResult:
    page = fetched_page("https://news.example/section/", body, **fields)
    return PageParser().parse(page, body)


def discovered(result: ParseResult) -> dict[str, int]:
    """Each discovered URL and its depth."""
    return {
        url.url: message.value.depth
        for message in result.messages
        if isinstance(message.value, DiscoveredUrls)
        for url in message.value.urls
    }


def test_a_crawl_using_feeds_discovers_them_like_links() -> None:
    body = HEAD.format(body='<a href="/atom">atom</a><a href="/story">story</a>').encode()
    assert discovered(parse(body, use_feeds=True)) == {
        "https://news.example/atom": 2,
        "https://news.example/story": 2,
        "https://news.example/section/feed.rss": 2,
    }
    assert discovered(parse(body)) == {
        "https://news.example/atom": 2,
        "https://news.example/story": 2,
    }
    within = parse(body, use_feeds=True, follow_within=".nothing")
    assert list(discovered(within)) == [
        "https://news.example/section/feed.rss",
        "https://news.example/atom",
    ]
    nofollow = {"Content-Type": "text/html", "X-Robots-Tag": "nofollow"}
    assert discovered(parse(body, use_feeds=True, headers=nofollow)) == {}


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/rss+xml; charset=utf-8", RSS),
        ("application/atom+xml", ATOM),
        ("text/xml", RSS1),
        ("", RSS),  # no telling type: the root element says it
        ("application/octet-stream", ATOM),
    ],
)
def test_a_feed_body_is_parsed_as_one(content_type: str, body: bytes) -> None:
    result = parse(body, headers={"Content-Type": content_type} if content_type else {})
    assert result.status == "feed"
    found = [
        (url.url, url.modified_at, message.value.depth)
        for message in result.messages
        if isinstance(message.value, DiscoveredUrls)
        for url in message.value.urls
    ]
    assert found and all(depth == 2 for _, _, depth in found)
    if body is RSS:
        assert found[0] == ("https://news.example/2026/12/one?a=1&b=2", ms(2026, 12, 7, 9, 30), 2)


def test_a_crawl_using_feeds_keeps_feed_types_for_every_url() -> None:
    plain = CrawlRequest(seeds=["https://news.example/"])
    feeds = plain.model_copy(update={"use_feeds": True})
    assert "application/rss+xml" not in fetched_content_types(plain, "https://news.example/feed/")
    kept = fetched_content_types(feeds, "https://news.example/?format=rss")
    assert {"text/html", "application/rss+xml", "application/atom+xml", "text/xml"} <= set(kept)
    anything = feeds.model_copy(update={"content_types": ["*/*"]})
    assert fetched_content_types(anything, "https://news.example/feed/") == ["*/*"]


def test_fetched_at_is_the_discovery_time_of_feed_items() -> None:
    result = parse(RSS, headers={"Content-Type": "application/rss+xml"})
    [message] = [m.value for m in result.messages if isinstance(m.value, DiscoveredUrls)]
    assert message.discovered_at == FETCHED_AT and message.source_url == (
        "https://news.example/section/"
    )


JSON_FEED = b"""{
  "version": "https://jsonfeed.org/version/1.1",
  "title": "News",
  "home_page_url": "https://news.example/",
  "items": [
    {"id": "1", "url": "/2026/12/one", "date_published": "2026-12-01T10:00:00Z",
     "date_modified": "2026-12-07T09:30:00+01:00"},
    {"id": "2", "external_url": "https://elsewhere.example/story",
     "date_published": "2026-12-06T08:00:00Z"},
    {"id": "3", "content_text": "no page"},
    {"id": "4", "url": "https://news.example/2026/12/one"},
    "not an item"
  ]
}"""


def test_a_json_feed_lists_its_items_pages_with_their_dates() -> None:
    feed = parse_json_feed(JSON_FEED, FEED_URL)
    assert (feed.kind, feed.is_feed, feed.error) == ("jsonfeed", True, None)
    assert [(entry.url, entry.modified_at) for entry in feed.entries] == [
        ("https://news.example/2026/12/one", ms(2026, 12, 7, 8, 30)),
        ("https://elsewhere.example/story", ms(2026, 12, 6, 8)),
    ]
    assert (feed.invalid_urls, feed.duplicates) == (2, 1)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"{not json", "not JSON"),
        (b'{"items": []}', "not a JSON Feed: no jsonfeed.org version"),
        (b'{"version": "https://jsonfeed.org/version/1"}', "not a JSON Feed: no items list"),
        (b"[1, 2]", "not a JSON Feed: no jsonfeed.org version"),
        (b"[" * 100_000, "not JSON"),  # nested too deep for the parser
    ],
)
def test_what_is_no_json_feed_says_why(body: bytes, error: str) -> None:
    feed = parse_json_feed(body, FEED_URL)
    assert feed.entries == [] and (feed.error or "").startswith(error)


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("application/feed+json", "feed"),
        ("application/json; charset=utf-8", "feed"),  # its version names it
        ("", "feed"),
    ],
)
def test_a_json_feed_body_is_parsed_as_one(content_type: str, status: str) -> None:
    result = parse(JSON_FEED, headers={"Content-Type": content_type} if content_type else {})
    assert result.status == status
    assert discovered(result) == {
        "https://news.example/2026/12/one": 2,
        "https://elsewhere.example/story": 2,
    }


def test_other_json_is_not_parsed() -> None:
    api = b'{"id": 12, "link": "https://news.example/?p=12"}'
    assert parse(api, headers={"Content-Type": "application/json"}).status == "skipped"


def test_a_page_announces_a_json_feed_but_not_its_json_api() -> None:
    head = (
        '<link rel="alternate" type="application/feed+json" href="/feed.json">'
        '<link rel="alternate" type="application/json" href="/wp-json/wp/v2/pages/12">'
    )
    extract = extract_page("https://news.example/", {}, head, discovered_at=1)
    assert extract.feeds == ("https://news.example/feed.json",)
