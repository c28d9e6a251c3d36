"""Waiting for RocksDB's background work: a benchmark side ends when its flushes and compactions do.

A side's CPU counts RocksDB's threads (``process_time``), and their work goes on after the last
write. Ending a side (or its turn) once none is running or queued charges it for all it set off
and none of what another side did; nothing forces a flush of what is still in the memtables.
"""

from __future__ import annotations

import time
from collections.abc import Callable

SETTLE_TIMEOUT_S = 300.0


def settle(background_work: Callable[[], int], where: str) -> None:
    """Wait until ``background_work`` (`streamcrawl.state.background_work` of a store's column
    families, or `PartitionStore.background_work`) counts nothing running or queued."""
    give_up = time.monotonic() + SETTLE_TIMEOUT_S
    while background_work():
        if time.monotonic() > give_up:
            raise SystemExit(f"RocksDB at {where} still busy after {SETTLE_TIMEOUT_S:.0f} s")
        time.sleep(0.005)
