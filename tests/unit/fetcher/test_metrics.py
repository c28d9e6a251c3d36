"""The fetcher's metrics, read back from the default registry (what /metrics serves) after the
Dispatcher fetched from a local site: each kind of request counted once under its status class and
outcome, robots.txt included, and nothing labelled with a URL or a host."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from fetcher import metrics
from fetcher.http import fetch, open_session
from fetcher.proxy import ProxySettings
from fetcher.results import FetchTarget
from fetcher.settings import FetcherSettings
from schemas.fetch import FetchRequest
from streamcrawl.clock import FakeClock, SystemClock
from tests.unit.fetcher.conftest import FAST_LIMITS, LOOPBACK
from tests.unit.fetcher.servers import AppServer, app_server, raw_server, response_head
from tests.unit.fetcher.test_dispatcher import Finishes, running

SETTINGS = FetcherSettings(allowed_networks=("127.0.0.0/8",), http=FAST_LIMITS)
PAGE = b"<p>a page of forty bytes, give or take</p>"
NAMES = (
    "streamcrawl_fetcher_requests_total",
    "streamcrawl_fetcher_request_duration_seconds_count",
    "streamcrawl_fetcher_request_duration_seconds_sum",
    "streamcrawl_fetcher_response_bytes_total",
    "streamcrawl_fetcher_robots_denied_total",
    "streamcrawl_fetcher_robots_unreachable_total",
    "streamcrawl_fetcher_blocked_addresses_total",
    "streamcrawl_fetcher_proxy_errors_total",
    "streamcrawl_fetcher_leases_expired_total",
    "streamcrawl_fetcher_requests_in_flight",
    "streamcrawl_fetcher_cookie_jars",
    "streamcrawl_fetcher_politeness_wait_seconds_count",
)


def _site() -> web.Application:
    async def answer(request: web.Request) -> web.StreamResponse:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /private\n")
        if request.path == "/missing":
            return web.Response(status=404, text="no")
        if request.path == "/moved":
            raise web.HTTPFound("/page")
        return web.Response(body=PAGE, content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    return app


def _request(url: str, host: str, index: int, *, robots: bool = True) -> FetchRequest:
    return FetchRequest(
        crawl_id="metrics",
        url=url,
        host=host,
        depth=1,
        lease_id=f"lease-{index}",
        deadline=SystemClock().now_ms() + 600_000,
        respect_robots=robots,
    )


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _snapshot() -> dict[str, float]:
    values = {name: _sample(name) for name in NAMES if not name.endswith("requests_total")}
    for status_class, outcome in (
        ("2xx", "done"),
        ("4xx", "permanent"),
        ("3xx", "redirect"),
        ("2xx", "robots_txt"),
        ("none", "permanent"),
    ):
        values[f"{status_class}/{outcome}"] = _sample(
            "streamcrawl_fetcher_requests_total", status_class=status_class, outcome=outcome
        )
    return values


async def _crawl(server: AppServer) -> None:
    host = f"127.0.0.1:{server.port}"
    requests = [
        _request(server.url(path), host, index)
        for index, path in enumerate(["/page", "/missing", "/moved", "/private"])
    ]
    # 10.0.0.0/8 is not allowed here: refused at connect time, nothing is sent.
    requests.append(_request("http://10.1.2.3:9/x", "10.1.2.3:9", 9, robots=False))
    finishes = Finishes(len(requests))
    with running(SETTINGS) as dispatcher:
        for index, request in enumerate(requests):
            dispatcher.submit(request, finishes.deferred(index), 0)
        assert await finishes.wait(), f"{len(finishes.calls)}/{len(requests)} finished"


async def test_each_request_is_counted_once_under_its_status_class_and_outcome() -> None:
    before = _snapshot()
    async with app_server(_site()) as server:
        await _crawl(server)
    after = _snapshot()
    grew = {name: after[name] - before[name] for name in after}
    assert grew["2xx/done"] == 1
    assert grew["4xx/permanent"] == 1
    assert grew["3xx/redirect"] == 1
    assert grew["2xx/robots_txt"] == 1, "robots.txt is fetched once and counts as a request"
    assert grew["none/permanent"] == 1, "the blocked address"
    assert grew["streamcrawl_fetcher_robots_denied_total"] == 1
    assert grew["streamcrawl_fetcher_blocked_addresses_total"] == 1
    assert grew["streamcrawl_fetcher_request_duration_seconds_count"] == 5
    assert grew["streamcrawl_fetcher_request_duration_seconds_sum"] > 0
    assert grew["streamcrawl_fetcher_response_bytes_total"] >= len(PAGE) + len("no")
    # One wait per grant: robots.txt's (the first page's), then each of the five requests.
    assert grew["streamcrawl_fetcher_politeness_wait_seconds_count"] == 6
    assert after["streamcrawl_fetcher_requests_in_flight"] == 0


async def test_metrics_are_served_without_url_or_host_labels() -> None:
    async with app_server(_site()) as server:
        await _crawl(server)
    exposition = generate_latest(REGISTRY).decode()
    for name in NAMES:
        assert f"\n{name}" in exposition, name
    for family in REGISTRY.collect():
        if not family.name.startswith("streamcrawl_fetcher_"):
            continue
        for sample in family.samples:
            assert set(sample.labels) <= {"status_class", "outcome", "le"}, sample
            assert not any("127.0.0.1" in value for value in sample.labels.values()), sample


def test_status_classes() -> None:
    assert [metrics.status_class(status) for status in (None, 101, 200, 304, 429, 503, 600)] == [
        "none",
        "none",
        "2xx",
        "3xx",
        "4xx",
        "5xx",
        "none",
    ]


async def test_a_fetch_under_way_is_in_flight_until_it_ends() -> None:
    answer = asyncio.Event()

    async def stalling(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer.wait()
        writer.write(response_head(headers={"Content-Length": "2"}) + b"ok")
        await writer.drain()

    in_flight = "streamcrawl_fetcher_requests_in_flight"
    before = _sample(in_flight)
    async with raw_server(stalling) as server, open_session(FAST_LIMITS, LOOPBACK) as session:
        fetching = fetch(session, FetchTarget(server.url()), FAST_LIMITS, FakeClock())
        task = asyncio.create_task(metrics.counted(fetching))
        async with asyncio.timeout(5):
            while not server.requests:
                await asyncio.sleep(0.01)
        assert _sample(in_flight) == before + 1
        answer.set()
        assert (await task).kind == "done"
    assert _sample(in_flight) == before


def test_a_loop_histogram_exports_what_a_prometheus_histogram_would() -> None:
    """The lock-free histogram against prometheus_client's own, fed the same values (bounds
    themselves included: ``le`` is less or equal), read back through a registry each."""
    bounds = (0.005, 0.01, 0.1, 1, 2.5, 90)
    values = [0.0, 0.005, 0.0050001, 0.01, 0.07, 1.0, 1.5, 2.5, 89.9, 90.0, 90.5, 1e9]
    ours = metrics.LoopHistogram("streamcrawl_fetcher_test_seconds", "test", bounds)
    theirs_registry = CollectorRegistry()
    theirs = Histogram(
        "streamcrawl_fetcher_test_seconds", "test", buckets=bounds, registry=theirs_registry
    )
    for value in values:
        ours.observe(value)
        theirs.observe(value)

    class One(Collector):
        def collect(self) -> Iterator[Metric]:
            yield ours.family()

    ours_registry = CollectorRegistry()
    ours_registry.register(One())

    def samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
        return {
            (sample.name, sample.labels.get("le", "")): sample.value
            for family in registry.collect()
            for sample in family.samples
            if not sample.name.endswith("_created")
        }

    assert samples(ours_registry) == samples(theirs_registry)
    assert samples(ours_registry)[("streamcrawl_fetcher_test_seconds_bucket", "+Inf")] == 12


async def test_a_fetch_failing_at_the_proxy_counts_as_a_proxy_error() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = unused.getsockname()[1]
    settings = SETTINGS.model_copy(
        update={"proxy": ProxySettings(url=f"http://127.0.0.1:{closed}")}
    )
    before = _sample("streamcrawl_fetcher_proxy_errors_total")
    finishes = Finishes(1)
    with running(settings) as dispatcher:
        request = _request("http://93.184.215.14/page", "93.184.215.14", 1, robots=False)
        dispatcher.submit(request, finishes.deferred(0), 0)
        assert await finishes.wait(), "the fetch finished"
    assert _sample("streamcrawl_fetcher_proxy_errors_total") - before == 1
