"""Benchmark: the fetcher's instructions per page (callgrind), against a bare aiohttp loop.

`bench_fetcher`'s throughput ratio varies with the machine's phase: on this 2-core machine a
fixed Python loop's CPU time varies by a third from run to run, and an A/B of the dispatcher
with and without its sha256 (3 % of its CPU) could not tell them apart in 10 rounds. Instruction
counts repeat within about 1 % (three runs: the bare loop 476k-480k a page, the dispatcher
688k-690k), so a cut of a few per cent shows (session 17, tests/bench/RESULTS.md).

Four layers fetch `bench_fetcher`'s 10 KB pages from its servers (8 hosts, 64 in flight):

- the bare aiohttp loop (`get` + `read`), on asyncio's own event loop and on the fetcher's
  (uvloop, `fetcher.http.new_event_loop`);
- `fetcher.http.fetch` in the same loop, on the fetcher's event loop;
- the `Dispatcher`, fed every request at once.

All four run under the service's collector settings. Each layer runs twice under
``valgrind --tool=callgrind``, for ``--small`` and then ``--large`` pages. Its figure is the
difference in instructions divided by the difference in pages, so start-up and imports cancel
out. The servers run natively in a process of their own.

The sha256 is replaced by a stub that does no work. Valgrind emulates no SHA-NI, so it would
count the software digest: about 286k instructions a 10 KB page, against 7.8 us natively
(`bench_fetcher_costs`). Instructions are not time: natively each of the dispatcher's
instructions costs more than the bare loop's, so its time ratio is lower than this one.

    python -m tests.bench.bench_fetcher_instructions [--small 400] [--large 1600]
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fetcher import http
from streamcrawl.heap import settled_heap
from tests.bench import bench_fetcher as bench

LAYERS = ("bare", "bare-uvloop", "fetch", "dispatcher")


class _NoDigest:
    """Stands in for `fetcher.http`'s sha256 under valgrind (module docstring)."""

    def copy(self) -> _NoDigest:
        return self

    def update(self, data: bytes | bytearray) -> None:
        pass

    def hexdigest(self) -> str:
        return "0" * 64


def fetch_pages(layer: str, pages: int) -> int:
    """Fetch ``pages`` pages through ``layer``; returns how many came back whole."""
    http._SHA256 = _NoDigest()  # type: ignore[assignment]
    servers = bench.ServerProcess("pages", bench.HOSTS)
    try:
        ports = sorted(servers.ports.values())
        requests = [
            bench.fetch_request(f"http://127.0.0.1:{port}/page/{n}", f"127.0.0.1:{port}", n)
            for n, port in zip(range(pages), itertools.cycle(ports))
        ]
        urls = [request.url for request in requests]
        if layer == "bare":
            return bench.bare_run_service_gc(servers, urls, bench.CONCURRENCY).fetched
        if layer == "bare-uvloop":
            return bench.bare_run_fetcher_loop(servers, urls, bench.CONCURRENCY).fetched
        if layer == "fetch":
            with settled_heap():
                return bench.on_fetcher_loop(bench.fetch_layer(urls, bench.CONCURRENCY))
        # Not `bench.dispatcher_run`: it decodes every request again first (so that none was
        # alive when the heap was settled), and callgrind would count that as the dispatcher's.
        completions = bench.Completions(pages)
        settings = bench.throughput_settings(bench.CONCURRENCY, pages)
        with bench.running(settings) as dispatcher, settled_heap():
            bench.run_all(dispatcher, requests, completions)
        return completions.pages
    finally:
        servers.stop()


def count_instructions(valgrind: str, layer: str, pages: int, directory: Path) -> int:
    """The instructions of one child process fetching ``pages`` pages through ``layer``."""
    out = directory / f"callgrind.{layer}.{pages}"
    child = [sys.executable, "-m", "tests.bench.bench_fetcher_instructions"]
    command = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", *child]
    subprocess.run(
        [*command, "--child", layer, "--pages", str(pages)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for line in out.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"no summary line in {out}")


def measure(small: int, large: int) -> dict[str, float]:
    """Instructions per page of each layer (the two runs of a layer side by side)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    per_page: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as directory, ThreadPoolExecutor(2) as pool:
        for layer in LAYERS:
            runs = [
                pool.submit(count_instructions, valgrind, layer, pages, Path(directory))
                for pages in (small, large)
            ]
            fewer, more = (run.result() for run in runs)
            per_page[layer] = (more - fewer) / (large - small)
    return per_page


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    arguments.add_argument("--small", type=int, default=400)
    arguments.add_argument("--large", type=int, default=1600)
    arguments.add_argument("--child", choices=LAYERS, help=argparse.SUPPRESS)
    arguments.add_argument("--pages", type=int, help=argparse.SUPPRESS)
    options = arguments.parse_args()
    if options.child is not None:
        fetched = fetch_pages(options.child, options.pages)
        if fetched != options.pages:
            raise SystemExit(f"{options.child}: {fetched} of {options.pages} pages fetched")
        return
    if options.large <= options.small:
        raise SystemExit("--large must be above --small")
    per_page = measure(options.small, options.large)
    bare = per_page["bare"]
    print(f"instructions per 10 KB page ({options.large} minus {options.small} pages; no sha256)")
    for layer, count in per_page.items():
        print(f"{layer:<12} {count / 1000:8.0f}k   bare / {layer}: {bare / count:.2f}")


if __name__ == "__main__":
    main()
