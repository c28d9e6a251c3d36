"""Serving a generated site on 127.0.0.1, one port per host, recording every request it answers.

:class:`SiteServer` runs the hosts' aiohttp apps on one background thread (an event loop of its
own), so a test or the demo keeps its main thread. Each request is logged with the monotonic time
it arrived, so a test can measure the smallest gap between two requests to one host at the server.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TextIO

from aiohttp import web

from streamcrawl.testsite.graph import DISALLOWED, Address, SiteGraph
from streamcrawl.testsite.pages import BoundSite
from streamcrawl.testsite.reference import status_of


@dataclass(frozen=True, slots=True)
class ServedRequest:
    at: float
    """``time.monotonic()`` when the request arrived."""
    host: int
    path_qs: str
    status: int


class RequestRecord:
    """What a served site saw; subclasses say where the requests are kept."""

    graph: SiteGraph

    @property
    def site(self) -> BoundSite:
        raise NotImplementedError

    def snapshot(self) -> list[ServedRequest]:
        raise NotImplementedError

    def page_requests(self) -> list[tuple[str, ServedRequest]]:
        """Every request but robots.txt, as (URL, request)."""
        site = self.site
        return [
            (site.origin(r.host) + r.path_qs, r)
            for r in self.snapshot()
            if r.path_qs != "/robots.txt"
        ]

    def smallest_gap_s(self) -> dict[int, float]:
        """Per host, the smallest time between two consecutive requests (robots.txt included)."""
        by_host: dict[int, list[float]] = {}
        for request in self.snapshot():
            by_host.setdefault(request.host, []).append(request.at)
        gaps = {}
        for host, times in by_host.items():
            times.sort()
            if len(times) > 1:
                gaps[host] = min(b - a for a, b in itertools.pairwise(times))
        return gaps


class SiteServer(RequestRecord):
    """The site's hosts, served from one background thread; use as a context manager.

    With ``request_log``, every request is also written there as a line as it arrives
    (``at host status path``), for a reader in another process.
    """

    def __init__(
        self, graph: SiteGraph, request_log: TextIO | None = None, prerender: bool = False
    ) -> None:
        self.graph = graph
        self.requests: list[ServedRequest] = []
        self._request_log = request_log
        self._prerender = prerender
        self._rendered: dict[Address, bytes] = {}
        """With ``prerender``, every page's HTML, made before the first request (benchmarks)."""
        self._site: BoundSite | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="site")
        self._runners: list[web.AppRunner] = []
        self._lock = threading.Lock()

    @property
    def site(self) -> BoundSite:
        if self._site is None:
            raise RuntimeError("the site server is not started")
        return self._site

    def start(self) -> SiteServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=30)
        return self

    def __enter__(self) -> SiteServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self) -> None:
        ports = []
        for host in range(self.graph.hosts):
            app = web.Application()
            app.router.add_get("/{tail:.*}", self._handler(host))
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            self._runners.append(runner)
            ports.append(int(runner.addresses[0][1]))
        self._site = BoundSite(self.graph, ports)
        if self._prerender:
            for address in self.graph.pages:
                if self._site.is_document(address):
                    self._rendered[address] = self._site.render_html(address).encode()

    def _handler(self, host: int) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def answer(request: web.Request) -> web.StreamResponse:
            at = time.monotonic()
            response = self.response(host, request.path)
            served = ServedRequest(at, host, request.path_qs, response.status)
            with self._lock:
                self.requests.append(served)
            if self._request_log is not None:
                self._request_log.write(f"{at:.6f} {host} {served.status} {served.path_qs}\n")
            return response

        return answer

    def response(self, host: int, path: str) -> web.Response:
        site = self.site
        if path == "/robots.txt":
            prefix = DISALLOWED.get(host)
            if prefix is None:
                return web.Response(status=404, text="no robots.txt here")
            return web.Response(text=f"User-agent: *\nDisallow: {prefix}\n")
        address = Address(host, path)
        status = status_of(site, address)
        if status == 200:
            body = self._rendered.get(address) or site.render_html(address).encode()
            return web.Response(body=body, content_type="text/html", charset="utf-8")
        page = site.graph.page(address)
        if status == 301 and page is not None and page.redirect_to is not None:
            target = page.redirect_to
            location = target.path if target.host == host else site.url(target)
            return web.Response(status=301, headers={"Location": location})
        return web.Response(status=status, text=f"status {status}")

    def stop(self) -> None:
        for runner in self._runners:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), self._loop).result(timeout=10)
        self._runners.clear()
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def snapshot(self) -> list[ServedRequest]:
        with self._lock:
            return list(self.requests)


def parse_request_line(line: str) -> ServedRequest:
    at, host, status, path_qs = line.rstrip("\n").split(" ", 3)
    return ServedRequest(float(at), int(host), path_qs, int(status))
