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

A crawl's delay counts while it may still send requests for the host: crawl_activity_s (10 min)
after its last one, since a crawl whose other hosts came first looks the same as one that
stopped, except when the fetcher knows the crawl stopped (:meth:`Politeness.crawl_stopped`:
paused, done or cancelled in `crawls`). Its delay then stops counting at once, for every host: a
slow, careful crawl paused or cancelled does not hold a fast crawl of the same site to its pace
for ten minutes, and a late request of it (leased before it stopped) counts for nothing. A
paused crawl resumed counts again from its next request (:meth:`Politeness.crawl_started`).

A request's start is the moment it is granted, moved to the moment its headers are handed to the
socket when the HTTP layer reports that (:meth:`Politeness.mark_sent`): the robots.txt check and a
new connection's handshake then cannot eat into the gap the server sees. The reported moment gets
a margin of ``max(send_margin_s, send_margin_ratio * delay)`` (5 ms or 2 %; none when the delay is
0) for what lies between the socket and the server's clock (scheduling on either side), so the
smallest gap between two arrivals at the server is the delay, not the delay less a few ms.

That margin covers a few ms, not a server (or a machine) slow to take a request in: under load a
request can wait tens of ms between our socket and the moment the server notes it, and the next
one, sent a delay later, may wait less. So the gap also counts from the moment the response's
status line and headers arrived (:meth:`Politeness.release`, ``answered_at``), or from the release
when no response came: the server saw the request before it answered, so with one request at a
time per host the next one reaches it at least a delay after the previous one, however late it
noted either. The rate is then one request per delay plus response time (a ms or two locally).
A grant that sends more than one request (robots.txt following its redirects) waits the delay
between them too (:meth:`Politeness.hop_wait_s`).

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from fetcher.errors import RETRY_AFTER_CAP_S
from streamcrawl.clock import Clock

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
    send_margin_s: Annotated[float, Field(ge=0)] = 0.005
    send_margin_ratio: Annotated[float, Field(ge=0)] = 0.02
    """With ``send_margin_s``: added to a start reported by :meth:`Politeness.mark_sent` when the
    host's delay is above 0 (the larger of the two)."""


class Grant(NamedTuple):
    """Permission for one request to ``host``; give it back with :meth:`Politeness.release`.
    (A named tuple: one is made per request, and a frozen dataclass sets each field through
    ``object.__setattr__``.)"""

    host: str
    started_at: float
    grant_id: int
    previous_start: float
    """The host's previous start, restored if the grant is cancelled unused."""


@dataclass(slots=True)
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
    crawl_delay_s: float | None = None
    """The largest delay of the crawls active for this host, kept until a crawl's delay changes
    (None: recompute); the only costly input of :meth:`Politeness.delay`."""
    crawl_delay_until: float = 0.0
    """When the first crawl counted in ``crawl_delay_s`` may stop counting: recompute after it."""


HostListener = Callable[[str], None]
"""Called with a host whose next allowed time may have moved earlier."""


