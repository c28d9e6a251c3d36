"""Each service's HTTP side server: /metrics for Prometheus, /healthz and /readyz for orchestrators.

It runs aiohttp on its own thread and event loop, so a busy (synchronous) service loop never delays
a scrape, and binds to the configured address (127.0.0.1 by default; port 0 picks a free port,
published to `members`). Control endpoints (the crawl API) live on a separate port, not here.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest


class SideServer:
    def __init__(
        self,
        host: str,
        port: int,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        registry: CollectorRegistry = REGISTRY,
    ) -> None:
        self._host = host
        self._port = port
        self._healthy = healthy
        self._ready = ready
        self._registry = registry
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="side")
        self.address = ""

    def start(self) -> str:
        """Start serving; returns `host:port` once the socket is bound."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        self.address = future.result(timeout=10)
        return self.address

    async def _serve(self) -> str:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._health)
        app.router.add_get("/readyz", self._readiness)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        port = sockets[0].getsockname()[1] if sockets else self._port
        return f"{self._host}:{port}"

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _health(self, request: web.Request) -> web.Response:
        ok = self._healthy()
        return web.json_response({"healthy": ok}, status=200 if ok else 503)

    async def _readiness(self, request: web.Request) -> web.Response:
        ok = self._ready()
        return web.json_response({"ready": ok}, status=200 if ok else 503)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
