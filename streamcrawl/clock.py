"""Time as an injected object, so leases, retries, politeness, Retry-After and TTLs are testable.

Two readings: ``now_ms()`` for wall-clock instants that cross processes (lease deadlines, retry due
times, fetch times, HTTP dates in epoch milliseconds, as the schemas carry them), and
``monotonic()`` for intervals inside one process (politeness gaps, cache expiry). Policies take the
instant they need as an argument; only their thin wrappers read a clock. Nothing here sleeps.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of the two time readings every policy uses."""

    def now_ms(self) -> int:
        """Milliseconds since the epoch (UTC), for instants stored in state or sent on topics."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards; only differences mean anything."""
        ...


class SystemClock:
    """The real clocks."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that moves only when a test tells it to; both readings advance together."""

    def __init__(self, now_ms: int = 1_700_000_000_000, monotonic: float = 1000.0) -> None:
        self._now_ms = now_ms
        self._monotonic = monotonic

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        """Move both readings forward by ``seconds``; going backwards is a test bug."""
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._monotonic += seconds
        self._now_ms += round(seconds * 1000)

    def advance_ms(self, milliseconds: int) -> None:
        """Move both readings forward by whole milliseconds."""
        if milliseconds < 0:
            raise ValueError("a clock does not go backwards")
        self._now_ms += milliseconds
        self._monotonic += milliseconds / 1000
