"""Feeds through the real services (frontier, fetcher, parser): a crawl with ``use_feeds`` finds
the RSS feed a home page announces in its head, fetches it although the crawl keeps only HTML
otherwise, and crawls the articles only the feed lists, one click below the feed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.seeds import CrawlRequest
from tests.support import LocalSite, ServiceProcess, crawl_to_the_end

pytestmark = pytest.mark.kafka

HTML = {"Content-Type": "text/html; charset=utf-8"}
FEED = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>News</title><link>/</link>
<item><title>Rates</title><link>/2026/rates</link><pubDate>Mon, 07 Dec 2026 09:00:00 GMT</pubDate>
</item><item><title>Rain</title><link>/2026/rain</link></item></channel></rss>"""


def article(title: str) -> tuple[int, dict[str, str], bytes]:
    return (200, HTML, f"<html><head><title>{title}</title></head><body/></html>".encode())


@pytest.fixture
def news() -> Iterator[LocalSite]:
    local = LocalSite(
        {
            "/robots.txt": (200, {}, b"User-agent: *\n"),
            "/": (
                200,
                HTML,
                b'<html><head><link rel="alternate" type="application/rss+xml" href="/feed/">'
                b'</head><body><a href="/about">about</a></body></html>',
            ),
            "/about": article("About"),
            "/feed/": (200, {"Content-Type": "application/rss+xml; charset=utf-8"}, FEED),
            "/2026/rates": article("Rates"),
            "/2026/rain": article("Rain"),
        }
    ).start()
    yield local
    local.stop()


def test_a_crawl_using_feeds_reaches_the_articles_only_its_feed_lists(
    kafka_bootstrap: str, tmp_path: Path, news: LocalSite, started: list[ServiceProcess]
) -> None:
    request = CrawlRequest(
        crawl_id="news", seeds=[news.url("/")], max_depth=2, use_feeds=True, politeness_delay_ms=0
    )
    deployment = crawl_to_the_end(kafka_bootstrap, tmp_path, started, request)

    assert {"/", "/about", "/feed/", "/2026/rates", "/2026/rain"} <= set(news.paths())
    depths = {}
    for path in ("/feed/", "/2026/rates"):
        shown = deployment.cli("url", "news", news.url(path), "--json")
        assert shown.returncode == 0, shown.stderr
        depths[path] = json.loads(shown.stdout)["depth"]
    assert depths == {"/feed/": 1, "/2026/rates": 2}
