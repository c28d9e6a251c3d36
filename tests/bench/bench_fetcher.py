"""Benchmark: the fetch dispatcher's throughput, politeness accuracy and memory against hostile
servers.

Everything is measured in one run against local servers (127.0.0.1, free ports) in a child
process, so that on a 2-core machine the servers have one core and the fetcher the other; the
result is a table. Not a test: nothing asserts a duration.

1. Throughput, politeness off. ``HOSTS`` aiohttp servers (a host is host:port) answer every path
   with one 10 KB HTML page and /robots.txt with 404. Baseline: a bare aiohttp loop (one
   ClientSession, a semaphore of ``CONCURRENCY``, GET, read the body). Candidate: the `Dispatcher`,
   fed every request at once, each with a `Deferred` whose callback counts, timed from the first
   submit to the last finish. Politeness off means: ``min_delay_s`` 0 and requests asking for 0,
   ``latency_factor`` 0 (the adaptive delay would otherwise space a host's requests by twice their
   latency), and the per-host and global limits both ``CONCURRENCY``, so the global one binds as
   the baseline's semaphore does. robots.txt stays on (one 404 per host). More rows locate the
   cost: `fetcher.http.fetch` in the bare loop, the dispatcher with at most ``SERVICE_WINDOW``
   requests outstanding, with requests spread over ``MANY_HOSTS`` host names, and with a host name
   of its own for every request. Each round first runs the target's pair, baseline and dispatcher,
   as one block in the order A B B A (B A A B in the next round): both of a side's runs pooled into
   the round's figure for it, so a drift of the machine's speed across the block weighs on both
   sides alike (session 22: per-round ratios 0.64-0.81 in 10 paired rounds, against 0.53-0.91 in
   12 rounds with the two runs up to seven variants apart). The other variants follow, each round
   starting at the next one in turn. A variant's figure is the median of its per-round ratios to
   the same round's baseline (the machine is shared, so a round's conditions hold for all of its
   variants, not across rounds). GC: the dispatcher runs under the service's collector settings
   (`streamcrawl.heap.settle_heap`), the baseline under the interpreter's defaults and once more
   under the service's. Event loop: the dispatcher and the `fetch` row run on the fetcher's
   (uvloop, `fetcher.http.new_event_loop`), the baseline on asyncio's own (what `asyncio.run`
   gives a plain aiohttp program), and once more on the fetcher's with its collector settings,
   so the table also shows the fetcher's work against aiohttp's on equal terms. Target:
   dispatcher (all at once) / baseline >= 0.7, judged on an interval for the median of the
   per-round ratios (`tests.bench.verdicts`): met only when all of it clears the target, at the
   line while it holds the target (run more rounds to narrow it).
2. Politeness accuracy. ``POLITE_HOSTS`` servers record each request's arrival; every request asks
   for ``POLITE_DELAY_S`` (d). A host this process has not served waits one delay before its
   first request, which is robots.txt, so k pages take k + 1 requests ideally starting at d, 2d,
   ... (k+1)d after the submit: achieved rate = all requests / (last arrival - submit), against
   the ideal hosts / d. Targets: >= 0.9 of ideal; no two arrivals at one host closer than d. The
   grants and the send stamps (`Politeness.mark_sent`; the gap counts from these plus a margin,
   or from the previous answer when later) are recorded on the dispatcher's clock to show where
   the time between grant and arrival goes.
3. Hostile servers, each scenario in a fresh child process so that ``ru_maxrss`` covers only it
   (a sampler of the current RSS runs beside it), under short deadlines and a global concurrency
   of ``HOSTILE_CONCURRENCY``. The mix: gzip, zstd and br bombs and a 2 GB chunked body (submitted
   first, so the first wave is all bodies), then a 1 MiB header and two slow-loris servers;
   tracemalloc then gives the Python heap's peak for the mix again and for one fetch of each body
   alone. The worst case: ``HOSTILE_CONCURRENCY`` plain bodies that stop 256 KiB short of the cap
   until all of them are parked, then go on past it together. Target, each: peak RSS <= RSS
   before + 15 MiB (the body cap) x the global concurrency + ``HOSTILE_CONSTANT_BYTES``: one more
   cap for the page message being encoded (`encode_page` copies the body into the bytes Kafka is
   given; the event loop encodes one at a time, and these Deferreds drop their messages at once,
   as the service does once Kafka has them) and 8 MiB for one decoder call's output and the
   allocator's slack. One fetch alone is thus one body while it streams and two for the moment
   its message is built.

    python -m tests.bench.bench_fetcher [--requests 6000] [--rounds 6] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import multiprocessing
import os
import resource
import statistics
import threading
import time
import tracemalloc
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from typing import Any

import aiohttp
from aiohttp import web

from fetcher.dispatcher import Dispatcher, FetchTopics
from fetcher.http import FetchLimits, fetch, new_event_loop, open_session
from fetcher.politeness import Grant, Politeness, PolitenessSettings
from fetcher.results import FetchTarget
from fetcher.service import decode_request
from fetcher.settings import FetcherSettings
from schemas.fetch import FetchRequest
from schemas.pages import MAX_BODY_BYTES
from schemas.serde import encode
from streamcrawl.clock import SystemClock
from streamcrawl.handler import Deferred
from streamcrawl.heap import settle_heap, settled_heap
from tests.bench.verdicts import median_interval, verdict
from tests.unit.fetcher.bombs import MIB, zlib_bomb, zstd_bomb
from tests.unit.fetcher.servers import RawHandler, app_server, raw_server, response_head

CONCURRENCY = 64
HOSTS = 8
PAGE_BYTES = 10_000
SERVICE_WINDOW = 1000
"""Outstanding requests in the windowed variant: what a service honouring the default
``read_ahead`` would keep queued."""
TARGET_THROUGHPUT = 0.7
MANY_HOSTS = 1000
MANY_HOST_REQUESTS = 2000
"""The many-hosts variant: requests labelled with ``MANY_HOSTS`` host names (the dispatcher keys
queues and politeness by ``FetchRequest.host``) while the URLs go to the same ``HOSTS``
servers, as a crawl spread over many sites looks to the dispatcher."""

POLITE_HOSTS = 4
POLITE_DELAY_S = 0.2
POLITE_PAGES = 24
"""Pages per host: with robots.txt, 25 requests 0.2 s apart, 5 s."""
TARGET_POLITE_RATE = 0.9

HOSTILE_CONCURRENCY = 8
HOSTILE_CONSTANT_BYTES = MAX_BODY_BYTES + 8 * 1024 * 1024
"""Above the bodies: the one page message being encoded, one decoder call, allocator slack."""
HOSTILE_LIMITS = FetchLimits(connect_timeout_s=2.0, read_timeout_s=1.0, total_timeout_s=2.0)
TRICKLE_S = 0.25
"""A slow-loris byte this often, under the read timeout: a trickled body runs into the total
deadline, trickled headers into the read deadline (the header block must come within the read
timeout of the send, `fetcher.deadlines`)."""
BODY_HOSTS = {"gzip bomb": 4, "zstd bomb": 4, "br bomb": 4, "2 GB chunked": 4}
OTHER_HOSTS = {"1 MiB header": 2, "slow-loris headers": 2, "slow-loris body": 2}
WARMUP_HOST = "plain page"
GATED_HOSTS = tuple(f"gated {n}" for n in range(1, HOSTILE_CONCURRENCY // 2 + 1))
"""Two requests each: ``HOSTILE_CONCURRENCY`` bodies parked just under the cap together."""
GATE_TIMEOUT_S = 10.0
"""The gate opens when every gated stream is parked; this only bounds a run that goes wrong."""
BOMB_WIRE_BYTES = 2 * MIB
"""gzip: 2 GiB decoded; zstd: about 50 GiB."""
ENDLESS_BYTES = 2 * 1024 * MIB

SERVER_LIFETIME_S = 1800.0
"""A server process stops by itself after this long, told to or not: longer than the throughput
section takes with many rounds on a loaded machine."""
RUN_TIMEOUT_S = 60.0
TOPICS = FetchTopics(pages="pages", outcomes="outcomes", links="links")
LOOPBACK = ("127.0.0.0/8",)


# ----- servers, in their own process ----------------------------------------------------------


@dataclass(frozen=True)
class Arrival:
    """One request as a server saw it; ``at`` is time.monotonic(), and CLOCK_MONOTONIC is
    system-wide, so comparable with the parent's."""

    port: int
    path: str
    at: float


