"""The fetcher as a process against a real broker and a local site: pages, outcomes, robots.txt,
redirects reported not followed, expired leases dropped, politeness measured at the server, and a
fetcher killed at crash points losing nothing."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from confluent_kafka import Consumer, Message, TopicPartition

from schemas import crawls, fetch, links, members, outcomes
from schemas.base import now_millis
from schemas.crawls import StoredCrawlRequest
from schemas.partitioning import partition_for_key
from schemas.registry import ALL_TOPICS
from schemas.serde import decode, decode_page, encode
from streamcrawl.crashpoints import CRASH_EXIT_CODE
from tests.support import (
    Deployment,
    LocalSite,
    ServiceProcess,
    TopicReader,
    produce_json,
    wait_for,
)

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


def fetcher(
    deployment: Deployment, started: list[ServiceProcess], instance: str = "fetcher-a", **env: str
) -> ServiceProcess:
    process = ServiceProcess(
        "fetcher",
        deployment.env(instance, STREAMCRAWL_FETCHER__ALLOWED_NETWORKS='["127.0.0.0/8"]', **env),
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
    return scrape(fetcher_metrics_url(deployment))


def scrape(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {
        sample: float(value)
        for line in text.splitlines()
        if line and not line.startswith("#")
        for sample, _, value in [line.rpartition(" ")]
    }


def fetcher_metrics_url(deployment: Deployment) -> str:
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
    return f"http://{member.http_address}/metrics"


def fetch_topic(deployment: Deployment) -> str:
    return deployment.topic("fetch")


def read_to_the_end(deployment: Deployment, suffix: str) -> list[Message]:
    """Every message the topic holds now: read until each partition's high watermark."""
    topic = deployment.topic(suffix)
    ends = high_watermarks(deployment, topic)
    reader = TopicReader(deployment.bootstrap, topic)

    def at_the_end(messages: list[Message]) -> bool:
        seen = {(message.partition(), message.offset()) for message in messages}
        return all(end == 0 or (partition, end - 1) in seen for partition, end in ends.items())

    try:
        return reader.read_until(at_the_end, 30, "the topic's end")
    finally:
        reader.close()


def high_watermarks(deployment: Deployment, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": deployment.bootstrap, "group.id": "watermarks"})
    try:
        ends = {}
        for partition in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
            _, ends[partition] = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=10
            )
        return ends
    finally:
        consumer.close()


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
    # One host's requests are served in the order sent, one at a time and a delay apart: had the
    # expired lease been fetched, its outcome would come before this one's on the host's
    # partition of `outcomes`.
    last = request(site, "/page-2")
    send(deployment, [*wanted, expired, last])

    out = TopicReader(deployment.bootstrap, deployment.topic("outcomes"))
    out.read_until(lambda ms: last.url in outcomes_by_url(ms), 60, "the last request's outcome")
    results = outcomes_by_url(out.messages)
    assert {url: o.kind for url, o in results.items()} == {
        site.url("/page-0"): "done",
        site.url("/page-1"): "done",
        site.url("/page-2"): "done",
        site.url("/redirect"): "redirect",
        site.url("/private"): "robots_denied",
    }
    assert results[site.url("/redirect")].redirect_to == site.url("/page-0")
    assert results[site.url("/page-0")].page_sent

    # The expired lease was dropped, not left pending: its offset is committed like the others'
    # (and only after every output was delivered, so the topics now hold everything produced).
    wait_for(
        lambda: committed_to_the_end(
            deployment, deployment.topic("fetcher"), fetch_topic(deployment)
        ),
        60,
        "every fetch request committed",
    )
    bodies = {}
    for message in read_to_the_end(deployment, "pages"):
        page, body = decode_page(message.value())
        bodies[page.url] = body
        assert message.key() == page.url.encode()
    assert bodies == {site.url(f"/page-{n}"): PAGE + str(n).encode() for n in range(3)}
    assert set(outcomes_by_url(read_to_the_end(deployment, "outcomes"))) == set(results)

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
    assert min(gaps) >= DELAY_MS / 1000, gaps

    # /metrics of the running fetcher counts the same: robots.txt, three pages, the redirect, the
    # denied URL; all six requests read, five outcomes written (none for the expired lease);
    # nothing in flight; no URL or host in any label.
    scraped = scrape_metrics(deployment)
    for sample, value in (
        ('streamcrawl_fetcher_requests_total{outcome="robots_txt",status_class="2xx"}', 1.0),
        ('streamcrawl_fetcher_requests_total{outcome="done",status_class="2xx"}', 3.0),
        ('streamcrawl_fetcher_requests_total{outcome="redirect",status_class="3xx"}', 1.0),
        ("streamcrawl_fetcher_robots_denied_total", 1.0),
        ("streamcrawl_fetcher_leases_expired_total", 1.0),
        ("streamcrawl_fetcher_requests_in_flight", 0.0),
        ("streamcrawl_fetcher_request_duration_seconds_count", 5.0),
        (f'streamcrawl_fetcher_messages_in_total{{topic="{fetch_topic(deployment)}"}}', 6.0),
        (
            f'streamcrawl_fetcher_messages_out_total{{topic="{deployment.topic("outcomes")}"}}',
            5.0,
        ),
    ):
        assert scraped.get(sample) == value, (sample, scraped.get(sample))
    assert scraped["streamcrawl_fetcher_response_bytes_total"] >= 3 * len(PAGE)
    assert scraped["streamcrawl_fetcher_politeness_wait_seconds_count"] >= 5
    assert not [name for name in scraped if site.host in name or "127.0.0.1" in name]


