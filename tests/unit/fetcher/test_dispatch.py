"""Host queues, politeness, robots.txt and fetch together, in the shape of the service's loop.

A slow host never holds back a fast one: the slow server answers only after the fast server has
answered N times, so the test passes only if the fast host's requests go out while the slow host's
first request is still open. A robots.txt fetch spends a politeness grant like a page; a URL that
robots.txt denies gives its grant back unused.
"""

from __future__ import annotations

import asyncio
import itertools

from aiohttp import web

from fetcher.host_queues import HostQueues
from fetcher.http import fetch
from fetcher.politeness import Grant, Politeness, PolitenessSettings
from fetcher.results import FetchTarget
from fetcher.robots import RobotsCache, RobotsSettings
from schemas.fetch import FetchRequest
from streamcrawl.clock import FakeClock
from tests.unit.fetcher.conftest import FAST_LIMITS, Sessions
from tests.unit.fetcher.servers import app_server, raw_server, response_head

FAST_ANSWERS = 5
OK = response_head(headers={"Content-Length": "2", "Connection": "close"}) + b"ok"


async def test_slow_host_does_not_block_fast_host(sessions: Sessions, clock: FakeClock) -> None:
    fast_answered = 0
    fast_done = asyncio.Event()

    async def fast(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal fast_answered
        writer.write(OK)
        await writer.drain()
        fast_answered += 1
        if fast_answered == FAST_ANSWERS:
            fast_done.set()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await fast_done.wait()
        writer.write(OK)
        await writer.drain()

    session = await sessions.open()
    politeness = Politeness(PolitenessSettings(), clock)
    queues: HostQueues[FetchRequest] = HostQueues(politeness, clock)
    completed: list[str] = []

    async def run(request: FetchRequest, grant: Grant) -> None:
        result = await fetch(session, FetchTarget.from_request(request), FAST_LIMITS, clock)
        politeness.release(grant, status=result.status, retry_after_s=result.retry_after_s)
        assert result.kind == "done", result.failure
        completed.append(request.url)

    async with raw_server(slow) as slow_server, raw_server(fast) as fast_server:
        for server, count in ((slow_server, 2), (fast_server, FAST_ANSWERS)):
            for n in range(count):
                queues.push(_request(clock, server.url(f"/{n}"), f"127.0.0.1:{server.port}"))
        in_flight: set[asyncio.Task[None]] = set()
        for _ in range(100):
            while (item := queues.pop_ready()) is not None:
                in_flight.add(asyncio.ensure_future(run(*item)))
            if not in_flight:
                break
            done, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
    fast_urls = [fast_server.url(f"/{n}") for n in range(FAST_ANSWERS)]
    assert sorted(completed[:FAST_ANSWERS]) == sorted(fast_urls)
    assert completed[FAST_ANSWERS:] == [slow_server.url("/0"), slow_server.url("/1")]
    assert len(queues) == 0 and politeness.active == 0


def _request(clock: FakeClock, url: str, host: str, delay_ms: int = 0) -> FetchRequest:
    return FetchRequest(
        crawl_id="crawl",
        url=url,
        host=host,
        depth=0,
        lease_id=url,
        deadline=clock.now_ms() + 600_000,
        politeness_delay_ms=delay_ms,
    )


async def test_robots_fetch_counts_as_a_request_and_a_denied_url_does_not(
    sessions: Sessions, clock: FakeClock
) -> None:
    async def site(request: web.Request) -> web.StreamResponse:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /private\nCrawl-delay: 3\n")
        return web.Response(text="page", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", site)
    session = await sessions.open()
    politeness = Politeness(PolitenessSettings(latency_factor=0), clock)
    queues: HostQueues[FetchRequest] = HostQueues(politeness, clock)
    robots = RobotsCache.from_session(RobotsSettings(), session, FAST_LIMITS, clock)
    starts: list[tuple[str, float]] = []
    denied: list[str] = []
    async with app_server(app) as server:
        host = f"127.0.0.1:{server.port}"
        for path in ("/a", "/private", "/b"):
            queues.push(_request(clock, server.url(path), host, delay_ms=1000))
        for _ in range(20):
            next_at = queues.next_ready_at()
            if next_at is None:
                break
            clock.advance(max(next_at - clock.monotonic(), 0.0))
            item = queues.pop_ready()
            assert item is not None
            request, grant = item
            rules = robots.cached(request.url)
            if rules is None:
                rules = await robots.fetch_rules(request.url)
                politeness.release(grant, status=rules.status)
                politeness.set_robots_delay(host, rules.crawl_delay_s)
                queues.requeue(request)
                starts.append(("robots", grant.started_at))
            elif not rules.allows(request.url):
                politeness.cancel(grant)
                denied.append(request.url)
            else:
                result = await fetch(session, FetchTarget.from_request(request), FAST_LIMITS, clock)
                politeness.release(grant, status=result.status)
                starts.append((request.url, grant.started_at))
    assert [what for what, _ in starts] == ["robots", server.url("/a"), server.url("/b")]
    assert denied == [server.url("/private")]
    times = [1000.0] + [started for _, started in starts]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert gaps[0] >= 1.0, "a new host waits one delay before its first request, robots.txt too"
    assert all(gap >= 3.0 for gap in gaps[1:]), "Crawl-delay 3 applies from the robots.txt fetch"
