"""Benchmark: reading the head of a crawl's queue on a host after many leases from it.

A release reads a crawl's queue on a host from the start of its keys
(`frontier.queues.crawl_queues`), and a lease deletes the head. Until RocksDB compacts them
away, the deleted keys stay as tombstones in front of the live ones, and every later seek steps
over them: a host drained steadily (one big site, as in a Wikipedia crawl) pays more for each
lease than the one before.

One run: a store with the kernel's default `StoreOptions` holds ``--entries`` queue entries of
one crawl on one host; the frontier's read path (`crawl_queues` on a `Table` over a fresh
`Transaction`, the head read, then a delete written as one cycle's write) leases the head again
and again. After every ``--every`` leases, the head read is timed (median of 21) and compared
with the same read on a fresh store holding just the entries still live (the baseline, measured
in the same run): the ratio is what the tombstones cost. Not a test: nothing asserts a duration.

    python -m tests.bench.bench_queue_head [--entries 200000] [--leases 40000] [--every 10000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from frontier.queues import QueuedUrl, crawl_queues, queue_key
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


def head(store: PartitionStore) -> bytes:
    """The release's read: the host's first crawl and the head of its queue."""
    table = Table(Transaction(store), "queue", None)
    for _, entries in crawl_queues(table, HOST):
        return next(entries)[0]
    raise AssertionError("the queue is empty")


def timed_head(store: PartitionStore) -> float:
    samples = []
    for _ in range(21):
        began = time.perf_counter()
        head(store)
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
    print(f"{args.entries:,} entries of one crawl on one host; a head read after n leases")
    print("leases   head read (ms)   fresh store, same live entries (ms)   ratio")
    began = time.perf_counter()
    for leased in range(1, args.leases + 1):
        store.write({"queue": {head(store): None}}, "changelog", None)
        if leased % args.every == 0:
            drained = timed_head(store)
            fresh_store = fill(root / f"fresh-{leased}", leased, args.entries)
            fresh = timed_head(fresh_store)
            fresh_store.close()
            print(
                f"{leased:>6,}   {drained * 1000:>14.3f}   {fresh * 1000:>35.3f}"
                f"   {drained / fresh:>5.0f}x",
                flush=True,
            )
    print(f"{args.leases:,} leases in {time.perf_counter() - began:.0f} s")
    store.close()


if __name__ == "__main__":
    main()
