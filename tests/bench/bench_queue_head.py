"""Benchmark: reading the head of a crawl's queue on a host after many leases from it.

A lease deletes the head of a crawl's queue on a host. Until RocksDB compacts them away, the
deleted keys stay as tombstones in front of the live ones, and a seek from the start of the
queue steps over all of them: a host drained steadily (one big site, as in a Wikipedia crawl)
would pay more for each lease than for the one before. So a release reads each crawl's queue
from its floor, a key kept in memory below which the queue holds nothing
(`frontier.session.PartitionMemory.queue_floors`).

One run: a store with the kernel's default `StoreOptions` holds ``--entries`` queue entries of
one crawl on one host, leased from the head again and again (the head read from the floor, then
a delete written as one cycle's write, as the release does). After every ``--every`` leases,
the head read is timed (median of 21) three ways: from the floor (the release's read), from the
start of the queue (`frontier.queues.crawl_queues`, the read before floors, still the safety net
when memory knows no crawl on a host), and on a fresh store holding just the entries still live
(the baseline, measured in the same run). Not a test: nothing asserts a duration.

    python -m tests.bench.bench_queue_head [--entries 200000] [--leases 40000] [--every 10000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from frontier.queues import QueuedUrl, crawl_queue_prefix, crawl_queues, queue_key
from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Table, Transaction

HOST = "en.wikipedia.org"
CRAWL = "wiki"
PRIORITY = bytes([1, 244, 0, 0, 0, 1, 0, 0])


def entry(n: int) -> tuple[bytes, bytes]:
    url = f"https://{HOST}/wiki/Article_{n}"
    return queue_key(HOST, CRAWL, PRIORITY, n), QueuedUrl(CRAWL, url, 1).encode()


def fill(path: Path, first: int, last: int) -> PartitionStore:
    store = PartitionStore(path, ("queue",), StoreOptions(StateSettings()))
    for start in range(first, last, 10_000):
        batch = dict(entry(n) for n in range(start, min(start + 10_000, last)))
        store.write({"queue": dict(batch)}, "changelog", None)
    return store


def head_from_start(store: PartitionStore) -> bytes:
    """The host's first crawl and the head of its queue, found from the start of the host's keys."""
    table = Table(Transaction(store), "queue", None)
    for _, entries in crawl_queues(table, HOST):
        return next(entries)[0]
    raise AssertionError("the queue is empty")


def head_from_floor(store: PartitionStore, floor: bytes) -> bytes:
    """The release's read: the crawl's queue from its floor."""
    table = Table(Transaction(store), "queue", None)
    return next(table.scan(crawl_queue_prefix(HOST, CRAWL), floor))[0]


def timed(read: Callable[[], bytes]) -> float:
    samples = []
    for _ in range(21):
        began = time.perf_counter()
        read()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--leases", type=int, default=40_000)
    parser.add_argument("--every", type=int, default=10_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-queue-head-"))
    store = fill(root / "drained", 0, args.entries)
    print(f"{args.entries:,} entries of one crawl on one host; a head read after n leases (ms)")
    print("leases   from the floor   from the start   fresh store   floor / fresh   start / fresh")
    began = time.perf_counter()
    floor = crawl_queue_prefix(HOST, CRAWL)
    for leased in range(1, args.leases + 1):
        head = head_from_floor(store, floor)
        store.write({"queue": {head: None}}, "changelog", None)
        floor = head  # the next head is past it: nothing live is left below
        if leased % args.every == 0:
            from_floor = timed(partial(head_from_floor, store, floor))
            from_start = timed(partial(head_from_start, store))
            fresh_store = fill(root / f"fresh-{leased}", leased, args.entries)
            fresh = timed(partial(head_from_start, fresh_store))
            fresh_store.close()
            print(
                f"{leased:>6,}   {from_floor * 1000:>14.3f}   {from_start * 1000:>14.3f}"
                f"   {fresh * 1000:>11.3f}   {from_floor / fresh:>12.1f}x"
                f"   {from_start / fresh:>12.0f}x",
                flush=True,
            )
    print(f"{args.leases:,} leases from the floor in {time.perf_counter() - began:.0f} s")
    store.close()


if __name__ == "__main__":
    main()
