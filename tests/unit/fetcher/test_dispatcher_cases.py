"""The Dispatcher end to end against local servers, for what the fetch layer alone cannot show: a
slow host gated behind a fast one of the same partition, concurrency limits seen at the servers,
Sitemap lines on a seed's outcome, a 304 and a refused content type producing no page, and
robots.txt switched off per crawl."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections import Counter
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import REGISTRY

from fetcher.politeness import PolitenessSettings
from fetcher.settings import FetcherSettings
from schemas.fetch import FetchRequest
from schemas.serde import decode_page
from streamcrawl.clock import SystemClock
from tests.unit.fetcher.conftest import FAST_LIMITS
from tests.unit.fetcher.servers import AppServer, app_server
from tests.unit.fetcher.test_dispatcher import TOPICS, Finishes, running

SETTINGS = FetcherSettings(allowed_networks=("127.0.0.0/8",), http=FAST_LIMITS)
FAST_ANSWERS = 5
ETAG = '"v1"'
LAST_MODIFIED = "Tue, 01 Dec 2026 06:00:00 GMT"


def _request(server: AppServer, path: str, index: int, **fields: object) -> FetchRequest:
    request = FetchRequest(
        crawl_id="crawl",
        url=server.url(path),
        host=f"127.0.0.1:{server.port}",
        depth=1,
        lease_id=f"{server.port}{path}#{index}",
        deadline=SystemClock().now_ms() + 600_000,
    )
    return request.model_copy(update=fields)


def _app(
    answer: Callable[[web.Request], Awaitable[web.StreamResponse]], robots: str | None = None
) -> web.Application:
    async def robots_txt(request: web.Request) -> web.StreamResponse:
        if robots is None:
            return web.Response(status=404)
        return web.Response(text=robots)

    app = web.Application()
    app.router.add_get("/robots.txt", robots_txt)
    app.router.add_get("/{tail:.*}", answer)
    return app


async def _run(requests: list[FetchRequest], settings: FetcherSettings = SETTINGS) -> Finishes:
    finishes = Finishes(len(requests))
    with running(settings) as dispatcher:
        for index, request in enumerate(requests):
            dispatcher.submit(request, finishes.deferred(index), 0)
        assert await finishes.wait(), f"{len(finishes.calls)}/{len(requests)} finished"
    return finishes


def _by_url(finishes: Finishes) -> dict[str, dict[str, object]]:
    return {str(outcome["url"]): outcome for outcome in finishes.outcomes()}


def _pages(finishes: Finishes) -> list[object]:
    return [
        output.key
        for deferred in finishes.calls
        for output in deferred.outputs
        if output.topic == TOPICS.pages
    ]


async def test_a_slow_host_waits_behind_a_fast_one_of_its_partition() -> None:
    """The slow server answers only once the fast one has answered FAST_ANSWERS pages, so the
    fetcher gets here only if the fast host's requests went out while the slow host's were held:
    a gate, not a timer. All requests come from partition 0, the slow host's first."""
    fast_answered = 0
    fast_done = asyncio.Event()

    async def fast(request: web.Request) -> web.StreamResponse:
        nonlocal fast_answered
        fast_answered += 1
        if fast_answered == FAST_ANSWERS:
            fast_done.set()
        return web.Response(text="fast", content_type="text/html")

    async def slow(request: web.Request) -> web.StreamResponse:
        await fast_done.wait()
        return web.Response(text="slow", content_type="text/html")

    async with app_server(_app(slow)) as slow_server, app_server(_app(fast)) as fast_server:
        requests = [_request(slow_server, f"/{n}", n) for n in range(2)]
        requests += [_request(fast_server, f"/{n}", n) for n in range(FAST_ANSWERS)]
        finishes = await _run(requests)
    order = [str(outcome["url"]) for outcome in finishes.outcomes()]
    assert sorted(order[:FAST_ANSWERS]) == sorted(fast_server.url(f"/{n}") for n in range(5))
    assert order[FAST_ANSWERS:] == [slow_server.url("/0"), slow_server.url("/1")]
    assert {outcome["kind"] for outcome in finishes.outcomes()} == {"done"}


async def test_per_host_and_global_concurrency_hold_at_the_servers() -> None:
    """Two hosts, two at a time each, three in all: the first three requests are held until all
    three are in, and a moment longer, so that a fourth would show; none does."""
    in_flight: Counter[int] = Counter()
    most: Counter[str] = Counter()
    wave_in = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        port = request.url.port or 0
        in_flight[port] += 1
        most[str(port)] = max(most[str(port)], in_flight[port])
        most["all"] = max(most["all"], in_flight.total())
        if in_flight.total() == 3 and not wave_in.is_set():
            await asyncio.sleep(0.2)  # room for a request the limits should have held back
            wave_in.set()
        await wave_in.wait()
        in_flight[port] -= 1
        return web.Response(text="page", content_type="text/html")

    politeness = PolitenessSettings(per_host_concurrency=2, global_concurrency=3, latency_factor=0)
    settings = SETTINGS.model_copy(update={"politeness": politeness})
    async with app_server(_app(held)) as first, app_server(_app(held)) as second:
        requests = [
            _request(server, f"/{n}", n, respect_robots=False)
            for n in range(4)
            for server in (first, second)
        ]
        finishes = await _run(requests, settings)
    assert {outcome["kind"] for outcome in finishes.outcomes()} == {"done"}
    assert most["all"] == 3
    assert max(most[str(first.port)], most[str(second.port)]) == 2


