"""The collector's settings of every service, applied once it has started (`run_service`).

Handling a message allocates many short-lived containers (decoded records, keys, outputs; a fetch
also aiohttp's request and response objects), almost all freed by reference counting, while a
service keeps long-lived objects by the thousand (read-ahead requests, node caches, host heads).
At the default thresholds the young generation is collected every 700 net allocations and the
older ones re-scan those long-lived objects: about a fifth of the fetcher's dispatcher CPU
(tests/bench/bench_fetcher.py: 540 against 417 us per page, under load), and the link graph's
reverse ingest took 3.7 CPU s against 3.0 with these thresholds. Cycles are still collected, in
larger batches.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

GC_THRESHOLDS = (20_000, 20, 20)
"""Young collections every 20,000 net allocations instead of 700."""


def settle_heap() -> None:
    """Move everything alive now (modules, schemas, sessions, tables) out of the collector's sight
    for good (``gc.freeze``) and collect in larger batches (`GC_THRESHOLDS`)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@contextlib.contextmanager
def settled_heap() -> Iterator[None]:
    """`settle_heap` for the block only, the interpreter's settings again after it (benchmarks
    that run a service's code under its collector settings beside a baseline under the defaults)."""
    thresholds = gc.get_threshold()
    settle_heap()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