@pytest.mark.parametrize("status", ["paused", "cancelled"])
def test_a_stopped_crawls_delay_stops_holding_back_the_host(
    deployment: Deployment, site: LocalSite, started: list[ServiceProcess], status: str
) -> None:
    """A slow crawl's 30 s delay holds the host while the crawl may send more; once `crawls`
    says it is paused or cancelled, its waiting request and a fast crawl's go at once, not 30 s
    after the host's last request (the 10 minutes a crawl's delay otherwise outlives its last
    request)."""
    fetcher(deployment, started)

    def of_crawl(crawl_id: str, path: str, delay_ms: int) -> fetch.FetchRequest:
        return request(site, path).model_copy(
            update={"crawl_id": crawl_id, "politeness_delay_ms": delay_ms}
        )

    out = TopicReader(deployment.bootstrap, deployment.topic("outcomes"))
    first = of_crawl("fast", "/page-0", 0)
    send(deployment, [first])
    out.read_until(lambda ms: first.url in outcomes_by_url(ms), 60, "the fast crawl's first page")
    slow, second = of_crawl("slow", "/page-1", 30_000), of_crawl("fast", "/page-2", 0)
    send(deployment, [slow, second])
    read = f'streamcrawl_fetcher_messages_in_total{{topic="{fetch_topic(deployment)}"}}'
    wait_for(lambda: scrape_metrics(deployment).get(read) == 3, 30, "both requests read")
    assert slow.url not in outcomes_by_url(out.read_until(lambda ms: True, 1))  # held back

    stopped = crawls.CrawlState(
        crawl_id="slow",
        request=StoredCrawlRequest(seeds=[site.url("/")], crawl_id="slow"),
        status=status,
        created_at=now_millis(),
        updated_at=now_millis(),
        owner_partition=0,
    )
    produce_json(
        deployment.bootstrap, deployment.topic("crawls"), [("slow", encode(stopped))], raw=True
    )
    out.read_until(
        lambda ms: {slow.url, second.url} <= set(outcomes_by_url(ms)),
        15,
        "both outcomes well before the slow crawl's 30 s",
    )
    out.close()


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
    results = outcomes_by_url(out.messages)
    assert all(o.kind == "done" for o in results.values())
    # A done outcome promises its page: once every request is committed (after delivery), the
    # page of each lease is on `pages`, whichever fetcher wrote it.
    wait_for(
        lambda: committed_to_the_end(
            deployment, deployment.topic("fetcher"), fetch_topic(deployment)
        ),
        60,
        "every fetch request committed",
    )
    pages = {}
    for message in read_to_the_end(deployment, "pages"):
        page, body = decode_page(message.value())
        pages[(page.url, page.lease_id)] = body
    for n, sent in enumerate(requests):
        assert results[sent.url].lease_id == sent.lease_id
        assert pages.get((sent.url, sent.lease_id)) == PAGE + str(n).encode(), sent.url


