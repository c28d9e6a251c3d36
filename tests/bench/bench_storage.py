"""Benchmark: MB/s of bodies stored by the storage handler against bare zstd-compress-and-write.

Bodies are generated deterministically (fixed seeds): HTML of words, links and markup, distinct per
page and per round, at about 20 KB and 100 KB (seed 004's average article). For each size, in one
run and one process, rounds alternate between:

- baseline: for each body, ``ZstdCompressor(level=3).compress`` and write it to its own new file
  (open, write, close) in one directory, nothing else;
- handler: each body as its ``pages`` envelope through ``decode_page`` and ``StorageHandler.handle``
  with a real ``BlobStore``, ``WarcWriter`` and RocksDB partition, ``on_tick`` and the index batch
  every 100 pages as the service loop does (on_tick waits for the cycle's blobs before the commit):
  one SHA-256 check of the body, blob (zstd, temporary file, rename), response and request WARC
  records (ISA-L gzip, block digest), journal line, history entry; once all on one thread
  ("1 thread") and once with each blob handed to a second thread while this one goes on to the next
  page's records, as the service runs (`storage.parallel_compression`, "2 threads").

The storage root is warm: all 65,536 shard directories are made and synced once before any clock
starts, as a store has them, old and clean, after its first few hundred thousand pages (see
`warm_root`: a file created in a directory made moments before costs the kernel about ten times
more, a one-off cost per directory). The baseline's directories are made and synced up front too.
Bodies differ from round to round, so no blob is ever found already there.

What is measured: MB/s of body bytes (uncompressed) per second, by WALL time and by CPU time
(``process_time``: every thread of this process, RocksDB's included). The baseline uses one core;
"2 threads" uses up to two (the handler's thread and the blob thread; zstd, ISA-L, hashlib and
file writes release the GIL). Each round runs baseline, floor, 1 thread and 2 threads back to back;
a result is the best of the rounds (a noisy neighbour costs a round, not the result), and the
ratio line also gives the median over rounds of each round's own ratio (paired in time, so slow
drifts of the machine's load cancel). The target is handler / baseline >= 0.6 by wall time with
the service's setting ("2 threads"): on a machine whose two cores are busy with other work the
second thread cannot run beside the first, so a last line gives what the two threads do on two
free cores, from the CPU time of the busier thread (the critical path; the baseline is
single-threaded, its CPU time is its own). The CPU line shows what a MB costs in all, beside the
"floor": the work no storage of this design avoids (the baseline, plus a gzip member of each body
and two SHA-256 passes), which bounds the single-core ratio. The last column is the rate of an
unchanged recrawl (revisit records only). Not a test: nothing asserts.

    python -m tests.bench.bench_storage [--rounds 5] [--pages 200]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import zstandard
from isal import isal_zlib

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from schemas.pages import FetchedPage
from schemas.serde import decode_page, encode_page
from storage.blobs import BLOB_DIR, BlobStore
from storage.handler import StorageHandler
from storage.index import TABLE
from storage.warc import WarcWriter
from streamcrawl.handler import Context, Record
from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Transaction

TARGET_RATIO = 0.6
T = TypeVar("T")
ZSTD_LEVEL = 3
COMMIT_EVERY = 100
WORDS = [
    "crawler",
    "frontier",
    "politeness",
    "partition",
    "offset",
    "broker",
    "replica",
    "leader",
    "segment",
    "index",
    "anchor",
    "graph",
    "edge",
    "vertex",
    "rank",
    "damping",
    "archive",
    "record",
    "digest",
    "revisit",
    "history",
    "blob",
    "storage",
    "volume",
    "shard",
    "article",
    "wikipedia",
    "edit",
    "revision",
    "category",
    "template",
    "citation",
    "reference",
    "museum",
    "river",
    "mountain",
    "science",
    "language",
    "village",
    "football",
    "election",
    "album",
    "species",
    "university",
    "railway",
]


def html_body(seed: int, size: int) -> bytes:
    rng = random.Random(seed)
    parts = [f"<!doctype html><html><head><title>Page {seed}</title></head><body>\n"]
    length = len(parts[0])
    while length < size:
        words = " ".join(rng.choices(WORDS, k=rng.randint(20, 60)))
        target = f"/wiki/{rng.choice(WORDS)}_{rng.randint(0, 10**6)}"
        paragraph = (
            f'<p class="c{rng.randint(0, 30)}">{words} <a href="{target}" '
            f'title="{rng.choice(WORDS)}">{rng.choice(WORDS)} {rng.randint(0, 9999)}</a>.</p>\n'
        )
        parts.append(paragraph)
        length += len(paragraph)
    return "".join(parts).encode()


def envelopes(bodies: list[bytes], round_id: str, fetched_at: int) -> list[bytes]:
    encoded = []
    for index, body in enumerate(bodies):
        page = FetchedPage(
            crawl_id="bench",
            url=f"https://en.wikipedia.org/wiki/Page_{round_id}_{index}",
            final_url=f"https://en.wikipedia.org/wiki/Page_{round_id}_{index}",
            lease_id=f"lease-{round_id}-{index}-{fetched_at}",
            depth=1,
            status=200,
            headers={"Content-Type": "text/html; charset=UTF-8", "Server": "bench"},
            content_type="text/html; charset=UTF-8",
            body_size=len(body),
            sha256=hashlib.sha256(body).hexdigest(),
            fetched_at=fetched_at,
        )
        encoded.append(encode_page(page, body))
    return encoded


def timed(work: Callable[[], None]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return time.process_time() - cpu, time.perf_counter() - wall


def baseline_round(bodies: list[bytes], directory: Path) -> tuple[float, float]:
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)

    def work() -> None:
        for index, body in enumerate(bodies):
            with (directory / f"{index}.zst").open("wb") as out:
                out.write(compressor.compress(body))

    return timed(work)


def floor_round(bodies: list[bytes], directory: Path) -> tuple[float, float]:
    """The work no storage of this design avoids, bare: the baseline plus a gzip member of each body
    appended to one file and two SHA-256 passes (the body check and the block digest)."""
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)

    def work() -> None:
        with (directory / "floor.warc.gz").open("ab") as warc:
            for index, body in enumerate(bodies):
                hashlib.sha256(body).digest()
                hashlib.sha256(body).digest()
                with (directory / f"{index}.zst").open("wb") as out:
                    out.write(compressor.compress(body))
                warc.write(isal_zlib.compress(body, 1, wbits=31))

    return timed(work)


class ThreadTimedExecutor(ThreadPoolExecutor):
    """One worker thread; the CPU time it spends on submitted work is summed in `busy`."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.busy = 0.0

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        def timed_work() -> T:
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.busy += time.thread_time() - started

        return super().submit(timed_work)


