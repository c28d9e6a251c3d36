"""A forward proxy on 127.0.0.1 for tests: absolute-form requests forwarded, CONNECT tunnelled.

It resolves names from its own table (``hosts``), so a test can give a target a public address in
the fetcher's DNS while the proxy reaches it on 127.0.0.1: the proxy, not the fetcher, connects to
the target, as behind a real egress proxy. With ``credentials`` it answers 407 to a request
without the matching Proxy-Authorization. Each request line it received is kept in ``seen``.
Every connection is closed after one exchange (``Connection: close`` both ways), which keeps the
forwarding a plain copy. `forward_proxy` runs it in the test's event loop, `ThreadedProxy` in a
thread of its own for tests whose fetcher is another process.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator

from yarl import URL

_HEAD_END = b"\r\n\r\n"
_HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization"}


class ForwardProxy:
    """The proxy's behaviour; `forward_proxy` or `ThreadedProxy` serve it."""

    def __init__(
        self, hosts: dict[str, str] | None = None, credentials: tuple[str, str] | None = None
    ) -> None:
        self.hosts = hosts or {}
        """Name -> the address this proxy connects to for it; other names resolve as usual."""
        self._authorization = (
            None
            if credentials is None
            else b"Basic " + base64.b64encode(":".join(credentials).encode())
        )
        self.seen: list[str] = []
        """Request lines received (``GET http://host/path``, ``CONNECT host:443``)."""
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(_HEAD_END)
            lines = head.split(b"\r\n")
            method, target, _ = lines[0].decode("latin-1").split(" ", 2)
            self.seen.append(f"{method} {target}")
            headers = [line for line in lines[1:] if line]
            if self._authorization is not None and not self._authorized(headers):
                writer.write(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n'
                    b"Connection: close\r\n\r\n"
                )
                return
            if method == "CONNECT":
                await self._tunnel(target, reader, writer)
            else:
                await self._forward(method, URL(target), headers, writer)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    def _authorized(self, headers: list[bytes]) -> bool:
        for line in headers:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"proxy-authorization":
                return value.strip() == self._authorization
        return False

    async def _open(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(self.hosts.get(host, host), port)

    async def _tunnel(
        self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        host, _, port = target.rpartition(":")
        try:
            origin_reader, origin_writer = await self._open(host.strip("[]"), int(port))
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        try:
            await asyncio.gather(_copy(reader, origin_writer), _copy(origin_reader, writer))
        finally:
            origin_writer.close()

    async def _forward(
        self, method: str, url: URL, headers: list[bytes], writer: asyncio.StreamWriter
    ) -> None:
        try:
            origin_reader, origin_writer = await self._open(url.raw_host or "", url.port or 80)
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        try:
            kept = [line for line in headers if line.partition(b":")[0].lower() not in _HOP_BY_HOP]
            request = [f"{method} {url.raw_path_qs} HTTP/1.1".encode(), *kept, b"Connection: close"]
            origin_writer.write(b"\r\n".join(request) + _HEAD_END)
            response_head = await origin_reader.readuntil(_HEAD_END)
            status, *rest = response_head[: -len(_HEAD_END)].split(b"\r\n")
            answer = [status, *(line for line in rest if not _hop_by_hop(line))]
            writer.write(b"\r\n".join([*answer, b"Connection: close"]) + _HEAD_END)
            await _copy(origin_reader, writer)
        finally:
            origin_writer.close()


def _hop_by_hop(line: bytes) -> bool:
    return line.partition(b":")[0].strip().lower() in _HOP_BY_HOP


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


@contextlib.asynccontextmanager
async def forward_proxy(
    hosts: dict[str, str] | None = None, credentials: tuple[str, str] | None = None
) -> AsyncIterator[ForwardProxy]:
    """A `ForwardProxy` on a free port of 127.0.0.1 for the duration of the block."""
    proxy = ForwardProxy(hosts, credentials)
    tasks: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await proxy.serve(reader, writer)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    proxy.port = server.sockets[0].getsockname()[1]
    try:
        yield proxy
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


class ThreadedProxy:
    """`forward_proxy` served from a thread of its own until `stop`."""

    def __init__(
        self, hosts: dict[str, str] | None = None, credentials: tuple[str, str] | None = None
    ) -> None:
        self._hosts, self._credentials = hosts, credentials
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._stopping: asyncio.Event | None = None
        self._done: concurrent.futures.Future[None] | None = None
        self.proxy: ForwardProxy | None = None

    @property
    def url(self) -> str:
        assert self.proxy is not None, "start the proxy first"
        return f"http://127.0.0.1:{self.proxy.port}"

    def start(self) -> ThreadedProxy:
        self._thread.start()
        started = threading.Event()

        async def run() -> None:
            self._stopping = asyncio.Event()
            async with forward_proxy(self._hosts, self._credentials) as proxy:
                self.proxy = proxy
                started.set()
                await self._stopping.wait()

        self._done = asyncio.run_coroutine_threadsafe(run(), self._loop)
        if not started.wait(10):
            raise RuntimeError("the forward proxy did not start in 10 s")
        return self

    def stop(self) -> None:
        if self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        if self._done is not None:
            self._done.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
