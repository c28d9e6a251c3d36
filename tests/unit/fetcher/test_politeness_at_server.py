"""Politeness as the server sees it, through the Dispatcher on its own thread: the smallest gap
between two requests to one host at the server is at least the delay, next to redirects, across a
robots.txt that redirects, and when the server is slow to take a request in; a partition given
back and gained again waits a delay before its first request to each host."""

from __future__ import annotations

import asyncio
import time
from itertools import pairwise

from aiohttp import web

from tests.unit.fetcher.servers import app_server
from tests.unit.fetcher.test_dispatcher import Finishes, request_for, running

DELAY_MS = 100
INTAKE_LAG_S = 0.06
"""How long the server takes to note some requests after they reach it: more than the send
margin (5 ms), so a gap counted from the send alone comes out about this much short."""


class NotingSite:
    """Redirecting pages behind a robots.txt that redirects twice; every request's arrival noted
    (``time.monotonic()``, as the e2e site does), the redirecting ones only after a lag."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, str]] = []

    def _note(self, request: web.Request) -> None:
        self.arrivals.append((time.monotonic(), request.path))

    async def robots(self, request: web.Request) -> web.StreamResponse:
        self._note(request)
        hops = {"/robots.txt": "/robots-moved.txt", "/robots-moved.txt": "/robots-final.txt"}
        if request.path in hops:
            return web.Response(status=301, headers={"Location": hops[request.path]})
        return web.Response(text="User-agent: *\nDisallow: /private\n")

    async def page(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/moved"):
            await asyncio.sleep(INTAKE_LAG_S)  # the server is slow to take this one in
            self._note(request)
            target = request.path.replace("/moved", "/page")
            return web.Response(status=301, headers={"Location": target})
        self._note(request)
        return web.Response(text="<p>page</p>", content_type="text/html")

    def app(self) -> web.Application:
        app = web.Application()
        for path in ("/robots.txt", "/robots-moved.txt", "/robots-final.txt"):
            app.router.add_get(path, self.robots)
        app.router.add_get("/{tail:.*}", self.page)
        return app

    def gaps_s(self) -> list[float]:
        times = sorted(at for at, _ in self.arrivals)
        return [later - earlier for earlier, later in pairwise(times)]


async def test_the_smallest_gap_at_the_server_is_the_delay_next_to_redirects() -> None:
    site = NotingSite()
    paths = [path for index in range(4) for path in (f"/moved/{index}", f"/page/{index}")]
    finishes = Finishes(len(paths))
    async with app_server(site.app()) as server:
        with running() as dispatcher:
            for index, path in enumerate(paths):
                dispatcher.submit(
                    request_for(server, path, delay_ms=DELAY_MS), finishes.deferred(index), 0
                )
            assert await finishes.wait(), f"{len(finishes.calls)}/{len(paths)} finished"
    kinds = sorted(str(outcome["kind"]) for outcome in finishes.outcomes())
    assert kinds == ["done"] * 4 + ["redirect"] * 4
    noted = [path for _, path in site.arrivals]
    assert noted[:3] == ["/robots.txt", "/robots-moved.txt", "/robots-final.txt"]
    assert len(noted) == 3 + len(paths)
    assert min(site.gaps_s()) >= DELAY_MS / 1000, sorted(site.gaps_s())[:3]


async def test_a_partition_gained_again_waits_a_delay_before_its_first_request() -> None:
    """Another fetcher may have fetched from the host while the partition was away: the host's
    old slot is forgotten with the partition, not only when requests of it were queued."""
    site = NotingSite()
    first, second = Finishes(1), Finishes(1)
    async with app_server(site.app()) as server:
        with running() as dispatcher:
            dispatcher.submit(
                request_for(server, "/page/a", delay_ms=DELAY_MS), first.deferred(0), 0
            )
            assert await first.wait()
            dispatcher.revoke({0})
            # Let our own last request lie more than a delay back, as it would after a while
            # away; only the new ownership can then hold the next request back.
            await asyncio.sleep(2 * DELAY_MS / 1000)
            regained_at = time.monotonic()
            dispatcher.submit(
                request_for(server, "/page/b", delay_ms=DELAY_MS), second.deferred(0), 0
            )
            assert await second.wait()
    [arrived_at] = [at for at, path in site.arrivals if path == "/page/b"]
    assert arrived_at - regained_at >= DELAY_MS / 1000