class HandlerRun:
    """A storage handler over a warm root and a fresh partition, driven like the service loop."""

    def __init__(self, root: Path, state: Path, executor: Executor | None) -> None:
        self.store = PartitionStore(state, (TABLE,), StoreOptions(StateSettings()))
        self.warc = WarcWriter(root, "bench", max_bytes=1000 * 1024 * 1024)
        blobs = BlobStore(root, "bench", level=ZSTD_LEVEL)
        self.handler = StorageHandler(blobs, self.warc, executor=executor)
        self.offset = 0

    def feed(self, messages: list[bytes]) -> None:
        cycle = Transaction(self.store)
        for raw in messages:
            page, body = decode_page(raw)
            child = Transaction(cycle)
            ctx = Context(partition=0, transaction=child, source=f"pages:0:{self.offset}")
            record = Record("pages", 0, self.offset, page.url, (page, body), [], 0)
            self.handler.handle(record, ctx)
            if ctx.dead_letter_reason is not None:
                raise RuntimeError(ctx.dead_letter_reason)
            child.merge_into_parent()
            self.offset += 1
            if self.offset % COMMIT_EVERY == 0:
                self.handler.on_tick(Context(partition=0, transaction=cycle))  # blobs settle
                self.store.write(cycle.writes, "changelog", None)
                cycle = Transaction(self.store)
        self.handler.on_tick(Context(partition=0, transaction=cycle))
        self.store.write(cycle.writes, "changelog", None)

    def close(self) -> None:
        self.warc.close()
        self.store.close()


def warm_root(root: Path) -> None:
    """Every shard directory (65,536), made and synced before any clock starts: a long-running
    store's directories are old and clean. Creating a file in a directory made moments before
    costs the kernel ten times more (its metadata is still in the journal's running transaction),
    which a real store pays once per directory, ever."""
    for first in range(256):
        for second in range(256):
            (root / BLOB_DIR / f"{first:02x}" / f"{second:02x}").mkdir(parents=True, exist_ok=True)
    os.sync()


Rates = dict[str, float]


