"""The parser as a process against a real broker: pages in; edges, discovered URLs and reports
out; poison pages to the dead-letter topic and the partition moving on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Message

from schemas import links, urls
from schemas.deadletter import DeadLetter
from schemas.pages import FetchedPage
from schemas.registry import ALL_TOPICS
from schemas.serde import decode, encode_page
from tests.support import Deployment, ServiceProcess, TopicReader, produce_json

pytestmark = pytest.mark.kafka

BODY = b"""<html><head><title>Docs</title></head><body>
<nav><a href="/docs/intro">Intro</a></nav>
<main><p>Read the <a href="/docs/setup?utm_source=x#top">setup guide</a> before you start.</p>
<p>See <a href="https://other.example/page" rel="nofollow">a friend</a>.</p></main>
<footer><a href="https://cdn.example/terms">Terms</a></footer>
</body></html>"""


def page(url: str, body: bytes, lease: str) -> FetchedPage:
    return FetchedPage(
        crawl_id="c1",
        url=url,
        final_url=url,
        lease_id=lease,
        depth=1,
        status=200,
        headers={"content-type": "text/html; charset=utf-8"},
        content_type="text/html; charset=utf-8",
        body_size=len(body),
        sha256="0" * 64,
        fetched_at=1_795_000_000_000,
    )


@pytest.fixture
def parser_process(kafka_bootstrap: str, tmp_path: Path) -> Iterator[Deployment]:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    deployment.create(ALL_TOPICS)
    process = ServiceProcess("parser", deployment.env("parser-a"), tmp_path / "parser.log").start()
    yield deployment
    process.kill()


def test_pages_become_edges_discovered_urls_and_reports(parser_process: Deployment) -> None:
    deployment = parser_process
    url = "https://docs.example/docs/api"
    produce_json(
        deployment.bootstrap,
        deployment.topic("pages"),
        [
            (url, encode_page(page(url, BODY, "lease-1"), BODY)),
            ("poison", b"no envelope here"),
            ("http://empty.example/", encode_page(page("http://empty.example/", b"", "l2"), b"")),
        ],
        raw=True,
    )
    link_reader = TopicReader(deployment.bootstrap, deployment.topic("links"))
    link_reader.read_until(lambda ms: len(ms) >= 2, 60, "two PageLinks")
    by_source = {m.key().decode(): decode(links.PageLinks, m.value()) for m in link_reader.messages}
    edges = {e.to_url: e for e in by_source[url].edges}
    assert set(edges) == {
        "https://docs.example/docs/intro",
        "https://docs.example/docs/setup",
        "https://other.example/page",
        "https://cdn.example/terms",
    }
    assert edges["https://docs.example/docs/intro"].position == "NAV"
    assert edges["https://docs.example/docs/setup"].anchor_text == "setup guide"
    assert "Read the" in edges["https://docs.example/docs/setup"].context_window
    assert edges["https://other.example/page"].link_type == "NOFOLLOW"
    assert edges["https://cdn.example/terms"].position == "FOOTER"
    assert by_source["http://empty.example/"].edges == []
    meta = by_source[url].page
    assert meta is not None and meta.title == "Docs" and meta.status == 200 and not meta.nofollow

    url_reader = TopicReader(deployment.bootstrap, deployment.topic("urls"))
    # A page's batches are keyed by their targets' host and its report by the page's host, so
    # they may sit on different partitions and a report may be read before the batches it counts.
    url_reader.read_until(
        lambda ms: _reports_and_their_batches(ms, 2), 60, "two reports and their batches"
    )
    discovered = [decode(urls.URLS_MESSAGE, m.value()) for m in url_reader.messages]
    reports = {d.page_url: d for d in discovered if isinstance(d, urls.ParseReport)}
    batches = [d for d in discovered if isinstance(d, urls.DiscoveredUrls)]
    assert reports[url].discovered_messages == len(batches) == 2  # nofollow is not followed
    assert {b.host for b in batches} == {"docs.example", "cdn.example"}
    assert all(b.depth == 2 and b.source_url == url for b in batches)
    assert reports["http://empty.example/"].discovered_messages == 0

    dead = TopicReader(deployment.bootstrap, deployment.topic("deadletter"))
    dead.read_until(lambda ms: len(ms) >= 1, 30, "the poison page")
    letter = decode(DeadLetter, dead.messages[0].value())
    assert letter.stage == "parser" and "envelope" in letter.error


def _reports_and_their_batches(messages: list[Message], reports: int) -> bool:
    """At least `reports` parse reports read, and as many batches as they count."""
    discovered = [decode(urls.URLS_MESSAGE, m.value()) for m in messages]
    read = [d for d in discovered if isinstance(d, urls.ParseReport)]
    batches = sum(isinstance(d, urls.DiscoveredUrls) for d in discovered)
    return len(read) >= reports and batches >= sum(r.discovered_messages for r in read)
