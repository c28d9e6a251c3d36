"""The fetcher as a process against a real broker and a local site: pages, outcomes, robots.txt,
redirects reported not followed, expired leases dropped, politeness measured at the server, and a
fetcher killed at crash points losing nothing."""

from __future__ import annotations

import itertools
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Message

from schemas import fetch, links, members, outcomes
from schemas.base import now_millis
from schemas.registry import ALL_TOPICS
from schemas.serde import decode, decode_page, encode
from streamcrawl.crashpoints import CRASH_EXIT_CODE
from tests.support import Deployment, LocalSite, ServiceProcess, TopicReader, produce_json

pytestmark = pytest.mark.kafka

DELAY_MS = 300
PAGE = b"<html><body><a href='/other'>other</a></body></html>"
HTML = {"Content-Type": "text/html; charset=utf-8"}


@pytest.fixture
def site() -> Iterator[LocalSite]:
    routes = {
        "/robots.txt": (
            200,
            {"Content-Type": "text/plain"},
            b"User-agent: *\nDisallow: /private\n",
        ),
        "/redirect": (301, {"Location": "/page-0"}, b""),
        "/private": (200, HTML, PAGE),
        "/expired": (200, HTML, PAGE),
    }
    for n in range(20):
        routes[f"/page-{n}"] = (200, HTML, PAGE + str(n).encode())
    local = LocalSite(routes).start()
    yield local
    local.stop()


@pytest.fixture
def deployment(kafka_bootstrap: str, tmp_path: Path) -> Deployment:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    deployment.create(ALL_TOPICS)
    return deployment


@pytest.fixture
def started() -> Iterator[list[ServiceProcess]]:
    processes: list[ServiceProcess] = []
    yield processes
    for process in processes:
        process.kill()


def fetcher(deployment: Deployment, started: list[ServiceProcess], **env: str) -> ServiceProcess:
    process = ServiceProcess(
        "fetcher",
        deployment.env("fetcher-a", STREAMCRAWL_FETCHER__ALLOWED_NETWORKS='["127.0.0.0/8"]', **env),
        deployment.root / "logs" / f"fetcher-{len(started)}.log",
    )
    started.append(process.start())
    return process


def request(site: LocalSite, path: str, *, deadline_ms: int | None = None) -> fetch.FetchRequest:
    return fetch.FetchRequest(
        crawl_id="c1",
        url=site.url(path),
        host=site.host,
        depth=1,
        lease_id=uuid.uuid4().hex,
        deadline=deadline_ms if deadline_ms is not None else now_millis() + 600_000,
        politeness_delay_ms=DELAY_MS,
        content_types=["text/html"],
    )


def send(deployment: Deployment, requests: list[fetch.FetchRequest]) -> None:
    produce_json(
        deployment.bootstrap,
        deployment.topic("fetch"),
        [(r.host, encode(r)) for r in requests],
        raw=True,
    )


def scrape_metrics(deployment: Deployment) -> dict[str, float]:
    """The fetcher's /metrics as ``{sample with labels: value}``, found through `members`."""
    members_reader = TopicReader(deployment.bootstrap, deployment.topic("members"))
    members_reader.read_until(
        lambda ms: any(
            m.value() and decode(members.Member, m.value()).role == "fetcher" for m in ms
        ),
        30,
        "the fetcher's member record",
    )
    member = next(
        decode(members.Member, m.value())
        for m in members_reader.messages
        if m.value() and decode(members.Member, m.value()).role == "fetcher"
    )
    members_reader.close()
    url = f"http://{member.http_address}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {
        sample: float(value)
        for line in text.splitlines()
        if line and not line.startswith("#")
        for sample, _, value in [line.rpartition(" ")]
    }


def outcomes_by_url(messages: list[Message]) -> dict[str, outcomes.FetchOutcome]:
    result = {}
    for message in messages:
        outcome = decode(outcomes.FetchOutcome, message.value())
        result[outcome.url] = outcome
    return result