async def test_sitemap_lines_go_with_a_seeds_outcome_only() -> None:
    async def page(request: web.Request) -> web.StreamResponse:
        return web.Response(text="page", content_type="text/html")

    robots = "User-agent: *\nDisallow: /private\nSitemap: /sitemap.xml\nSitemap: /news.xml\n"
    async with app_server(_app(page, robots)) as server:
        finishes = await _run(
            [
                _request(server, "/", 0, depth=0),
                _request(server, "/a", 1),
                _request(server, "/private", 2, depth=0),
            ]
        )
    outcomes = _by_url(finishes)
    sitemaps = [server.url("/sitemap.xml"), server.url("/news.xml")]
    assert (outcomes[server.url("/")]["kind"], outcomes[server.url("/")]["sitemaps"]) == (
        "done",
        sitemaps,
    )
    assert outcomes[server.url("/a")]["sitemaps"] == []
    denied = outcomes[server.url("/private")]
    assert (denied["kind"], denied["sitemaps"]) == ("robots_denied", sitemaps)


async def test_a_304_is_an_unchanged_outcome_with_a_bodiless_revisit_page() -> None:
    seen: list[tuple[str | None, str | None]] = []

    async def conditional(request: web.Request) -> web.StreamResponse:
        seen.append(
            (request.headers.get("If-None-Match"), request.headers.get("If-Modified-Since"))
        )
        if request.headers.get("If-None-Match") == ETAG:
            return web.Response(status=304, headers={"ETag": ETAG})
        return web.Response(text="fresh", content_type="text/html", headers={"ETag": ETAG})

    async with app_server(_app(conditional)) as server:
        finishes = await _run(
            [
                _request(
                    server,
                    "/page",
                    0,
                    etag=ETAG,
                    last_modified=LAST_MODIFIED,
                    content_hash="ab" * 32,
                )
            ]
        )
    [outcome] = finishes.outcomes()
    assert (outcome["kind"], outcome["status"], outcome["page_sent"]) == ("unchanged", 304, False)
    assert (outcome["etag"], outcome["last_modified"]) == (ETAG, LAST_MODIFIED)
    assert outcome["content_hash"] == "ab" * 32
    [(page, body)] = [
        decode_page(output.value)
        for deferred in finishes.calls
        for output in deferred.outputs
        if output.topic == TOPICS.pages
    ]
    assert (page.revisit, page.status, page.sha256, body) == (True, 304, "ab" * 32, b"")
    assert seen == [(ETAG, LAST_MODIFIED)]


async def test_a_content_type_outside_the_list_is_recorded_without_reading_the_body() -> None:
    body = b"%PDF-" + bytes(1024 * 1024)

    async def pdf(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, content_type="application/pdf")

    read_before = REGISTRY.get_sample_value("streamcrawl_fetcher_response_bytes_total") or 0.0
    async with app_server(_app(pdf)) as server:
        finishes = await _run(
            [_request(server, "/paper.pdf", 0, content_types=["text/html"], respect_robots=False)]
        )
    read = (
        REGISTRY.get_sample_value("streamcrawl_fetcher_response_bytes_total") or 0.0
    ) - read_before
    [outcome] = finishes.outcomes()
    assert (outcome["kind"], outcome["status"], outcome["reason"]) == (
        "permanent",
        200,
        "content_type",
    )
    assert "application/pdf" in str(outcome["error"])
    assert _pages(finishes) == []
    assert read == 0, "the body was not read"


async def test_robots_txt_off_for_a_crawl_is_not_asked() -> None:
    paths: list[str] = []

    async def any_path(request: web.Request) -> web.StreamResponse:
        paths.append(request.path)
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /\n")
        return web.Response(text="page", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", any_path)
    async with app_server(app) as server:
        finishes = await _run([_request(server, "/a", 0, respect_robots=False)])
    assert [outcome["kind"] for outcome in finishes.outcomes()] == ["done"]
    assert paths == ["/a"], "robots.txt was never fetched"


async def test_retry_after_in_seconds_and_as_a_date_holds_the_host_back() -> None:
    """A 429's Retry-After goes on the outcome and keeps the host's next request back that long,
    measured at the server; an HTTP date counts from now."""
    arrivals: list[tuple[str, float]] = []
    loop = asyncio.get_running_loop()

    async def overloaded(request: web.Request) -> web.StreamResponse:
        arrivals.append((request.path, loop.time()))
        if request.path == "/seconds":
            return web.Response(status=429, headers={"Retry-After": "1"})
        if request.path == "/date":
            when = email.utils.formatdate(time.time() + 3, usegmt=True)
            return web.Response(status=503, headers={"Retry-After": when})
        return web.Response(text="page", content_type="text/html")

    politeness = PolitenessSettings(latency_factor=0, backoff_floor_s=0)
    settings = SETTINGS.model_copy(update={"politeness": politeness})
    async with app_server(_app(overloaded)) as first, app_server(_app(overloaded)) as second:
        finishes = await _run(
            [
                _request(first, "/seconds", 0, respect_robots=False),
                _request(first, "/after", 1, respect_robots=False),
                _request(second, "/date", 0, respect_robots=False),
            ],
            settings,
        )
    outcomes = _by_url(finishes)
    seconds, date = outcomes[first.url("/seconds")], outcomes[second.url("/date")]
    assert (seconds["kind"], seconds["retry_after_ms"]) == ("retryable", 1000)
    assert date["kind"] == "retryable"
    assert 1000 <= int(str(date["retry_after_ms"])) <= 3000, "whole seconds from now"
    times = dict(arrivals)
    assert times["/after"] - times["/seconds"] >= 1.0