@dataclass
class ServerLog:
    arrivals: list[Arrival] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)
    """Body bytes written per hostile host."""
    gates_filled: int = 0
    """Rounds in which every gated stream was parked before the gate opened."""


def html_page(size: int) -> bytes:
    """An HTML list of links, exactly ``size`` bytes."""
    head = b"<!doctype html>\n<html><head><title>bench</title></head><body><ul>\n"
    tail = b"</ul></body></html>\n"
    page = bytearray(head)
    for n in range(size):
        if len(page) >= size:
            break
        page += b"<li><a href='/article/%d'>another article of this site</a></li>\n" % n
    return bytes(page[: size - len(tail)]) + tail


async def page_hosts(
    stack: contextlib.AsyncExitStack, hosts: int, log: ServerLog, record: bool
) -> dict[str, int]:
    """``hosts`` aiohttp servers answering the same page, robots.txt with 404."""
    page = html_page(PAGE_BYTES)
    ports: dict[str, int] = {}
    for index in range(hosts):
        port = [0]

        async def answer(request: web.Request, port: list[int] = port) -> web.Response:
            if record:
                log.arrivals.append(Arrival(port[0], request.path, time.monotonic()))
            if request.path == "/robots.txt":
                return web.Response(status=404)
            return web.Response(body=page, content_type="text/html")

        app = web.Application()
        app.router.add_get("/{tail:.*}", answer)
        port[0] = (await stack.enter_async_context(app_server(app))).port
        ports[f"host {index}"] = port[0]
    return ports


def _chunk(data: bytes | bytearray) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _chunked(pieces: Iterator[bytes], size: int = 64 * 1024) -> Iterator[bytes]:
    """Pieces joined into chunks of about ``size`` bytes in chunked coding, then the last chunk."""
    batch = bytearray()
    for piece in pieces:
        batch += piece
        if len(batch) >= size:
            yield _chunk(batch)
            batch.clear()
    if batch:
        yield _chunk(batch)
    yield b"0\r\n\r\n"


def _body_server(
    name: str, headers: dict[str, str], body: Callable[[], Iterator[bytes]], log: ServerLog
) -> RawHandler:
    """A chunked 200 whose body comes lazily from ``body``, written as the client reads."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(response_head(headers={**headers, "Transfer-Encoding": "chunked"}))
        for chunk in _chunked(body()):
            writer.write(chunk)
            await writer.drain()
            log.sent[name] = log.sent.get(name, 0) + len(chunk)

    return handler


class Gate:
    """Holds streams until ``size`` of them are parked on it, so that they go on together; then
    the next ``size`` wait for each other, and so on."""

    def __init__(self, size: int, log: ServerLog) -> None:
        self._size = size
        self._parked = 0
        self._log = log
        self._open = asyncio.Event()

    async def park(self) -> None:
        opened = self._open
        self._parked += 1
        if self._parked == self._size:
            self._log.gates_filled += 1
            opened.set()
            self._open, self._parked = asyncio.Event(), 0
        try:
            await asyncio.wait_for(opened.wait(), GATE_TIMEOUT_S)
        except TimeoutError:
            if opened is self._open:
                self._parked -= 1  # this round never filled; go on without it


def _gated_server(gate: Gate) -> RawHandler:
    """A plain body that stops 256 KiB short of the body cap until the gate opens, then goes on
    past the cap."""
    piece = b"x" * 65536
    before_gate = (MAX_BODY_BYTES - 256 * 1024) // len(piece)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        headers = {"Content-Type": "text/html", "Transfer-Encoding": "chunked"}
        writer.write(response_head(headers=headers))
        for _ in range(before_gate):
            writer.write(_chunk(piece))
            await writer.drain()
        await gate.park()
        for _ in range(64):  # 4 MiB more: the client stops at the cap
            writer.write(_chunk(piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    return handler


def _trickle_server(head: bytes) -> RawHandler:
    """``head``, then one byte every ``TRICKLE_S`` until the client hangs up."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(head)
        for _ in range(int(SERVER_LIFETIME_S / TRICKLE_S)):
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                if not await asyncio.wait_for(reader.read(1024), TRICKLE_S):
                    return  # the client gave up
            writer.write(b"a")

    return handler


