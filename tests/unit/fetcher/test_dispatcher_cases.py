"""The Dispatcher end to end against local servers, for what the fetch layer alone cannot show: a
slow host gated behind a fast one of the same partition, per-host and global concurrency limits
seen at the servers, Sitemap lines on a seed's outcome, a 304 and a refused content type producing
no page, robots.txt switched off per crawl, Retry-After and 429/503 slowing a host down at the
server, a capped body marked truncated on both messages, and an expired lease dropped."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest
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
BACKOFF_FLOOR_S = 0.2


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


class HeldSite:
    """Pages held open until the test opens the gate; the most requests ever in flight at once,
    per server port and over all, as the servers saw them."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.arrived = 0
        self.in_flight: Counter[int] = Counter()
        self.peak: Counter[int] = Counter()
        self.peak_overall = 0

    async def page(self, request: web.Request) -> web.StreamResponse:
        port = request.transport.get_extra_info("sockname")[1] if request.transport else 0
        self.arrived += 1
        self.in_flight[port] += 1
        self.peak[port] = max(self.peak[port], self.in_flight[port])
        self.peak_overall = max(self.peak_overall, self.in_flight.total())
        try:
            await self.gate.wait()
        finally:
            self.in_flight[port] -= 1
        return web.Response(text="page", content_type="text/html")


async def _fetch_held(
    site: HeldSite, servers: list[AppServer], per_server: int, politeness: PolitenessSettings
) -> None:
    """Send ``per_server`` requests to each server and hold them at the gate until every request
    the dispatcher started has reached its server (started = submitted - buffered: a request
    leaves the read-ahead when it starts; a pass starts all it may at once, and its requests
    reach a server only after it). Only then is the gate opened, so a request one over a limit
    would be in flight at the servers, not merely on its way."""
    requests = [
        _request(server, f"/{n}", n, respect_robots=False)
        for n in range(per_server)
        for server in servers
    ]
    finishes = Finishes(len(requests))
    settings = SETTINGS.model_copy(update={"politeness": politeness})
    with running(settings) as dispatcher:
        for index, request in enumerate(requests):
            dispatcher.submit(request, finishes.deferred(index), 0)

        def all_started_are_held() -> bool:
            return 0 < site.arrived == len(requests) - dispatcher.buffered

        await _until(all_started_are_held, "every started request held at its server")
        site.gate.set()
        assert await finishes.wait(), f"{len(finishes.calls)}/{len(requests)} finished"
    assert {outcome["kind"] for outcome in finishes.outcomes()} == {"done"}


async def _until(condition: Callable[[], bool], describe: str, timeout_s: float = 10.0) -> None:
    """Wait until ``condition`` holds, looking every 5 ms, failing at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, f"{describe}: not reached in {timeout_s} s"
        await asyncio.sleep(0.005)


async def test_per_host_concurrency_holds_at_the_server() -> None:
    """One host, two at a time, four in all: the global limit would let four in, so only the
    per-host limit keeps the server at two."""
    site = HeldSite()
    politeness = PolitenessSettings(per_host_concurrency=2, global_concurrency=4, latency_factor=0)
    async with app_server(_app(site.page)) as server:
        await _fetch_held(site, [server], 6, politeness)
    assert site.peak[server.port] == 2


async def test_global_concurrency_holds_across_hosts() -> None:
    """Two hosts, two at a time each, three in all: three are in flight at once, never four, and
    no host has more than two."""
    site = HeldSite()
    politeness = PolitenessSettings(per_host_concurrency=2, global_concurrency=3, latency_factor=0)
    async with app_server(_app(site.page)) as first, app_server(_app(site.page)) as second:
        await _fetch_held(site, [first, second], 4, politeness)
    assert site.peak_overall == 3
    assert max(site.peak[first.port], site.peak[second.port]) <= 2


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


async def test_an_unreachable_robots_txt_postpones_its_urls_instead_of_denying_them() -> None:
    """RFC 9309 2.3.1.4: a robots.txt answering 503 means crawl nothing of the origin for now.
    Its URLs are retried once the file is asked for again (after ``error_ttl_s``), not finished
    as robots_denied, which would drop them from the crawl for one bad answer."""
    paths: list[str] = []

    async def any_path(request: web.Request) -> web.StreamResponse:
        paths.append(request.path)
        if request.path == "/robots.txt":
            return web.Response(status=503, text="overloaded")
        return web.Response(text="page", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", any_path)
    before = REGISTRY.get_sample_value("streamcrawl_fetcher_robots_unreachable_total") or 0.0
    async with app_server(app) as server:
        finishes = await _run([_request(server, "/a", 0), _request(server, "/b", 1)])
    assert paths == ["/robots.txt"], "no page of the origin is fetched"
    error_ttl_ms = SETTINGS.robots.error_ttl_s * 1000
    for outcome in finishes.outcomes():
        assert (outcome["kind"], outcome["reason"], outcome["status"]) == (
            "retryable",
            "http_status",
            None,
        )
        assert outcome["error"] == "robots.txt unreachable: http_status: 503"
        retry_after_ms = outcome["retry_after_ms"]
        assert isinstance(retry_after_ms, int)
        assert error_ttl_ms - 60_000 < retry_after_ms <= error_ttl_ms, "when it is asked again"
    after = REGISTRY.get_sample_value("streamcrawl_fetcher_robots_unreachable_total") or 0.0
    assert after - before == 2


async def test_a_robots_txt_that_cannot_ever_be_read_fails_its_urls_for_good() -> None:
    """A host resolving to an address outside the allow-list will not be fetched however often
    it is asked: its URLs fail permanently, with the reason, and are not retried."""

    async def page(request: web.Request) -> web.StreamResponse:
        return web.Response(text="page", content_type="text/html")

    loopback_refused = SETTINGS.model_copy(update={"allowed_networks": ()})
    async with app_server(_app(page)) as server:
        finishes = await _run([_request(server, "/a", 0)], loopback_refused)
    (outcome,) = finishes.outcomes()
    assert (outcome["kind"], outcome["reason"], outcome["retry_after_ms"]) == (
        "permanent",
        "blocked_address",
        None,
    )
    assert str(outcome["error"]).startswith("robots.txt unreachable: blocked_address")


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


@pytest.mark.parametrize("status", [429, 503])
async def test_an_overloaded_answer_slows_the_host_down(status: int) -> None:
    """No Retry-After here: only the adaptive delay, doubled from backoff_floor_s on each 429 or
    503, can hold the host's next request back, measured at the server."""
    arrivals: dict[str, float] = {}
    loop = asyncio.get_running_loop()

    async def overloaded(request: web.Request) -> web.StreamResponse:
        arrivals[request.path] = loop.time()
        if request.path.startswith("/busy"):
            return web.Response(status=status)
        return web.Response(text="page", content_type="text/html")

    politeness = PolitenessSettings(latency_factor=0, backoff_floor_s=BACKOFF_FLOOR_S)
    settings = SETTINGS.model_copy(update={"politeness": politeness})
    async with app_server(_app(overloaded)) as server:
        paths = ["/busy/0", "/busy/1", "/calm"]
        finishes = await _run(
            [_request(server, path, n, respect_robots=False) for n, path in enumerate(paths)],
            settings,
        )
    kinds = {url: outcome["kind"] for url, outcome in _by_url(finishes).items()}
    assert kinds == {
        server.url("/busy/0"): "retryable",
        server.url("/busy/1"): "retryable",
        server.url("/calm"): "done",
    }
    assert arrivals["/busy/1"] - arrivals["/busy/0"] >= BACKOFF_FLOOR_S
    assert arrivals["/calm"] - arrivals["/busy/1"] >= 2 * BACKOFF_FLOOR_S, "doubled"