def test_fetcher_produces_pages_and_outcomes_politely(
    deployment: Deployment, site: LocalSite, started: list[ServiceProcess]
) -> None:
    fetcher(deployment, started)
    wanted = [request(site, p) for p in ("/page-0", "/page-1", "/redirect", "/private")]
    expired = request(site, "/expired", deadline_ms=now_millis() - 1000)
    send(deployment, [*wanted, expired])

    out = TopicReader(deployment.bootstrap, deployment.topic("outcomes"))
    out.read_until(lambda ms: len(outcomes_by_url(ms)) >= 4, 60, "four outcomes")
    results = outcomes_by_url(out.messages)
    assert {url: o.kind for url, o in results.items()} == {
        site.url("/page-0"): "done",
        site.url("/page-1"): "done",
        site.url("/redirect"): "redirect",
        site.url("/private"): "robots_denied",
    }
    assert results[site.url("/redirect")].redirect_to == site.url("/page-0")
    assert results[site.url("/page-0")].page_sent

    pages = TopicReader(deployment.bootstrap, deployment.topic("pages"))
    pages.read_until(lambda ms: len(ms) >= 2, 30, "two pages")
    bodies = {}
    for message in pages.messages:
        page, body = decode_page(message.value())
        bodies[page.url] = body
        assert message.key() == page.url.encode()
    assert bodies == {site.url("/page-0"): PAGE + b"0", site.url("/page-1"): PAGE + b"1"}

    edges = TopicReader(deployment.bootstrap, deployment.topic("links"))
    edges.read_until(lambda ms: len(ms) >= 1, 30, "a redirect edge")
    redirect = decode(links.PageLinks, edges.messages[0].value())
    assert [(e.to_url, e.link_type) for e in redirect.edges] == [(site.url("/page-0"), "REDIRECT")]

    # The redirect was reported, not followed; robots.txt kept /private and the expired lease
    # never reached the server; every request to the host (robots.txt included) kept the delay.
    paths = site.paths()
    assert paths.count("/page-0") == 1 and "/private" not in paths and "/expired" not in paths
    assert paths[0] == "/robots.txt"
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(site.requests)]
    assert min(gaps) >= DELAY_MS / 1000 * 0.95, gaps

    # /metrics of the running fetcher counts the same: robots.txt, two pages, the redirect, the
    # denied URL; nothing in flight; no URL or host in any label.
    scraped = scrape_metrics(deployment)
    for sample, value in (
        ('streamcrawl_fetcher_requests_total{outcome="robots_txt",status_class="2xx"}', 1.0),
        ('streamcrawl_fetcher_requests_total{outcome="done",status_class="2xx"}', 2.0),
        ('streamcrawl_fetcher_requests_total{outcome="redirect",status_class="3xx"}', 1.0),
        ("streamcrawl_fetcher_robots_denied_total", 1.0),
        ("streamcrawl_fetcher_requests_in_flight", 0.0),
        ("streamcrawl_fetcher_request_duration_seconds_count", 4.0),
    ):
        assert scraped.get(sample) == value, (sample, scraped.get(sample))
    assert scraped["streamcrawl_fetcher_response_bytes_total"] >= 2 * len(PAGE)
    assert scraped["streamcrawl_fetcher_politeness_wait_seconds_count"] >= 4
    assert not [name for name in scraped if site.host in name or "127.0.0.1" in name]


@pytest.mark.parametrize("point", ["after_produce", "after_delivery", "after_offset_store"])
def test_fetcher_killed_at_a_crash_point_loses_no_request(
    deployment: Deployment, site: LocalSite, started: list[ServiceProcess], point: str
) -> None:
    first = fetcher(deployment, started, STREAMCRAWL_CRASH_AT=f"{point}:2")
    # A short delay spreads the fetches over several loop cycles, so the crash lands mid-stream.
    requests = [
        request(site, f"/page-{n}").model_copy(update={"politeness_delay_ms": 100})
        for n in range(6)
    ]
    send(deployment, requests)
    assert first.wait(60) == CRASH_EXIT_CODE, first.log_tail()
    fetcher(deployment, started)
    out = TopicReader(deployment.bootstrap, deployment.topic("outcomes"))
    wanted = {r.url for r in requests}
    out.read_until(lambda ms: set(outcomes_by_url(ms)) >= wanted, 90, "every request's outcome")
    assert all(o.kind == "done" for o in outcomes_by_url(out.messages).values())