def handler_round(
    bodies: list[bytes],
    scratch: Path,
    name: str,
    executor: ThreadTimedExecutor | None,
    best: Rates,
) -> None:
    total_mb = sum(len(b) for b in bodies) / 1e6
    run = HandlerRun(scratch / "root", scratch / f"state-{name}", executor)
    first = envelopes(bodies, name, 1_700_000_000_000)
    again = envelopes(bodies, name, 1_700_000_900_000)
    worker_before = executor.busy if executor is not None else 0.0
    main_before = time.thread_time()
    cpu, wall = timed(lambda: run.feed(first))
    main = time.thread_time() - main_before
    label = "parallel" if executor is not None else "inline"
    best[f"{label}_cpu"] = max(best.get(f"{label}_cpu", 0.0), total_mb / cpu)
    best[f"{label}_wall"] = max(best.get(f"{label}_wall", 0.0), total_mb / wall)
    best[f"{label}_last_wall"] = total_mb / wall
    if executor is not None:
        critical = max(main, executor.busy - worker_before)
        best["critical"] = max(best.get("critical", 0.0), total_mb / critical)
    _, wall = timed(lambda: run.feed(again))
    best["revisit_wall"] = max(best.get("revisit_wall", 0.0), total_mb / wall)
    run.close()
    shutil.rmtree(scratch / f"state-{name}")


def measure(
    size: int, scratch: Path, options: argparse.Namespace, executor: ThreadTimedExecutor
) -> tuple[Rates, list[float]]:
    """Best rates over the rounds, and each round's own 2-thread/baseline wall ratio."""
    best: Rates = {}
    paired: list[float] = []
    for round_id in range(options.rounds):  # the baseline's directories are old and clean too
        (scratch / f"base-{size}-{round_id}").mkdir()
    os.sync()
    for round_id in range(options.rounds):
        seeds = range(round_id * options.pages * 3, (round_id + 1) * options.pages * 3)
        bodies = [html_body(seed, size) for seed in seeds]
        third = options.pages
        baseline_bodies = bodies[:third]
        total_mb = sum(len(b) for b in baseline_bodies) / 1e6
        directory = scratch / f"base-{size}-{round_id}"
        cpu, wall = baseline_round(baseline_bodies, directory)
        best["base_cpu"] = max(best.get("base_cpu", 0.0), total_mb / cpu)
        best["base_wall"] = max(best.get("base_wall", 0.0), total_mb / wall)
        shutil.rmtree(directory)
        directory.mkdir()
        cpu, _ = floor_round(baseline_bodies, directory)
        best["floor_cpu"] = max(best.get("floor_cpu", 0.0), total_mb / cpu)
        shutil.rmtree(directory)
        handler_round(bodies[third : 2 * third], scratch, f"{round_id}-i", None, best)
        handler_round(bodies[2 * third :], scratch, f"{round_id}-p", executor, best)
        paired.append(best["parallel_last_wall"] / (total_mb / wall))
    return best, paired


def report(label: str, best: Rates, paired: list[float]) -> None:
    ratio = best["parallel_wall"] / best["base_wall"]
    verdict = "met" if ratio >= TARGET_RATIO else "NOT met"
    median = statistics.median(paired)
    base_cpu = best["base_cpu"]
    print(
        f"{label:>6} wall MB/s: baseline {best['base_wall']:.1f}, handler"
        f" {best['inline_wall']:.1f} (1 thread) {best['parallel_wall']:.1f} (2 threads):"
        f" ratio {ratio:.2f} (median of paired rounds {median:.2f}),"
        f" target >= {TARGET_RATIO} {verdict}"
    )
    print(
        f"{'':>6}  cpu MB/s: baseline {base_cpu:.1f}, floor {best['floor_cpu']:.1f}"
        f" ({best['floor_cpu'] / base_cpu:.2f}), handler {best['inline_cpu']:.1f}"
        f" ({best['inline_cpu'] / base_cpu:.2f}) 1 thread, {best['parallel_cpu']:.1f}"
        f" ({best['parallel_cpu'] / base_cpu:.2f}) 2 threads;"
        f" unchanged recrawl {best['revisit_wall']:.1f} wall"
    )
    print(
        f"{'':>6}  2 threads on two free cores (the busier thread's CPU time):"
        f" {best['critical']:.1f} MB/s, {best['critical'] / base_cpu:.2f} of the baseline"
    )


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    arguments.add_argument("--rounds", type=int, default=5)
    arguments.add_argument("--pages", type=int, default=200, help="bodies per round and path")
    arguments.add_argument("--dir", default=None, help="scratch directory (default: system tmp)")
    options = arguments.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-storage-", dir=options.dir))
    try:
        warm_root(scratch / "root")
        with ThreadTimedExecutor() as executor:
            for label, size in (("20 KB", 20_000), ("100 KB", 100_000)):
                report(label, *measure(size, scratch, options, executor))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
