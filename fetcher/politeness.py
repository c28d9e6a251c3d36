"""Per-host politeness slots (DESIGN.md section 3, step 4), pure logic on an injected clock.

The fetcher owning a host's partition is that host's only rate owner. Like Scrapy's downloader
slots, each host has a :class:`_Slot`; a request may start when the host's slot and the global
limit have room and at least ``delay`` seconds have passed since the host's previous start:

    delay = max(min_delay_s,
                the delays of crawls with a request for the host in the last crawl_activity_s,
                robots.txt Crawl-delay (capped at 60 s),
                the adaptive delay below)

and not before a Retry-After the host sent (capped at 1 h). robots.txt fetches take grants like
page fetches, so they count as requests; a grant given back unused (:meth:`Politeness.cancel`, for
a URL robots.txt denies) does not count. A slot is created with its "previous start" set to now, so
the first request to a host this process has not served waits one delay: after a rebalance the
previous owner may just have fetched from it.

Adaptive delay (AutoThrottle-like, one rule per released grant):

- 429 or 503: the adaptive delay doubles, to at least ``backoff_floor_s`` and at most
  ``max_adaptive_delay_s``, and a Retry-After blocks the host until then.
- Otherwise the response's latency times ``latency_factor`` (2: we keep a host at most about
  half busy) is the target. A target above the adaptive delay replaces it at once (rising latency
  slows down the next request); a lower target after a successful response (status below 500)
  brings it halfway down. Errors without a status, and 5xx, never lower it. Timeouts report their
  elapsed time as latency, which raises it.

Nothing here sleeps: :meth:`Politeness.next_allowed_at` says when, the caller waits with its own
timer (or for a release, when the answer is ``math.inf``), then calls
:meth:`Politeness.try_acquire`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from fetcher.clock import Clock
from fetcher.errors import RETRY_AFTER_CAP_S

_OVERLOADED = frozenset({429, 503})


class PolitenessSettings(BaseModel):
    """Delays and concurrency limits; seconds throughout."""

    model_config = ConfigDict(frozen=True)

    min_delay_s: Annotated[float, Field(ge=0)] = 0.0
    robots_delay_cap_s: Annotated[float, Field(ge=0)] = 60.0
    retry_after_cap_s: Annotated[float, Field(ge=0)] = RETRY_AFTER_CAP_S
    per_host_concurrency: Annotated[int, Field(ge=1)] = 1
    global_concurrency: Annotated[int, Field(ge=1)] = 256
    crawl_activity_s: Annotated[float, Field(gt=0)] = 600.0
    """A crawl's delay counts for a host this long after its last request for it."""
    latency_factor: Annotated[float, Field(ge=0)] = 2.0
    backoff_floor_s: Annotated[float, Field(ge=0)] = 1.0
    max_adaptive_delay_s: Annotated[float, Field(ge=0)] = 60.0
    idle_slot_s: Annotated[float, Field(gt=0)] = 3600.0
    """:meth:`Politeness.prune` forgets slots unused this long."""


@dataclass(frozen=True)
class Grant:
    """Permission for one request to ``host``; give it back with :meth:`Politeness.release`."""

    host: str
    started_at: float
    grant_id: int
    previous_start: float
    """The host's previous start, restored if the grant is cancelled unused."""


@dataclass
class _Slot:
    """One host's politeness state."""

    last_start: float
    active: int = 0
    crawl_delays: dict[str, tuple[float, float]] = field(default_factory=dict)
    """crawl id -> (delay, monotonic time it was last seen for this host)."""
    robots_delay_s: float = 0.0
    adaptive_delay_s: float = 0.0
    blocked_until: float = 0.0
    forgotten: bool = False