async def _huge_header(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Big: ")
    for _ in range(16):
        writer.write(b"a" * 65536)
        await writer.drain()
    writer.write(b"\r\nContent-Length: 2\r\n\r\nok")
    await writer.drain()


def hostile_handlers(log: ServerLog) -> dict[str, RawHandler]:
    import brotli  # type: ignore[import-untyped]  # noqa: PLC0415

    gzip_head, gzip_unit = zlib_bomb(31)
    _, zstd_unit = zstd_bomb()
    br_stream = brotli.compress(bytes(64 * MIB), quality=5)  # about 100 bytes
    html = {"Content-Type": "text/html"}
    plain = html_page(PAGE_BYTES)
    plain_head = response_head(headers={**html, "Content-Length": str(PAGE_BYTES)})

    async def plain_page(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(plain_head + plain)
        await writer.drain()

    def units(head: bytes, unit: bytes) -> Callable[[], Iterator[bytes]]:
        count = BOMB_WIRE_BYTES // len(unit)
        return lambda: itertools.chain([head], itertools.repeat(unit, count))

    gate = Gate(HOSTILE_CONCURRENCY, log)
    return {
        WARMUP_HOST: plain_page,
        **{name: _gated_server(gate) for name in GATED_HOSTS},
        "gzip bomb": _body_server(
            "gzip bomb", {**html, "Content-Encoding": "gzip"}, units(gzip_head, gzip_unit), log
        ),
        "zstd bomb": _body_server(
            "zstd bomb", {**html, "Content-Encoding": "zstd"}, units(b"", zstd_unit), log
        ),
        "br bomb": _body_server(
            "br bomb", {**html, "Content-Encoding": "br"}, lambda: iter([br_stream]), log
        ),
        "2 GB chunked": _body_server(
            "2 GB chunked",
            html,
            lambda: itertools.repeat(b"x" * 65536, ENDLESS_BYTES // 65536),
            log,
        ),
        "1 MiB header": _huge_header,
        "slow-loris headers": _trickle_server(b"HTTP/1.1 200 OK\r\nX-Slow: "),
        "slow-loris body": _trickle_server(
            response_head(headers={**html, "Content-Length": "1000000000"}) + b"<"
        ),
    }


async def _serve(kind: str, hosts: int, record: bool, conn: Connection) -> None:
    """Run the servers until the parent says stop or hangs up, or the lifetime ends."""
    log = ServerLog()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_reader(conn.fileno(), stop.set)
    async with contextlib.AsyncExitStack() as stack:
        if kind == "pages":
            ports = await page_hosts(stack, hosts, log, record)
        else:
            ports = {}
            for name, handler in hostile_handlers(log).items():
                ports[name] = (await stack.enter_async_context(raw_server(handler))).port
        conn.send(ports)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SERVER_LIFETIME_S)
    loop.remove_reader(conn.fileno())
    conn.send(log)


def server_process_main(kind: str, hosts: int, record: bool, conn: Connection) -> None:
    asyncio.run(_serve(kind, hosts, record, conn))


class ServerProcess:
    """Servers in a child process: their ports once started, their log once stopped."""

    def __init__(self, kind: str, hosts: int = 0, record: bool = False) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child_conn = context.Pipe()
        self._process = context.Process(
            target=server_process_main,
            args=(kind, hosts, record, child_conn),
            name=f"bench-{kind}-servers",
            daemon=True,
        )
        self._process.start()
        child_conn.close()
        if not self._conn.poll(60):
            self._process.kill()
            raise RuntimeError(f"{kind} servers did not start")
        self.ports: dict[str, int] = self._conn.recv()

    def cpu_seconds(self) -> float:
        """User plus system CPU time of the server process so far."""
        with open(f"/proc/{self._process.pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> ServerLog:
        self._conn.send("stop")
        log: ServerLog = self._conn.recv() if self._conn.poll(30) else ServerLog()
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)
        self._conn.close()
        return log


# ----- driving the dispatcher -----------------------------------------------------------------


def fetch_request(
    url: str, host: str, index: int, *, delay_ms: int = 0, robots: bool = True
) -> FetchRequest:
    return FetchRequest(
        crawl_id="bench",
        url=url,
        host=host,
        depth=1,
        lease_id=f"lease-{index}",
        deadline=SystemClock().now_ms() + 600_000,
        politeness_delay_ms=delay_ms,
        respect_robots=robots,
        content_types=["text/html"],
    )


def requests_for(port: int, count: int, **options: Any) -> list[FetchRequest]:
    host = f"127.0.0.1:{port}"
    return [fetch_request(f"http://{host}/page/{n}", host, n, **options) for n in range(count)]


class Completions:
    """Counts finished Deferreds (on the dispatcher's thread), keeping a summary of each. The
    outputs are dropped at once, as the service drops them once Kafka has them."""

    def __init__(self, expected: int, summarize: Callable[[Deferred], Any] | None = None) -> None:
        self.expected = expected
        self.count = 0
        self.pages = 0
        self.finished_at = 0.0
        self.first = threading.Event()
        self.done = threading.Event()
        self.summaries: list[Any] = []
        self.window: threading.Semaphore | None = None
        self._summarize = summarize

    def on_finish(self, deferred: Deferred) -> None:
        self.pages += any(output.topic == TOPICS.pages for output in deferred.outputs)
        if self._summarize is not None:
            self.summaries.append(self._summarize(deferred))
        deferred.outputs.clear()
        self.count += 1
        if self.count == 1:  # an Event.set takes a lock and notifies: once, not per fetch
            self.first.set()
        if self.window is not None:
            self.window.release()
        if self.count == self.expected:
            self.finished_at = time.perf_counter()
            self.done.set()

    def wait(self) -> float:
        """Wait for the last one; return when it finished (perf_counter)."""
        self.done.wait(RUN_TIMEOUT_S)
        return self.finished_at or time.perf_counter()


@contextlib.contextmanager
def running(settings: FetcherSettings) -> Iterator[Dispatcher]:
    dispatcher = Dispatcher(settings, TOPICS, SystemClock())
    dispatcher.start()
    try:
        yield dispatcher
    finally:
        dispatcher.stop(10)


def submit(
    dispatcher: Dispatcher,
    requests: list[FetchRequest],
    completions: Completions,
    window: int | None = None,
) -> None:
    """Submit every request, at most ``window`` unfinished at a time."""
    if window is not None:
        completions.window = threading.Semaphore(window)
    for index, request in enumerate(requests):
        if completions.window is not None and not completions.window.acquire(timeout=RUN_TIMEOUT_S):
            return
        dispatcher.submit(request, Deferred(("fetch", 0, index), completions.on_finish), 0)


def run_all(
    dispatcher: Dispatcher,
    requests: list[FetchRequest],
    completions: Completions,
    window: int | None = None,
) -> float:
    """Seconds from the first submit to the last finish."""
    started = time.perf_counter()
    submit(dispatcher, requests, completions, window)
    return completions.wait() - started


# ----- 1. throughput --------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    fetched: int
    wall_s: float
    client_cpu_s: float
    server_cpu_s: float
    runs: int = 1
    """How many runs this one pools (`pooled`)."""

    @property
    def rate(self) -> float:
        return self.fetched / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def cpu_per_page_s(self) -> float:
        return self.client_cpu_s / max(self.fetched, 1)


def pooled(runs: list[Run]) -> Run:
    """Several runs of one variant as one: pages, seconds and CPU summed, so its rate is all the
    pages over all the time."""
    return Run(
        fetched=sum(run.fetched for run in runs),
        wall_s=sum(run.wall_s for run in runs),
        client_cpu_s=sum(run.client_cpu_s for run in runs),
        server_cpu_s=sum(run.server_cpu_s for run in runs),
        runs=sum(run.runs for run in runs),
    )


def timed(servers: ServerProcess, work: Callable[[], tuple[int, float | None]]) -> Run:
    """Run ``work`` (returning pages fetched and, optionally, its own wall time)."""
    cpu, server_cpu, started = time.process_time(), servers.cpu_seconds(), time.perf_counter()
    fetched, wall = work()
    wall = time.perf_counter() - started if wall is None else wall
    return Run(fetched, wall, time.process_time() - cpu, servers.cpu_seconds() - server_cpu)


async def bare_aiohttp(urls: list[str], concurrency: int) -> int:
    semaphore = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def get(url: str) -> bool:
            async with semaphore, session.get(url) as response:
                body = await response.read()
                return response.status == 200 and len(body) == PAGE_BYTES

        return sum(await asyncio.gather(*(get(url) for url in urls)))


async def fetch_layer(urls: list[str], concurrency: int) -> int:
    """The same loop through the fetcher's session and `fetcher.http.fetch`."""
    settings = throughput_settings(concurrency, 1)
    semaphore = asyncio.Semaphore(concurrency)
    clock = SystemClock()
    async with open_session(settings.http, settings.address_policy()) as session:

        async def get(url: str) -> bool:
            async with semaphore:
                target = FetchTarget(url, content_types=("text/html",))
                result = await fetch(session, target, settings.http, clock)
                return result.kind == "done" and len(result.body) == PAGE_BYTES

        return sum(await asyncio.gather(*(get(url) for url in urls)))


def throughput_settings(concurrency: int, read_ahead: int) -> FetcherSettings:
    return FetcherSettings(
        allowed_networks=LOOPBACK,
        read_ahead=read_ahead,
        politeness=PolitenessSettings(
            min_delay_s=0.0,
            latency_factor=0.0,
            per_host_concurrency=concurrency,
            global_concurrency=concurrency,
        ),
    )


def as_decoded(requests: list[FetchRequest]) -> list[FetchRequest]:
    """Fresh copies, decoded from their bytes as the service does, so that none of them was
    alive when the heap was settled (the service's requests arrive after its start-up)."""
    return [decode_request(encode(request)) for request in requests]


def dispatcher_run(
    servers: ServerProcess,
    requests: list[FetchRequest],
    concurrency: int,
    window: int | None,
    *,
    service_gc: bool = True,
) -> Run:
    completions = Completions(len(requests))
    settings = throughput_settings(concurrency, max(len(requests), 1))
    with (
        running(settings) as dispatcher,
        settled_heap() if service_gc else contextlib.nullcontext(),
    ):
        fresh = as_decoded(requests) if service_gc else requests
        run = timed(servers, lambda: (0, run_all(dispatcher, fresh, completions, window)))
    return replace(run, fetched=completions.pages)


def bare_run(servers: ServerProcess, urls: list[str], concurrency: int) -> Run:
    return timed(servers, lambda: (asyncio.run(bare_aiohttp(urls, concurrency)), None))


def on_fetcher_loop(work: Coroutine[Any, Any, int]) -> int:
    """Run on the event loop the dispatcher uses (`fetcher.http.new_event_loop`)."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(work)


def bare_run_fetcher_loop(servers: ServerProcess, urls: list[str], concurrency: int) -> Run:
    with settled_heap():
        return timed(servers, lambda: (on_fetcher_loop(bare_aiohttp(urls, concurrency)), None))


def bare_run_service_gc(servers: ServerProcess, urls: list[str], concurrency: int) -> Run:
    with settled_heap():
        return bare_run(servers, urls, concurrency)


BASELINE = "baseline"
BASELINE_SAME_LOOP = "baseline, fetcher's loop"
PAIRED = (BASELINE, "dispatcher")
"""The target's pair: run twice a round as one block, A B B A (`measure_throughput`)."""


@dataclass(frozen=True)
class Throughput:
    runs: dict[str, list[Run]]
    """Every round's run per variant, in round order (rounds interleave the variants)."""
    requests: int
    concurrency: int

    def ratios(self, name: str, baseline: str = BASELINE) -> list[float]:
        """Per round: the variant's rate over the same round's baseline rate."""
        return [
            run.rate / base.rate if base.rate else 0.0
            for run, base in zip(self.runs[name], self.runs[baseline], strict=True)
        ]

    def median_ratio(self, name: str, baseline: str = BASELINE) -> float:
        return statistics.median(self.ratios(name, baseline))

    def median_cpu_ratio(self, name: str, baseline: str = BASELINE) -> float:
        """Median per round of the baseline's client CPU per page over the variant's: what the
        rate ratio comes to when the client is CPU-bound, as on a quiet machine, and far less
        moved by other processes taking the CPUs than the wall-clock rates are."""
        return statistics.median(
            base.cpu_per_page_s / run.cpu_per_page_s if run.cpu_per_page_s else 0.0
            for run, base in zip(self.runs[name], self.runs[baseline], strict=True)
        )

    def median_run(self, name: str) -> Run:
        """The round whose rate is the median (the lower middle one for an even count)."""
        runs = sorted(self.runs[name], key=lambda run: run.rate)
        return runs[(len(runs) - 1) // 2]


def measure_throughput(requests: int, rounds: int, concurrency: int) -> Throughput:
    servers = ServerProcess("pages", HOSTS)
    try:
        ports = sorted(servers.ports.values())
        fetch_requests = [
            fetch_request(f"http://127.0.0.1:{port}/page/{n}", f"127.0.0.1:{port}", n)
            for n, port in zip(range(requests), itertools.cycle(ports))
        ]
        urls = [request.url for request in fetch_requests]
        many_hosts = [
            request.model_copy(update={"host": f"site-{n % MANY_HOSTS}.example"})
            for n, request in enumerate(fetch_requests[:MANY_HOST_REQUESTS])
        ]
        host_each = [
            request.model_copy(update={"host": f"site-{n}.example"})
            for n, request in enumerate(fetch_requests)
        ]
        variants: dict[str, Callable[[], Run]] = {
            BASELINE: lambda: bare_run(servers, urls, concurrency),
            "baseline, service GC": lambda: bare_run_service_gc(servers, urls, concurrency),
            BASELINE_SAME_LOOP: lambda: bare_run_fetcher_loop(servers, urls, concurrency),
            "fetch layer": lambda: timed(
                servers, lambda: (on_fetcher_loop(fetch_layer(urls, concurrency)), None)
            ),
            "dispatcher": lambda: dispatcher_run(servers, fetch_requests, concurrency, None),
            "default GC": lambda: dispatcher_run(
                servers, fetch_requests, concurrency, None, service_gc=False
            ),
            "windowed": lambda: dispatcher_run(
                servers, fetch_requests, concurrency, SERVICE_WINDOW
            ),
            "many hosts": lambda: dispatcher_run(servers, many_hosts, concurrency, None),
            "host each": lambda: dispatcher_run(servers, host_each, concurrency, None),
        }
        asyncio.run(bare_aiohttp(urls[: HOSTS * 20], concurrency))  # warm-up
        runs: dict[str, list[Run]] = {name: [] for name in variants}
        others = [name for name in variants if name not in PAIRED]
        for round_number in range(rounds):
            # The target's pair as A B B A, then B A A B (see the module docstring).
            first, second = PAIRED if round_number % 2 == 0 else PAIRED[::-1]
            pair: dict[str, list[Run]] = {name: [] for name in PAIRED}
            for name in (first, second, second, first):
                pair[name].append(variants[name]())
                gc.collect()
            for name, both in pair.items():
                runs[name].append(pooled(both))
            # Each round starts at another variant, so that none always runs first (or right
            # after the same neighbour) and carries whatever that position costs.
            shift = round_number % len(others)
            for name in others[shift:] + others[:shift]:
                runs[name].append(variants[name]())
                gc.collect()
    finally:
        servers.stop()
    return Throughput(runs, requests, concurrency)


# ----- 2. politeness --------------------------------------------------------------------------


@dataclass(frozen=True)
class Gap:
    seconds: float
    earlier: str
    later: str


@dataclass(frozen=True)
class PolitenessResult:
    arrivals: int
    finished: int
    expected: int
    span_s: float
    """From the submit to the last arrival."""
    first_wait_s: float
    """From the submit to the earliest first arrival at a host (ideal: one delay)."""
    gaps: list[Gap]
    grant_gaps: list[float]
    """Between two grants for one host, on the dispatcher's clock."""
    lags: list[float]
    """From each grant to its request's arrival at the server, sorted."""
    send_lags: list[float]
    """From each send stamp to its request's arrival at the server, sorted."""

    @property
    def ideal_rate(self) -> float:
        return POLITE_HOSTS / POLITE_DELAY_S

    @property
    def achieved_rate(self) -> float:
        return self.arrivals / self.span_s

    def smallest(self, pages_only: bool = False) -> Gap:
        return min(
            (gap for gap in self.gaps if not pages_only or gap.earlier != "/robots.txt"),
            key=lambda gap: gap.seconds,
        )


@dataclass
class Stamps:
    """Per host, the monotonic times of its grants and of its requests' sends."""

    grants: dict[str, list[float]] = field(default_factory=dict)
    sends: dict[str, list[float]] = field(default_factory=dict)


@contextlib.contextmanager
def recording_stamps() -> Iterator[Stamps]:
    """Each grant's start as `Politeness.try_acquire` hands it out, and each send as
    `Politeness.mark_sent` hears of it. The methods are wrapped for the block and restored after;
    they only observe."""
    stamps = Stamps()
    try_acquire, mark_sent = Politeness.try_acquire, Politeness.mark_sent

    def recording_try_acquire(politeness: Politeness, host: str) -> Grant | None:
        grant = try_acquire(politeness, host)
        if grant is not None:
            stamps.grants.setdefault(host, []).append(grant.started_at)
        return grant

    def recording_mark_sent(politeness: Politeness, grant: Grant) -> None:
        stamps.sends.setdefault(grant.host, []).append(time.monotonic())
        mark_sent(politeness, grant)

    Politeness.try_acquire = recording_try_acquire  # type: ignore[method-assign, assignment]
    Politeness.mark_sent = recording_mark_sent  # type: ignore[method-assign, assignment]
    try:
        yield stamps
    finally:
        Politeness.try_acquire = try_acquire  # type: ignore[method-assign]
        Politeness.mark_sent = mark_sent  # type: ignore[method-assign]


def _lags(by_port: dict[int, list[Arrival]], starts: dict[str, list[float]]) -> list[float]:
    """From each start to its arrival, sorted: one request at a time per host, so a host's n-th
    start is its n-th arrival."""
    return sorted(
        arrival.at - start
        for port, arrivals in by_port.items()
        for arrival, start in zip(arrivals, starts.get(f"127.0.0.1:{port}", []), strict=False)
    )


def measure_politeness() -> PolitenessResult:
    servers = ServerProcess("pages", POLITE_HOSTS, record=True)
    delay_ms = round(POLITE_DELAY_S * 1000)
    try:
        per_host = [
            requests_for(port, POLITE_PAGES, delay_ms=delay_ms)
            for port in sorted(servers.ports.values())
        ]
        requests = [request for batch in zip(*per_host, strict=True) for request in batch]
        completions = Completions(len(requests))
        with (
            recording_stamps() as stamps,
            running(FetcherSettings(allowed_networks=LOOPBACK)) as dispatcher,
        ):
            submitted = time.monotonic()
            run_all(dispatcher, requests, completions)
    finally:
        log = servers.stop()
    by_port: dict[int, list[Arrival]] = {}
    for arrival in sorted(log.arrivals, key=lambda arrival: arrival.at):
        by_port.setdefault(arrival.port, []).append(arrival)
    gaps = [
        Gap(later.at - earlier.at, earlier.path, later.path)
        for arrivals in by_port.values()
        for earlier, later in itertools.pairwise(arrivals)
    ]
    return PolitenessResult(
        arrivals=len(log.arrivals),
        finished=completions.count,
        expected=len(requests),
        span_s=max(arrival.at for arrival in log.arrivals) - submitted,
        first_wait_s=min(arrivals[0].at for arrivals in by_port.values()) - submitted,
        gaps=gaps,
        grant_gaps=[
            later - earlier
            for starts in stamps.grants.values()
            for earlier, later in itertools.pairwise(starts)
        ],
        lags=_lags(by_port, stamps.grants),
        send_lags=_lags(by_port, stamps.sends),
    )


# ----- 3. hostile servers ---------------------------------------------------------------------


def current_rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def max_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class RssSampler:
    """The largest current RSS seen, sampled every few milliseconds on a thread (ru_maxrss
    catches whatever falls between samples)."""

    def __init__(self, interval_s: float = 0.005) -> None:
        self.peak = current_rss()
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        for _ in range(int(RUN_TIMEOUT_S * 3 / self._interval_s)):
            self.peak = max(self.peak, current_rss())
            if self._stop.wait(self._interval_s):
                return


@dataclass(frozen=True)
class Outcome:
    host: str
    kind: str
    reason: str | None
    truncated: bool
    page_bytes: int
    started_ms: int
    elapsed_ms: int

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.reason or ('truncated' if self.truncated else '-')}"


def summarize(names: dict[str, str]) -> Callable[[Deferred], Outcome]:
    """Summarizes one finished hostile fetch; ``names`` maps host:port to the server's name."""

    def summary(deferred: Deferred) -> Outcome:
        outcome: dict[str, Any] = {}
        page_bytes = 0
        for output in deferred.outputs:
            if output.topic == TOPICS.outcomes and output.value is not None:
                outcome = json.loads(output.value)
            elif output.topic == TOPICS.pages and output.value is not None:
                page_bytes = len(output.value)
        return Outcome(
            host=names.get(outcome.get("host", ""), "?"),
            kind=outcome.get("kind", "?"),
            reason=outcome.get("reason"),
            truncated=bool(outcome.get("truncated")),
            page_bytes=page_bytes,
            started_ms=int(outcome.get("fetched_at", 0)),
            elapsed_ms=int(outcome.get("elapsed_ms", 0)),
        )

    return summary


def most_at_once(outcomes: list[Outcome]) -> int:
    """The most fetches in flight at the same moment, from their start and duration."""
    edges = sorted(
        edge
        for outcome in outcomes
        for edge in ((outcome.started_ms, 1), (outcome.started_ms + outcome.elapsed_ms, -1))
    )
    return max(itertools.accumulate(change for _, change in edges), default=0)


@dataclass(frozen=True)
class HostileResult:
    scenario: str
    rss_before: int
    rss_peak: int
    wall_s: float
    outcomes: list[Outcome]
    expected: int
    heap_peak: int = 0
    """tracemalloc's peak over a second run of the same scenario, above the heap before it."""
    single_heap_peaks: dict[str, int] = field(default_factory=dict)
    """The same for one fetch of each body host alone."""
    sent: dict[str, int] = field(default_factory=dict)
    gates_filled: int = 0

    @property
    def bound(self) -> int:
        return self.rss_before + MAX_BODY_BYTES * HOSTILE_CONCURRENCY + HOSTILE_CONSTANT_BYTES

    @property
    def bodies_at_once(self) -> int:
        return most_at_once([outcome for outcome in self.outcomes if outcome.page_bytes])


def hostile_requests(ports: dict[str, int], hosts: dict[str, int]) -> list[FetchRequest]:
    return [
        request
        for name, count in hosts.items()
        for request in requests_for(ports[name], count, robots=False)
    ]


def hostile_mix(
    dispatcher: Dispatcher, ports: dict[str, int], names: dict[str, str]
) -> tuple[Completions, float]:
    """The body hosts' requests first, the others once the first body is done: the first wave
    is ``HOSTILE_CONCURRENCY`` bodies at once."""
    bodies, others = hostile_requests(ports, BODY_HOSTS), hostile_requests(ports, OTHER_HOSTS)
    completions = Completions(len(bodies) + len(others), summarize(names))
    started = time.perf_counter()
    submit(dispatcher, bodies, completions)
    completions.first.wait(RUN_TIMEOUT_S)
    submit(dispatcher, others, completions)
    return completions, completions.wait() - started


def hostile_gated(
    dispatcher: Dispatcher, ports: dict[str, int], names: dict[str, str]
) -> tuple[Completions, float]:
    """``HOSTILE_CONCURRENCY`` plain bodies parked just under the cap, then released together."""
    requests = hostile_requests(ports, dict.fromkeys(GATED_HOSTS, 2))
    completions = Completions(len(requests), summarize(names))
    return completions, run_all(dispatcher, requests, completions)


def heap_peak(work: Callable[[], object]) -> int:
    """tracemalloc's peak while ``work`` runs, above the traced heap before it."""
    gc.collect()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    work()
    return tracemalloc.get_traced_memory()[1] - before


def fetch_once(dispatcher: Dispatcher, port: int) -> Callable[[], float]:
    return lambda: run_all(dispatcher, requests_for(port, 1, robots=False), Completions(1))


def hostile_child(scenario: str, ports: dict[str, int], conn: Connection) -> None:
    """In a fresh process: the RSS before and the peak during one scenario (and for the mix,
    heap peaks under tracemalloc after); the result goes back through ``conn``."""
    names = {f"127.0.0.1:{port}": name for name, port in ports.items()}
    settings = FetcherSettings(
        allowed_networks=LOOPBACK,
        http=HOSTILE_LIMITS,
        politeness=PolitenessSettings(
            latency_factor=0.0, per_host_concurrency=2, global_concurrency=HOSTILE_CONCURRENCY
        ),
    )
    run_scenario = hostile_mix if scenario == "mix" else hostile_gated
    with running(settings) as dispatcher:
        warmup = requests_for(ports[WARMUP_HOST], HOSTILE_CONCURRENCY * 2, robots=False)
        run_all(dispatcher, warmup, Completions(len(warmup)))
        settle_heap()  # as the service does after its start-up
        rss_before, maxrss_before = current_rss(), max_rss()
        with RssSampler() as sampler:
            completions, wall = run_scenario(dispatcher, ports, names)
        # ru_maxrss also covers the start-up; it counts only once it grew past its value before.
        rss_peak = sampler.peak if max_rss() == maxrss_before else max(sampler.peak, max_rss())
        order = list(ports)
        result = HostileResult(
            scenario=scenario,
            rss_before=rss_before,
            rss_peak=rss_peak,
            wall_s=wall,
            outcomes=sorted(completions.summaries, key=lambda outcome: order.index(outcome.host)),
            expected=completions.expected,
        )
        tracemalloc.start()
        result = replace(
            result, heap_peak=heap_peak(lambda: run_scenario(dispatcher, ports, names))
        )
        if scenario == "mix":
            result = replace(
                result,
                single_heap_peaks={
                    name: heap_peak(fetch_once(dispatcher, ports[name])) for name in BODY_HOSTS
                },
            )
        tracemalloc.stop()
    conn.send(result)


def measure_hostile() -> list[HostileResult]:
    """Both scenarios, each in a fresh process, against one hostile server process."""
    servers = ServerProcess("hostile")
    results: list[HostileResult] = []
    try:
        context = multiprocessing.get_context("spawn")
        for scenario in ("mix", "gated"):
            parent_conn, child_conn = context.Pipe()
            child = context.Process(
                target=hostile_child,
                args=(scenario, servers.ports, child_conn),
                name=f"bench-hostile-{scenario}",
                daemon=True,
            )
            child.start()
            child_conn.close()
            if parent_conn.poll(RUN_TIMEOUT_S * 3):
                results.append(parent_conn.recv())
            child.join(30)
            if child.is_alive():
                child.kill()
                child.join(5)
    finally:
        log = servers.stop()
    if len(results) != 2:
        raise RuntimeError("a hostile measurement did not report")
    return [replace(result, sent=log.sent, gates_filled=log.gates_filled) for result in results]


# ----- the report -----------------------------------------------------------------------------


def met_or_not(met: bool) -> str:
    return "met" if met else "NOT met"


def mib(size: float) -> str:
    return f"{size / MIB:.1f} MiB"


def row(section: str, name: str, value: str, target: str = "", result: str = "") -> str:
    return f"{section:<13}{name:<46}{value:>12}  {target:<14}{result}"


def note(text: str) -> str:
    return f"{'':15}{text}"


def len_many(result: Throughput) -> int:
    return min(result.requests, MANY_HOST_REQUESTS)


def report_throughput(result: Throughput) -> list[str]:
    requests, rounds = result.requests, len(result.runs[BASELINE])
    baseline = result.median_run(BASELINE).rate

    def rate(name: str) -> str:
        return f"{result.median_run(name).rate:.0f} f/s"

    def against(name: str) -> str:
        return f"(median {result.median_ratio(name):.2f} of baseline)"

    def detail(name: str) -> str:
        run = result.median_run(name)
        expected = (len_many(result) if name == "many hosts" else requests) * run.runs
        ratios = ", ".join(f"{ratio:.2f}" for ratio in result.ratios(name))
        pooled_runs = f" ({run.runs} runs)" if run.runs > 1 else ""
        return note(
            f"{name + ':':<21}{run.fetched}/{expected} pages{pooled_runs} in {run.wall_s:.2f} s;"
            f" CPU: client "
            f"{run.client_cpu_s / run.wall_s:.0%}, servers {run.server_cpu_s / run.wall_s:.0%};"
            f" {run.cpu_per_page_s * 1e6:.0f} us client CPU per page;"
            f" ratio per round {ratios}"
        )

    dispatcher = result.median_ratio("dispatcher")
    interval = median_interval(result.ratios("dispatcher"))
    complete = all(run.fetched == requests * run.runs for run in result.runs["dispatcher"])
    throughput_verdict = verdict(interval, TARGET_THROUGHPUT) if complete else "NOT met"
    return [
        row(
            "1 throughput",
            f"bare aiohttp: {HOSTS} hosts, {result.concurrency} in flight",
            f"{baseline:.0f} f/s",
            f"(median of {rounds} rounds)",
        ),
        row(
            "",
            "  the same under the service's GC settings",
            rate("baseline, service GC"),
            against("baseline, service GC"),
        ),
        row(
            "",
            "  the same on the fetcher's loop (uvloop) and GC",
            rate(BASELINE_SAME_LOOP),
            against(BASELINE_SAME_LOOP),
        ),
        row("", "fetcher.http.fetch in the same loop", rate("fetch layer"), against("fetch layer")),
        row("", f"Dispatcher, all {requests} submitted at once", rate("dispatcher")),
        row(
            "",
            "  Dispatcher / baseline (median of per-round ratios)",
            f"{dispatcher:.2f}",
            f">= {TARGET_THROUGHPUT}",
            throughput_verdict,
        ),
        note(f"  the per-round ratios' median: {interval.describe()} (tests/bench/verdicts.py)"),
        row(
            "",
            "  client CPU per page, baseline / Dispatcher",
            f"{result.median_cpu_ratio('dispatcher'):.2f}",
            "(quiet-machine ratio)",
        ),
        row(
            "",
            "  Dispatcher / baseline under the same GC settings",
            f"{result.median_ratio('dispatcher', 'baseline, service GC'):.2f}",
        ),
        row(
            "",
            "  Dispatcher / baseline on the same loop and GC",
            f"{result.median_ratio('dispatcher', BASELINE_SAME_LOOP):.2f}",
        ),
        row(
            "", "  Dispatcher, interpreter's default GC", rate("default GC"), against("default GC")
        ),
        row(
            "",
            f"Dispatcher, <= {SERVICE_WINDOW} outstanding",
            rate("windowed"),
            against("windowed"),
        ),
        row(
            "",
            f"Dispatcher, {len_many(result)} requests over {MANY_HOSTS} host names",
            rate("many hosts"),
            against("many hosts"),
        ),
        row(
            "",
            f"Dispatcher, {requests} requests, a host name each",
            rate("host each"),
            against("host each"),
        ),
        *(detail(name) for name in result.runs),
        note(
            f"Dispatcher settings: min_delay_s 0, latency_factor 0, per-host and global "
            f"concurrency {result.concurrency}, read_ahead = requests, robots.txt on (404); "
            f"host names: FetchRequest.host labels, URLs on the same {HOSTS} servers; GC as the "
            f"service sets it (streamcrawl.heap.settle_heap) unless the row says otherwise"
        ),
    ]


def report_politeness(result: PolitenessResult) -> list[str]:
    ratio = result.achieved_rate / result.ideal_rate
    delay = POLITE_DELAY_S
    smallest, smallest_page = result.smallest(), result.smallest(pages_only=True)
    below = sum(gap.seconds < delay for gap in result.gaps)
    mean = sum(gap.seconds for gap in result.gaps) / len(result.gaps)

    def lag(quantile: float, lags: list[float] = result.lags) -> str:
        return f"{lags[round(quantile * (len(lags) - 1))] * 1000:.2f} ms" if lags else "-"

    return [
        row(
            "2 politeness",
            f"{POLITE_HOSTS} hosts, d={delay * 1000:.0f} ms: achieved / ideal",
            f"{ratio:.3f}",
            f">= {TARGET_POLITE_RATE}",
            met_or_not(ratio >= TARGET_POLITE_RATE),
        ),
        row(
            "",
            "smallest gap at one host (at the server)",
            f"{smallest.seconds * 1000:.2f} ms",
            f">= {delay * 1000:.0f} ms",
            met_or_not(smallest.seconds >= delay),
        ),
        note(
            f"smallest is {smallest.earlier} -> {smallest.later}; page to page the smallest is "
            f"{smallest_page.seconds * 1000:.2f} ms; {below}/{len(result.gaps)} gaps under d; "
            f"mean {mean * 1000:.2f} ms, max {max(g.seconds for g in result.gaps) * 1000:.2f} ms"
        ),
        note(
            f"grants (dispatcher clock): smallest gap {min(result.grant_gaps) * 1000:.2f} ms, mean "
            f"{sum(result.grant_gaps) / len(result.grant_gaps) * 1000:.2f} ms; grant -> arrival "
            f"at the server: {lag(0.0)} min, {lag(0.5)} median, {lag(1.0)} max"
        ),
        note(
            f"send stamps (the gap counts from these plus max(5 ms, 2%), or the answer): send -> "
            f"arrival {lag(0.0, result.send_lags)} min, {lag(0.5, result.send_lags)} median, "
            f"{lag(1.0, result.send_lags)} max; {len(result.send_lags)} sends matched"
        ),
        note(
            f"{result.arrivals} requests (robots.txt + {POLITE_PAGES} pages per host), the last "
            f"{result.span_s:.3f} s after the submit (ideal (k+1)d = "
            f"{(POLITE_PAGES + 1) * delay:.3f} s): {result.achieved_rate:.2f} req/s against "
            f"{result.ideal_rate:.2f}"
        ),
        note(
            f"first request {result.first_wait_s * 1000:.1f} ms after the submit (ideal "
            f"{delay * 1000:.0f}); {result.finished}/{result.expected} deferreds finished"
        ),
    ]


def report_hostile(results: list[HostileResult]) -> list[str]:
    lines: list[str] = []
    for result in results:
        growth = result.rss_peak - result.rss_before
        mix = result.scenario == "mix"
        label = "hostile mix" if mix else f"{HOSTILE_CONCURRENCY} bodies parked at the cap"
        heap = (
            f"tracemalloc heap peak (second run) {mib(result.heap_peak)} = "
            f"{result.heap_peak / MAX_BODY_BYTES:.1f} caps"
        )
        if result.single_heap_peaks:
            heap += "; one fetch alone, in caps: " + ", ".join(
                f"{name} {peak / MAX_BODY_BYTES:.1f}"
                for name, peak in result.single_heap_peaks.items()
            )
        gate = "" if mix else f"; gate filled in {result.gates_filled}/2 runs"
        lines += [
            row(
                "" if lines else "3 hostile",
                f"peak RSS, {label}",
                mib(result.rss_peak),
                f"<= {mib(result.bound)}",
                met_or_not(result.rss_peak <= result.bound),
            ),
            note(
                f"bound = RSS before {mib(result.rss_before)} + {mib(MAX_BODY_BYTES)} x "
                f"{HOSTILE_CONCURRENCY} (global concurrency) + {mib(HOSTILE_CONSTANT_BYTES)} (one "
                f"page message being encoded, one decoder call, slack); growth {mib(growth)} = "
                f"{growth / MAX_BODY_BYTES:.1f} caps"
            ),
            note(
                f"{result.bodies_at_once} bodies in flight at once at most; "
                f"{len(result.outcomes)}/{result.expected} finished in {result.wall_s:.2f} s{gate}"
            ),
            note(heap),
        ]
        for host, outcomes in itertools.groupby(result.outcomes, key=lambda found: found.host):
            found = list(outcomes)
            sent = result.sent.get(host)
            lines.append(
                note(
                    f"{host:<19} x{len(found)}: "
                    + ", ".join(sorted({outcome.label for outcome in found}))
                    + f"; page {mib(max(outcome.page_bytes for outcome in found))}; up to "
                    f"{max(outcome.elapsed_ms for outcome in found)} ms"
                    + ("" if sent is None else f"; server wrote {mib(sent)} in all")
                )
            )
    return lines


SECTIONS = ("throughput", "politeness", "hostile")


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    arguments.add_argument("--requests", type=int, default=6000)
    arguments.add_argument("--rounds", type=int, default=6)
    arguments.add_argument("--concurrency", type=int, default=CONCURRENCY)
    arguments.add_argument(
        "--sections", default=",".join(SECTIONS), help="comma separated, of " + ", ".join(SECTIONS)
    )
    options = arguments.parse_args()
    sections = set(options.sections.split(","))
    started = time.perf_counter()
    lines: list[str] = []
    if "throughput" in sections:
        throughput = measure_throughput(options.requests, options.rounds, options.concurrency)
        lines += report_throughput(throughput)
    if "politeness" in sections:
        lines += report_politeness(measure_politeness())
    if "hostile" in sections:
        lines += report_hostile(measure_hostile())
    print(row("section", "measurement", "value", "target", "verdict"))
    print("-" * 100)
    for line in lines:
        print(line)
    print(f"(whole run {time.perf_counter() - started:.0f} s on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    # Through the module's own name, so that what crosses process boundaries pickles as
    # tests.bench.bench_fetcher.X on both sides rather than as __main__.X.
    from tests.bench.bench_fetcher import main as run_main

    run_main()
