"""Benchmark: what the fetcher's own steps cost per page, in CPU microseconds, one step at a time.

The throughput benchmark (`tests.bench.bench_fetcher`) says how far the Dispatcher is from a bare
aiohttp loop; this says where the difference goes, for a 10 KB page of one of the throughput
benchmark's hosts. Each step runs alone in a tight loop (the best of ``--rounds`` repeats of
``--number`` calls, so other processes on a shared machine inflate it least), with its inputs
built outside the timing. Not a test: nothing asserts a duration.

    python -m tests.bench.bench_fetcher_costs [--number 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import timeit
from collections.abc import Callable

from fetcher import metrics
from fetcher.deadlines import FetchDeadline
from fetcher.host_queues import HostQueues
from fetcher.politeness import Politeness, PolitenessSettings
from fetcher.results import FetchResult, FetchTarget
from fetcher.urls import fetch_url, origin
from fetcher.wire import outcome_value, page_envelope
from schemas.canonical import canonical_url
from schemas.fetch import FetchRequest
from schemas.serde import encode, encode_page
from streamcrawl.clock import SystemClock
from streamcrawl.handler import Deferred

URL = "http://127.0.0.1:8080/page/1234"
BODY = bytearray(b"<p>" + b"x" * 9993 + b"</p>")
HEADERS = {
    "content-type": "text/html; charset=utf-8",
    "content-length": "10000",
    "date": "Tue, 01 Dec 2026 07:00:00 GMT",
    "server": "Python/3.11 aiohttp/3.12",
}


def _request(index: int = 0, host: str = "127.0.0.1:8080") -> FetchRequest:
    return FetchRequest(
        crawl_id="bench",
        url=URL,
        host=host,
        depth=1,
        lease_id=f"lease-{index}",
        deadline=SystemClock().now_ms() + 600_000,
        content_types=["text/html"],
    )


def _result() -> FetchResult:
    return FetchResult(
        url=URL,
        kind="done",
        fetched_at_ms=SystemClock().now_ms(),
        elapsed_s=0.002,
        status=200,
        headers=HEADERS,
        content_type="text/html",
        body=BODY,
        sha256=hashlib.sha256(BODY).hexdigest(),
        wire_bytes=len(BODY),
    )


def _queue_cycle() -> Callable[[], None]:
    """One request through the read-ahead: queued, granted, released (politeness off)."""
    clock = SystemClock()
    politeness = Politeness(
        PolitenessSettings(latency_factor=0, per_host_concurrency=64, global_concurrency=64), clock
    )
    queues: HostQueues[FetchRequest] = HostQueues(politeness, clock, capacity=10_000)
    requests = [_request(index, f"host-{index % 8}") for index in range(1000)]
    for request in requests:  # a read-ahead of a thousand, as in the service
        queues.push(request)

    def cycle() -> None:
        item = queues.pop_ready()
        if item is None:
            raise RuntimeError("nothing ready")
        request, grant = item
        politeness.release(grant, status=200)
        queues.push(request)

    return cycle


def _timer_steps() -> dict[str, float]:
    """Deadline handling per fetch, inside a running loop: before (asyncio.timeout plus aiohttp's
    sock_read timer, started once and moved once per chunk: two chunks here) and now."""

    async def measure(number: int) -> dict[str, float]:
        loop = asyncio.get_running_loop()

        async def before() -> None:
            async with asyncio.timeout(90):
                handle = loop.call_later(30, lambda: None)
                for _ in range(2):
                    handle.cancel()
                    handle = loop.call_later(30, lambda: None)
                handle.cancel()

        async def now() -> None:
            with FetchDeadline(90, 30) as deadline:
                for _ in range(3):
                    deadline.progress()

        costs: dict[str, float] = {}
        for name, step in (("deadlines, before", before), ("deadlines, now", now)):
            best = float("inf")
            for _ in range(3):
                started = loop.time()
                for _ in range(number):
                    await step()
                best = min(best, (loop.time() - started) / number)
            costs[name] = best * 1e6
        return costs

    return asyncio.run(measure(5000))


def _written(result: FetchResult, request: FetchRequest) -> tuple[bytes, bytes]:
    """What the dispatcher does instead of the two rows above: fields, then orjson."""
    page = result.page_fields(request)
    if page is None:
        raise RuntimeError("no page")
    return page_envelope(page, result.body), outcome_value(
        result.outcome_fields(request, page_sent=True)
    )


def measure(number: int, rounds: int) -> dict[str, float]:
    request, result = _request(), _result()
    page = result.page(request)
    outcome = result.outcome(request, page_sent=True)
    if page is None:
        raise RuntimeError("no page")

    def finish() -> None:
        deferred = Deferred(("fetch", 0, 0), lambda _: None)
        deferred.produce("pages", URL, b"")
        deferred.produce("outcomes", "h", b"")
        deferred.finish()

    steps: dict[str, Callable[[], object]] = {
        "canonical_url (what fetch did before)": lambda: canonical_url(URL),
        "fetch_url (now)": lambda: fetch_url(URL),
        "robots.txt origin": lambda: origin(URL),
        "sha256 of 10 KB": lambda: hashlib.sha256(BODY).hexdigest(),
        "FetchTarget.from_request": lambda: FetchTarget.from_request(request),
        "FetchedPage + FetchOutcome built (before)": lambda: (
            result.page(request),
            result.outcome(request, page_sent=True),
        ),
        "page envelope + outcome encoded": lambda: (encode_page(page, BODY), encode(outcome)),
        "page + outcome fields written (now)": lambda: _written(result, request),
        "metrics of one fetch": lambda: metrics.record(result, "done"),
        "queue, grant, release": _queue_cycle(),
        "Deferred, two outputs, finish": finish,
    }
    costs = {
        name: min(timeit.repeat(step, number=number, repeat=rounds)) / number * 1e6
        for name, step in steps.items()
    }
    costs.update(_timer_steps())
    return costs


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    arguments.add_argument("--number", type=int, default=20_000)
    arguments.add_argument("--rounds", type=int, default=5)
    options = arguments.parse_args()
    for name, cost in measure(options.number, options.rounds).items():
        print(f"{name:<40} {cost:7.1f} us")


if __name__ == "__main__":
    main()