class GatedSite:
    """One host whose pages all wait for the test to open a gate, so the first request stays in
    flight and every later one stays in the fetcher's read-ahead buffer; counts what it served."""

    def __init__(self) -> None:
        self.served = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._gate = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.host = ""

    def __enter__(self) -> GatedSite:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.open()
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._answer)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.host = f"127.0.0.1:{self._runner.addresses[0][1]}"

    async def _answer(self, request: web.Request) -> web.Response:
        await self._gate.wait()
        self.served += 1
        return web.Response(body=PAGE, headers=HTML)

    def open(self) -> None:
        self._loop.call_soon_threadsafe(self._gate.set)


READ_AHEAD = 20
BATCH = 5


def wait_for_heartbeats(deployment: Deployment, after_ms: int, count: int) -> None:
    """Return once the fetcher published ``count`` member records stamped after ``after_ms``:
    its service loop republishes the record every heartbeat (`streamcrawl.membership`, 5 s)."""

    def beats(messages: list[Message]) -> int:
        records = [decode(members.Member, m.value()) for m in messages if m.value()]
        return sum(1 for r in records if r.role == "fetcher" and r.updated_at > after_ms)

    reader = TopicReader(deployment.bootstrap, deployment.topic("members"))
    try:
        reader.read_until(lambda ms: beats(ms) >= count, 60, f"{count} heartbeats")
    finally:
        reader.close()


def test_a_full_read_ahead_pauses_the_partition_and_a_drained_one_resumes_it(
    deployment: Deployment, started: list[ServiceProcess]
) -> None:
    """The kernel's own bound (500 uncommitted per partition) would take all 200 requests."""
    with GatedSite() as gated:
        fetcher(
            deployment,
            started,
            STREAMCRAWL_FETCHER__READ_AHEAD=str(READ_AHEAD),
            STREAMCRAWL_LOOP__BATCH_SIZE=str(BATCH),
            # The first request is held for seconds; its latency must not slow the drain.
            STREAMCRAWL_FETCHER__POLITENESS__LATENCY_FACTOR="0",
        )
        requests = [
            fetch.FetchRequest(
                crawl_id="c1",
                url=f"http://{gated.host}/page-{n}",
                host=gated.host,
                depth=1,
                lease_id=uuid.uuid4().hex,
                deadline=now_millis() + 600_000,
                respect_robots=False,
            )
            for n in range(200)
        ]
        send(deployment, requests)
        url = fetcher_metrics_url(deployment)
        consumed_sample = (
            f'streamcrawl_fetcher_messages_in_total{{topic="{deployment.topic("fetch")}"}}'
        )

        def consumed() -> float:
            return scrape(url).get(consumed_sample, 0.0)

        wait_for(lambda: consumed() >= READ_AHEAD, 60, "the read-ahead filled")
        # Absence is shown by the loop's own activity rather than a guess at how long that takes:
        # its service loop republishes the fetcher's member record every few seconds, so after
        # two more it has polled again and again with the other 175-odd requests in reach. An
        # unpaused partition hands them over at once (it did, before the kernel asked).
        wait_for_heartbeats(deployment, now_millis(), 2)
        held = consumed()
        # One in flight, the buffer, and at most one poll's batch taken as it filled.
        assert READ_AHEAD <= held <= 1 + READ_AHEAD + BATCH, held
        gated.open()
        out = TopicReader(deployment.bootstrap, deployment.topic("outcomes"))
        wanted = {r.url for r in requests}
        out.read_until(lambda ms: set(outcomes_by_url(ms)) >= wanted, 90, "every outcome")
        assert gated.served == len(requests)
        assert consumed() == len(requests)


