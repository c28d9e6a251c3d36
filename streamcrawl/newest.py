"""The most recent few of many records read in any order, in memory that does not grow."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Newest(Generic[T]):
    """The ``size`` most recent items by ``time_of``, whatever the order they were read in
    (partition by partition): a heap of that size, so memory does not grow with the topic."""

    def __init__(self, size: int, time_of: Callable[[T], int]) -> None:
        self._size = size
        self._time_of = time_of
        self._heap: list[tuple[int, int, T]] = []
        self._read = 0

    def add(self, item: T) -> None:
        self._read += 1
        entry = (self._time_of(item), self._read, item)
        if len(self._heap) < self._size:
            heapq.heappush(self._heap, entry)
        elif self._heap and entry[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, entry)

    def oldest_first(self) -> list[T]:
        return [item for _, _, item in sorted(self._heap, key=lambda entry: entry[:2])]
