"""Time as an injected object, so politeness, Retry-After, robots TTLs and leases are testable.

Two readings, the same two the frontier's clock has (`frontier/clock.py`; services do not import
each other, so each keeps this small protocol): ``now_ms()`` for wall-clock instants that cross
processes (lease deadlines, fetch times, HTTP dates in Retry-After), and ``monotonic()`` for
intervals inside one process (politeness gaps, cache expiry). Nothing here sleeps: callers await
the times the policies return, with whatever timer they own.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of the two time readings every fetcher policy uses."""

    def now_ms(self) -> int:
        """Milliseconds since the epoch (UTC), as the schemas carry instants."""
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