def sites_on_both_partitions(count: int, delay_s: float) -> list[LocalSite]:
    """``count`` slow sites whose hosts land on different partitions of two."""
    sites: list[LocalSite] = []
    routes = {f"/page-{n}": (200, HTML, PAGE + str(n).encode()) for n in range(count * 4)}
    while len(sites) < count:
        candidate = LocalSite(routes, delay_s=delay_s).start()
        taken = {partition_for_key(s.host.encode(), 2) for s in sites}
        if partition_for_key(candidate.host.encode(), 2) in taken:
            candidate.stop()
        else:
            sites.append(candidate)
    return sites


def committed_to_the_end(deployment: Deployment, group: str, topic: str) -> bool:
    consumer = Consumer({"bootstrap.servers": deployment.bootstrap, "group.id": group})
    try:
        partitions = [TopicPartition(topic, p) for p in range(2)]
        committed = consumer.committed(partitions, timeout=10)
        ends = [consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions]
        # A partition that never held a message has nothing to commit.
        return all(end in (tp.offset, 0) for tp, end in zip(committed, ends, strict=True))
    finally:
        consumer.close()


def test_a_partition_moving_to_a_new_fetcher_does_not_fetch_its_pages_again(
    deployment: Deployment, started: list[ServiceProcess]
) -> None:
    """A second fetcher joins while the first has fetches in flight to both hosts (each answers
    after 3 s): before the partition that moves goes, its fetches in flight finish and are
    delivered and committed, and its queued requests go to the new owner. No page twice. (The
    revoke wait is raised from 5 s so that a loaded machine cannot run it out.)"""
    sites = sites_on_both_partitions(2, delay_s=3.0)
    wait = {"STREAMCRAWL_LOOP__REVOKE_WAIT_S": "30"}
    try:
        fetcher(deployment, started, "fetcher-a", **wait)
        requests = [
            request(site, f"/page-{n}").model_copy(update={"politeness_delay_ms": 0})
            for site in sites
            for n in range(4)
        ]
        send(deployment, requests)
        deadline = time.monotonic() + 60
        while not all(any(p.startswith("/page-") for p in site.paths()) for site in sites):
            assert time.monotonic() < deadline, "the first fetcher never started fetching"
            time.sleep(0.05)
        fetcher(deployment, started, "fetcher-b", **wait)

        out = TopicReader(deployment.bootstrap, deployment.topic("outcomes"))
        out.read_until(lambda ms: len(outcomes_by_url(ms)) == 8, 120, "eight outcomes")
        fetch_topic = deployment.topic("fetch")
        deadline = time.monotonic() + 60
        while not committed_to_the_end(deployment, deployment.topic("fetcher"), fetch_topic):
            assert time.monotonic() < deadline, "the fetch requests were never all committed"
            time.sleep(0.2)
        holding = TopicReader(deployment.bootstrap, deployment.topic("members"))
        holding.read_until(
            lambda ms: (
                {
                    decode(members.Member, m.value()).instance
                    for m in ms
                    if m.value() and decode(members.Member, m.value()).partitions
                }
                >= {"fetcher-a", "fetcher-b"}
            ),
            30,
            "both fetchers holding a partition",
        )
        for site in sites:
            fetched = Counter(path for path in site.paths() if path.startswith("/page-"))
            assert fetched == {f"/page-{n}": 1 for n in range(4)}, (site.host, fetched)
        out.poll()
        assert len(out.messages) == 8, "one outcome per request"
    finally:
        for site in sites:
            site.stop()