class Politeness:
    """Owns every host slot of this fetcher and the global concurrency count."""

    def __init__(self, settings: PolitenessSettings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._slots: dict[str, _Slot] = {}
        self._active = 0
        self._outstanding: set[int] = set()
        self._ids = itertools.count(1)

    @property
    def active(self) -> int:
        """Grants given and not yet released, over all hosts."""
        return self._active

    def note_request(self, host: str, crawl_id: str, delay_s: float) -> None:
        """A request of ``crawl_id`` for ``host`` arrived, asking for at least ``delay_s``."""
        slot = self._slot(host)
        slot.forgotten = False
        slot.crawl_delays[crawl_id] = (max(delay_s, 0.0), self._clock.monotonic())

    def set_robots_delay(self, host: str, delay_s: float | None) -> None:
        """The Crawl-delay robots.txt gives for our user agent (None: none given)."""
        delay = 0.0 if delay_s is None else max(delay_s, 0.0)
        self._slot(host).robots_delay_s = min(delay, self._settings.robots_delay_cap_s)

    def delay(self, host: str) -> float:
        """The smallest gap, in seconds, between two request starts to ``host``."""
        slot = self._slots.get(host)
        if slot is None:
            return self._settings.min_delay_s
        now = self._clock.monotonic()
        active_crawls = (
            delay
            for delay, seen in slot.crawl_delays.values()
            if now - seen <= self._settings.crawl_activity_s
        )
        return max(
            self._settings.min_delay_s,
            slot.robots_delay_s,
            slot.adaptive_delay_s,
            max(active_crawls, default=0.0),
        )

    def next_allowed_at(self, host: str) -> float:
        """Monotonic time from which a request to ``host`` may start; ``math.inf`` while the host
        or the whole fetcher is at its concurrency limit (wait for a release instead)."""
        slot = self._slot(host)
        if (
            slot.active >= self._settings.per_host_concurrency
            or self._active >= self._settings.global_concurrency
        ):
            return math.inf
        return max(slot.last_start + self.delay(host), slot.blocked_until)

    def try_acquire(self, host: str) -> Grant | None:
        """A grant when a request to ``host`` may start now, else None."""
        now = self._clock.monotonic()
        if self.next_allowed_at(host) > now:
            return None
        slot = self._slots[host]
        grant = Grant(
            host=host, started_at=now, grant_id=next(self._ids), previous_start=slot.last_start
        )
        slot.active += 1
        slot.last_start = now
        self._active += 1
        self._outstanding.add(grant.grant_id)
        return grant

    def release(
        self, grant: Grant, *, status: int | None = None, retry_after_s: float | None = None
    ) -> None:
        """The request under ``grant`` ended with ``status`` (None: no response); adapt."""
        slot = self._return(grant)
        now = self._clock.monotonic()
        self._adapt(slot, status, max(now - grant.started_at, 0.0))
        if retry_after_s is not None:
            wait = min(max(retry_after_s, 0.0), self._settings.retry_after_cap_s)
            slot.blocked_until = max(slot.blocked_until, now + wait)
        self._drop_if_forgotten(grant.host, slot)

    def cancel(self, grant: Grant) -> None:
        """Give back a grant no request was sent under (robots.txt denied the URL, say): the
        host's previous start is restored unless another grant started since."""
        slot = self._return(grant)
        if slot.last_start == grant.started_at:
            slot.last_start = grant.previous_start
        self._drop_if_forgotten(grant.host, slot)

    def _return(self, grant: Grant) -> _Slot:
        if grant.grant_id not in self._outstanding:
            raise ValueError(f"grant {grant.grant_id} for {grant.host} was already released")
        self._outstanding.remove(grant.grant_id)
        self._active -= 1
        slot = self._slots[grant.host]
        slot.active -= 1
        return slot

    def _drop_if_forgotten(self, host: str, slot: _Slot) -> None:
        if slot.forgotten and slot.active == 0:
            del self._slots[host]

    def forget(self, host: str) -> None:
        """Drop a host whose partition was revoked; in-flight grants still count until released."""
        slot = self._slots.get(host)
        if slot is None:
            return
        if slot.active == 0:
            del self._slots[host]
        else:
            slot.forgotten = True

    def prune(self) -> int:
        """Forget idle slots (no grant, nothing recent, no Retry-After pending); return how many."""
        now = self._clock.monotonic()
        idle = [
            host
            for host, slot in self._slots.items()
            if slot.active == 0
            and now - slot.last_start > self._settings.idle_slot_s
            and slot.blocked_until <= now
        ]
        for host in idle:
            del self._slots[host]
        return len(idle)

    def _slot(self, host: str) -> _Slot:
        slot = self._slots.get(host)
        if slot is None:
            slot = self._slots[host] = _Slot(last_start=self._clock.monotonic())
        return slot

    def _adapt(self, slot: _Slot, status: int | None, latency_s: float) -> None:
        """The adaptive rule of the module docstring."""
        settings = self._settings
        if status in _OVERLOADED:
            doubled = max(slot.adaptive_delay_s * 2, settings.backoff_floor_s)
            slot.adaptive_delay_s = min(doubled, settings.max_adaptive_delay_s)
            return
        target = min(latency_s * settings.latency_factor, settings.max_adaptive_delay_s)
        if target > slot.adaptive_delay_s:
            slot.adaptive_delay_s = target
        elif status is not None and status < 500:
            slot.adaptive_delay_s = (slot.adaptive_delay_s + target) / 2
