"""An aiohttp application served on its own thread and event loop, so the synchronous service loop
never delays a request and a request never delays the loop (the frontier's crawl API does the
same; a shared kernel helper would serve both)."""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web


class ApiServer:
    def __init__(self, app: web.Application, host: str, port: int) -> None:
        self._app = app
        self._host = host
        self._port = port
        self.loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="graph-api")

    def start(self) -> str:
        """Serve; returns `host:port` once bound, raises OSError when the address is taken."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        return future.result(timeout=10)

    async def _serve(self) -> str:
        self._runner = web.AppRunner(self._app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        port = self._runner.addresses[0][1] if self._runner.addresses else self._port
        return f"{self._host}:{port}"

    def stop(self) -> None:
        if self._runner is not None:
            cleanup = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop)
            cleanup.result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
