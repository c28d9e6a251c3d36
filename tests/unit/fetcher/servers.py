"""Local hostile servers for fetcher tests: raw asyncio sockets and small aiohttp apps.

Every server binds 127.0.0.1 on a free port and stops by itself when its ``async with`` ends:
open connections are closed and handler tasks cancelled, so a handler parked on an Event that
never fires does not outlive its test.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

RawHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

_HEADER_END = b"\r\n\r\n"
_MAX_REQUEST_HEAD = 64 * 1024


@dataclass
class RawServer:
    """A TCP server whose handler writes whatever bytes a test scripts."""

    port: int
    requests: list[bytes] = field(default_factory=list)
    """The request heads received, in order."""
    connections: int = 0

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@contextlib.asynccontextmanager
async def raw_server(handler: RawHandler) -> AsyncIterator[RawServer]:
    """Serve ``handler`` after reading each request head (kept in ``server.requests``)."""
    state = RawServer(port=0)
    tasks: set[asyncio.Task[None]] = set()
    writers: set[asyncio.StreamWriter] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            tasks.add(task)
        writers.add(writer)
        state.connections += 1
        try:
            head = await reader.readuntil(_HEADER_END)
            if len(head) > _MAX_REQUEST_HEAD:
                return
            state.requests.append(head)
            await handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass  # the client hung up, which is what most hostile tests make it do
        finally:
            writer.close()
            writers.discard(writer)
            if task is not None:
                tasks.discard(task)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()
        for writer in list(writers):
            writer.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


def response_head(status: str = "200 OK", headers: dict[str, str] | None = None) -> bytes:
    """A status line and headers, ready to write; add Content-Length or chunking yourself."""
    lines = [f"HTTP/1.1 {status}"] + [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def send_chunked(writer: asyncio.StreamWriter, chunks: AsyncIterator[bytes]) -> None:
    """Write chunked transfer coding, draining after each chunk."""
    async for chunk in chunks:
        if chunk:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


@dataclass
class AppServer:
    """An aiohttp application on a free port."""

    port: int

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@contextlib.asynccontextmanager
async def app_server(app: web.Application) -> AsyncIterator[AppServer]:
    """Run ``app`` on 127.0.0.1 for the duration of the block."""
    runner = web.AppRunner(app, shutdown_timeout=0.5, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield AppServer(port=runner.addresses[0][1])
    finally:
        await runner.cleanup()