async def test_a_capped_body_is_marked_truncated_on_the_page_and_the_outcome() -> None:
    """What the dispatcher hands the loop to produce, decoded as the parser, storage and the
    frontier would: the cut body, and ``truncated`` on both messages (a short page beside it
    says False, so the flag is not simply always set)."""
    cap = 64 * 1024

    async def pages(request: web.Request) -> web.StreamResponse:
        size = cap * 3 if request.path == "/long" else 100
        return web.Response(body=b"x" * size, content_type="text/html")

    limits = FAST_LIMITS.model_copy(update={"max_body_bytes": cap})
    settings = SETTINGS.model_copy(update={"http": limits})
    async with app_server(_app(pages)) as server:
        finishes = await _run(
            [
                _request(server, "/long", 0, respect_robots=False),
                _request(server, "/short", 1, respect_robots=False),
            ],
            settings,
        )
    emitted = {
        page.url: (page.truncated, page.body_size, len(body))
        for page, body in (
            decode_page(output.value)
            for deferred in finishes.calls
            for output in deferred.outputs
            if output.topic == TOPICS.pages
        )
    }
    assert emitted == {
        server.url("/long"): (True, cap, cap),
        server.url("/short"): (False, 100, 100),
    }
    outcomes = _by_url(finishes)
    truncated = {url: (outcome["kind"], outcome["truncated"]) for url, outcome in outcomes.items()}
    assert truncated == {server.url("/long"): ("done", True), server.url("/short"): ("done", False)}


async def test_an_expired_lease_is_dropped_unfetched_counted_and_finished() -> None:
    """The frontier has queued it again: nothing is fetched or produced for it, yet its Deferred
    is finished (not abandoned), so the partition's offsets move past it."""
    paths: list[str] = []

    async def page(request: web.Request) -> web.StreamResponse:
        paths.append(request.path)
        return web.Response(text="page", content_type="text/html")

    finishes = Finishes(2)
    async with app_server(_app(page)) as server:
        expired_deadline = SystemClock().now_ms() - 1000
        requests = [
            _request(server, "/expired", 0, respect_robots=False, deadline=expired_deadline),
            _request(server, "/fresh", 1, respect_robots=False),
        ]
        with running() as dispatcher:
            for index, request in enumerate(requests):
                dispatcher.submit(request, finishes.deferred(index), 0)
            assert await finishes.wait(), f"{len(finishes.calls)}/2 finished"
            dropped = dispatcher.dropped_expired
    assert dropped == 1
    produced = {deferred.ticket[2]: deferred for deferred in finishes.calls}
    assert (produced[0].outputs, produced[0].abandoned) == ([], False)
    assert [outcome["url"] for outcome in finishes.outcomes()] == [server.url("/fresh")]
    assert paths == ["/fresh"]
