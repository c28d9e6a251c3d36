"""Which offset of a partition may be committed when messages finish out of order.

A partition's messages start in offset order but may finish in any order (the fetcher finishes a
fast host before a slow one). Kafka commits a single position per partition, so we commit the
highest offset below which every started message is done: the contiguous watermark. Messages done
above a still-running one wait, uncommitted; their count is bounded, and the loop pauses the
partition when the bound is reached so memory and redelivery after a crash stay bounded too.
"""

from __future__ import annotations

import heapq


class PartitionOffsets:
    """Started and finished offsets of one partition."""

    def __init__(self, max_uncommitted: int) -> None:
        self._max_uncommitted = max_uncommitted
        self._running: set[int] = set()
        self._running_heap: list[int] = []
        self._done_above: list[int] = []
        self._last_started: int | None = None
        self._watermark: int | None = None
        """The next offset to commit: every offset below it is done."""

    def start(self, offset: int) -> None:
        if self._last_started is not None and offset <= self._last_started:
            raise ValueError(f"offset {offset} started after {self._last_started}")
        self._last_started = offset
        self._running.add(offset)
        heapq.heappush(self._running_heap, offset)

    def finish(self, offset: int) -> None:
        if offset not in self._running:
            raise ValueError(f"offset {offset} finished but was not running")
        self._running.discard(offset)
        heapq.heappush(self._done_above, offset)
        self._advance()

    def _advance(self) -> None:
        while self._running_heap and self._running_heap[0] not in self._running:
            heapq.heappop(self._running_heap)
        lowest_running = self._running_heap[0] if self._running_heap else None
        while self._done_above and (lowest_running is None or self._done_above[0] < lowest_running):
            self._watermark = heapq.heappop(self._done_above) + 1

    @property
    def committable(self) -> int | None:
        """The offset to commit (one past the last contiguous done message), or None."""
        return self._watermark

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def uncommitted_done(self) -> int:
        """Messages finished but above a running one, so not yet covered by the watermark."""
        return len(self._done_above)

    @property
    def full(self) -> bool:
        """True when the partition should be paused until older messages finish."""
        return self.uncommitted_done + self.running >= self._max_uncommitted
