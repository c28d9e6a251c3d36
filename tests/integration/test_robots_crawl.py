"""A crawl through the real services (frontier, fetcher, parser) of a site whose robots.txt is
down when the crawl starts and back a moment later.

RFC 9309 2.3.1.4: an unreachable robots.txt (here a 503) means nothing of the origin is fetched
for now. Until session 38 the fetcher finished every URL it held back as `robots_denied`, so one
bad answer dropped the seed, and with it the whole site, from the crawl. Now the URLs are
retried once robots.txt is asked for again (`error_ttl_s`, 2 s here), and the site is crawled.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Message

from schemas import outcomes
from schemas.registry import ALL_TOPICS
from schemas.seeds import CrawlRequest
from schemas.serde import decode
from tests.support import Deployment, LocalSite, ServiceProcess, TopicReader, crawl_done

pytestmark = pytest.mark.kafka

HTML = {"Content-Type": "text/html; charset=utf-8"}
ROBOTS_DOWN = (503, {"Content-Type": "text/plain"}, b"overloaded")
ROBOTS_BACK = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private\n")


def page(links: list[str]) -> bytes:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return f"<html><body>{anchors}</body></html>".encode()


@pytest.fixture
def site() -> Iterator[LocalSite]:
    local = LocalSite(
        {
            "/robots.txt": ROBOTS_DOWN,
            "/": (200, HTML, page(["/a", "/b", "/private"])),
            "/a": (200, HTML, page([])),
            "/b": (200, HTML, page([])),
            "/private": (200, HTML, page([])),
        }
    ).start()
    yield local
    local.stop()


def test_urls_behind_an_unreachable_robots_txt_wait_for_it_and_are_crawled(
    kafka_bootstrap: str, tmp_path: Path, site: LocalSite, started: list[ServiceProcess]
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    deployment.create(ALL_TOPICS)
    robots_ttl = {"STREAMCRAWL_FETCHER__ROBOTS__ERROR_TTL_S": "2"}
    started.extend(deployment.start_crawler(tmp_path / "logs", fetcher=robots_ttl))
    request = CrawlRequest(seeds=[site.url("/")], max_depth=1, politeness_delay_ms=0)
    deployment.publish_crawl(request)
    reports = TopicReader(deployment.bootstrap, deployment.topic("outcomes"))
    states = TopicReader(deployment.bootstrap, deployment.topic("crawls"))

    def kinds(messages: list[Message]) -> list[outcomes.FetchOutcome]:
        return [decode(outcomes.FetchOutcome, m.value()) for m in messages]

    def seed_postponed(messages: list[Message]) -> bool:
        return any(outcome.kind == "retryable" for outcome in kinds(messages))

    def every_url_ended(messages: list[Message]) -> bool:
        return len({o.url for o in kinds(messages) if o.kind != "retryable"}) == 4

    try:
        reports.read_until(seed_postponed, 120, "the seed postponed")
        site.routes["/robots.txt"] = ROBOTS_BACK
        states.read_until(crawl_done, 120, "the crawl done")
        reports.read_until(every_url_ended, 30, "every URL's last outcome")
    except TimeoutError:
        for process in started:
            print(process.module, process.log_tail(15))
        raise
    finally:
        states.close()
        reports.close()
    postponed = [o for o in kinds(reports.messages) if o.kind == "retryable"]
    assert {o.url for o in postponed} == {site.url("/")}, "only the seed was leased before"
    for outcome in postponed:
        assert outcome.reason == "http_status"
        assert outcome.error == "robots.txt unreachable: http_status: 503"
        assert 0 < (outcome.retry_after_ms or 0) <= 2000, "until robots.txt is asked again"
    ended = {o.url: o.kind for o in kinds(reports.messages) if o.kind != "retryable"}
    assert ended == {
        site.url("/"): "done",
        site.url("/a"): "done",
        site.url("/b"): "done",
        site.url("/private"): "robots_denied",
    }
    assert sorted(path for path in site.paths() if path != "/robots.txt") == ["/", "/a", "/b"]
