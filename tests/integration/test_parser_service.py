"""The parser as a process against a real broker: pages in; edges, discovered URLs and reports
out; poison pages to the dead-letter topic and the partition moving on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Message
from confluent_kafka.admin import AdminClient, MemberDescription

from schemas import links, urls
from schemas.deadletter import DeadLetter
from schemas.pages import FetchedPage
from schemas.registry import ALL_TOPICS
from schemas.serde import decode, encode_page
from tests.support import Deployment, ServiceProcess, TopicReader, produce_json, wait_for

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


SESSION_TIMEOUT_MS = 120_000
"""Longer than any wait below: a member that stays after its process stopped is a static one."""


def test_an_instance_without_an_id_leaves_its_group_and_one_with_an_id_is_static(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The default instance id (host-pid) is new at every start, so a static member under it
    would hold a stopped parser's partitions, unserved, for a whole session timeout: without a
    given id the parser is a dynamic member, and its partitions move when it stops."""
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    deployment.create(ALL_TOPICS)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    group = deployment.topic("parser")

    def members() -> list[MemberDescription]:
        """The group's members as its coordinator describes them. On a fresh broker the
        coordinator is still loading, or not yet elected, for a while: asked again."""
        deadline = time.monotonic() + 60
        while True:
            try:
                return list(admin.describe_consumer_groups([group])[group].result(30).members)
            except (KafkaException, FutureTimeout):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def started(name: str, instance_id: str | None) -> ServiceProcess:
        env = deployment.env(instance_id or "unused")
        env["STREAMCRAWL_LOOP__SESSION_TIMEOUT_MS"] = str(SESSION_TIMEOUT_MS)
        if instance_id is None:
            del env["STREAMCRAWL_INSTANCE_ID"]
        return ServiceProcess("parser", env, tmp_path / f"{name}.log").start()

    anonymous = started("anonymous", None)
    named = started("named", "parser-b")
    try:
        wait_for(lambda: len(members()) == 2, 60, "both parsers in the group")
        instance_ids = sorted(str(m.group_instance_id) for m in members())
        assert instance_ids == ["None", f"{group}.parser-b"]

        anonymous.terminate()
        assert anonymous.wait(60) == 0, anonymous.log_tail()
        wait_for(
            lambda: [str(m.group_instance_id) for m in members()] == [f"{group}.parser-b"],
            60,
            "the stopped parser gone from the group",
        )
        wait_for(
            lambda: sum(len(m.assignment.topic_partitions) for m in members()) >= 2,
            60,
            "the named parser holding the stopped one's partition too",
        )

        named.terminate()
        assert named.wait(60) == 0, named.log_tail()
        assert [str(m.group_instance_id) for m in members()] == [f"{group}.parser-b"], (
            "a static member keeps its place after it stops, for a restart to take it back"
        )
    finally:
        anonymous.kill()
        named.kill()