class Politeness:
    """Owns every host slot of this fetcher and the global concurrency count."""

    def __init__(self, settings: PolitenessSettings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._slots: dict[str, _Slot] = {}
        self._active = 0
        self._outstanding: dict[int, float] = {}
        """Grant id -> when its request started (the grant, or the send once reported)."""
        self._ids = itertools.count(1)
        self._listeners: list[HostListener] = []
        self._stopped: set[str] = set()
        """Crawls known to be paused, done or cancelled (:meth:`crawl_stopped`)."""
        # Read several times per request: kept as plain attributes.
        self._now = clock.monotonic
        self._min_delay_s = settings.min_delay_s
        self._per_host = settings.per_host_concurrency
        self._global = settings.global_concurrency

    @property
    def active(self) -> int:
        """Grants given and not yet released, over all hosts."""
        return self._active

    @property
    def saturated(self) -> bool:
        """The global concurrency limit is reached: no host may start until a release."""
        return self._active >= self._global

    def subscribe(self, listener: HostListener) -> None:
        """Call ``listener(host)`` whenever a host may become ready sooner than it said: a release,
        a cancel, a crawl's or robots.txt's new delay. Later starts need no call: whoever waits
        finds out when it asks again (:class:`fetcher.host_queues.HostQueues` keeps a heap of
        hosts by their next allowed time this way)."""
        self._listeners.append(listener)

    def _changed(self, host: str) -> None:
        for listener in self._listeners:
            listener(host)

    def note_request(self, host: str, crawl_id: str, delay_s: float) -> None:
        """A request of ``crawl_id`` for ``host`` arrived, asking for at least ``delay_s``."""
        slot = self._slot(host)
        slot.forgotten = False
        if crawl_id in self._stopped:
            return
        delay = max(delay_s, 0.0)
        previous = slot.crawl_delays.get(crawl_id)
        slot.crawl_delays[crawl_id] = (delay, self._clock.monotonic())
        if previous is None or previous[0] != delay:
            slot.crawl_delay_s = None
            self._changed(host)

    def crawl_stopped(self, crawl_id: str) -> None:
        """The crawl is paused, done or cancelled: its delay stops counting for every host now."""
        self._stopped.add(crawl_id)
        hosts = [host for host, slot in self._slots.items() if crawl_id in slot.crawl_delays]
        for host in hosts:
            slot = self._slots[host]
            del slot.crawl_delays[crawl_id]
            slot.crawl_delay_s = None
            self._changed(host)

    def crawl_started(self, crawl_id: str) -> None:
        """The crawl is active (new, resumed, or its id reused after a purge): its requests count
        again."""
        self._stopped.discard(crawl_id)

    def set_robots_delay(self, host: str, delay_s: float | None) -> None:
        """The Crawl-delay robots.txt gives for our user agent (None: none given)."""
        delay = 0.0 if delay_s is None else max(delay_s, 0.0)
        slot = self._slot(host)
        slot.robots_delay_s = min(delay, self._settings.robots_delay_cap_s)
        self._changed(host)

    def delay(self, host: str) -> float:
        """The smallest gap, in seconds, between two request starts to ``host``."""
        slot = self._slots.get(host)
        if slot is None:
            return self._settings.min_delay_s
        return self._delay_of(slot, self._clock.monotonic())

    def _delay_of(self, slot: _Slot, now: float) -> float:
        crawl_delay = slot.crawl_delay_s
        if crawl_delay is None or now > slot.crawl_delay_until:
            crawl_delay = self._crawl_delay(slot, now)
        # The largest of the four, compared in line: this runs several times per request, and
        # max() of four arguments costs more than the comparisons.
        delay, robots, adaptive = self._min_delay_s, slot.robots_delay_s, slot.adaptive_delay_s
        delay = robots if robots > delay else delay
        delay = adaptive if adaptive > delay else delay
        return crawl_delay if crawl_delay > delay else delay

    def _crawl_delay(self, slot: _Slot, now: float) -> float:
        """The largest delay of the crawls that asked for the host in the last crawl_activity_s
        (kept in the slot until one of them may lapse)."""
        activity = self._settings.crawl_activity_s
        active = [
            (delay, seen) for delay, seen in slot.crawl_delays.values() if now - seen <= activity
        ]
        crawl_delay = slot.crawl_delay_s = max((delay for delay, _ in active), default=0.0)
        slot.crawl_delay_until = min((seen + activity for _, seen in active), default=math.inf)
        return crawl_delay

    def next_allowed_at(self, host: str) -> float:
        """Monotonic time from which a request to ``host`` may start; ``math.inf`` while the host
        or the whole fetcher is at its concurrency limit (wait for a release instead)."""
        if self.saturated:
            return math.inf
        return self.host_ready_at(host)

    def host_ready_at(self, host: str) -> float:
        """:meth:`next_allowed_at` as far as ``host``'s own slot decides (the global limit aside:
        it is the same for every host, see :attr:`saturated`)."""
        slot = self._slots.get(host)
        return self._ready_at(self._slot(host) if slot is None else slot, self._now())

    def _ready_at(self, slot: _Slot, now: float) -> float:
        if slot.active >= self._per_host:
            return math.inf
        ready_at = slot.last_start + self._delay_of(slot, now)
        return ready_at if ready_at >= slot.blocked_until else slot.blocked_until

    def try_acquire(self, host: str) -> Grant | None:
        """A grant when a request to ``host`` may start now, else None."""
        now = self._now()
        if self._active >= self._global:
            return None
        slot = self._slots.get(host)
        if slot is None:
            slot = self._slot(host)
        if self._ready_at(slot, now) > now:
            return None
        grant = Grant(host, now, next(self._ids), slot.last_start)
        slot.active += 1
        slot.last_start = now
        self._active += 1
        self._outstanding[grant.grant_id] = now
        return grant

    def mark_sent(self, grant: Grant) -> None:
        """The request under ``grant`` was just handed to the socket: the host's gap counts from
        now (plus the margin of the module docstring), and its latency too. Ignored for a grant
        already given back."""
        if grant.grant_id not in self._outstanding:
            return
        now = self._now()
        self._outstanding[grant.grant_id] = now
        slot = self._slots[grant.host]
        delay = self._delay_of(slot, now)
        sent_at = now
        if delay > 0:
            sent_at += max(self._settings.send_margin_s, self._settings.send_margin_ratio * delay)
        slot.last_start = max(slot.last_start, sent_at)

    def release(
        self,
        grant: Grant,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
        answered_at: float | None = None,
    ) -> None:
        """The request under ``grant`` ended with ``status`` (None: no response); adapt. The
        host's next gap counts from ``answered_at`` (when the response's headers came) or, without
        one, from now, unless it already counts from later (module docstring)."""
        sent_at = self._outstanding.get(grant.grant_id, grant.started_at)
        slot = self._return(grant)
        now = self._now()
        counts_from = now if answered_at is None else answered_at
        slot.last_start = max(slot.last_start, counts_from)
        self._adapt(slot, status, max(now - sent_at, 0.0))
        if retry_after_s is not None:
            wait = min(max(retry_after_s, 0.0), self._settings.retry_after_cap_s)
            slot.blocked_until = max(slot.blocked_until, now + wait)
        self._drop_if_forgotten(grant.host, slot)
        self._changed(grant.host)

    def hop_wait_s(self, grant: Grant) -> float:
        """The request under ``grant`` was answered and the grant is about to send another (the
        next hop of a robots.txt redirect): seconds to wait first, the answer counting as the
        previous start as in :meth:`release`. Call it once per hop, right before it."""
        now = self._clock.monotonic()
        slot = self._slots.get(grant.host)
        if slot is None:
            return 0.0
        slot.last_start = max(slot.last_start, now)
        return max(slot.last_start + self._delay_of(slot, now), slot.blocked_until) - now

    def cancel(self, grant: Grant) -> None:
        """Give back a grant no request was sent under (robots.txt denied the URL, say): the
        host's previous start is restored unless another grant started since."""
        slot = self._return(grant)
        if slot.last_start == grant.started_at:
            slot.last_start = grant.previous_start
        self._drop_if_forgotten(grant.host, slot)
        self._changed(grant.host)

    def is_outstanding(self, grant: Grant) -> bool:
        """Whether ``grant`` is still to be given back (released or cancelled)."""
        return grant.grant_id in self._outstanding

    def _return(self, grant: Grant) -> _Slot:
        if grant.grant_id not in self._outstanding:
            raise ValueError(f"grant {grant.grant_id} for {grant.host} was already released")
        del self._outstanding[grant.grant_id]
        self._active -= 1
        slot = self._slots[grant.host]
        slot.active -= 1
        return slot

    def _drop_if_forgotten(self, host: str, slot: _Slot) -> None:
        if slot.forgotten and slot.active == 0:
            del self._slots[host]

    def known(self, host: str) -> bool:
        """Whether ``host`` has a slot (it was asked for and not forgotten or pruned since)."""
        return host in self._slots

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
