"""The fetcher's read-ahead: fetch requests queued per host, under one bound on the total.

The service reads `fetch` ahead of what it can start, because politeness decides per host when a
request may go (DESIGN.md section 3, step 4). Requests wait here in FIFO order per host;
:meth:`HostQueues.pop_ready` hands out the next request of whichever host may start now (the one
ready longest first; hosts ready at the same moment take turns), so a host that is slow to answer
or has a long delay only ever holds back its own requests. The bound on the buffer is a signal,
not a wall: :attr:`HostQueues.full` says the service should pause its partitions and
:attr:`HostQueues.can_resume` that it may resume them (`fetcher.dispatcher.Dispatcher.full` says
the same, counting requests still on their way in); requests already polled are always accepted.
A host cannot fill the buffer by itself in practice because the frontier leases each host only as
many requests as its politeness lets be in flight.

A request whose lease deadline has passed is never handed out: the frontier has queued it again.
Such requests are collected by :meth:`HostQueues.drop_expired` so the service can mark their
offsets done without an outcome.

Two heaps keep every operation O(log n): one of requests by lease deadline, one of hosts by the
time politeness next lets them start, ties broken by when the host last had a turn. Both delete
lazily: a handed-out request's deadline entry, or a host's superseded entry, stays in its heap
until it reaches the top, and a heap is rebuilt when such entries outnumber the live ones. A
host's entry is recomputed when the host is first queued or served, and when politeness reports
that it may start sooner (a release, a cancel, a new delay; :meth:`Politeness.subscribe`); an
entry that has become too early (a send reported later than the grant, say) is corrected when it
reaches the top. The one change nobody reports is a crawl's delay lapsing after
``crawl_activity_s`` without requests: the host then waits for its old, longer delay until its
next turn or release.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from fetcher.politeness import Grant, Politeness
from streamcrawl.clock import Clock

_COMPACT_SLACK = 64
"""A heap is rebuilt once it holds more than twice its live entries plus this."""


class Leased(Protocol):
    """What the queues need from a request; FetchRequest has all of it."""

    @property
    def crawl_id(self) -> str: ...

    @property
    def host(self) -> str: ...

    @property
    def deadline(self) -> int:
        """Lease deadline, epoch milliseconds."""
        ...

    @property
    def politeness_delay_ms(self) -> int: ...


RequestT = TypeVar("RequestT", bound=Leased)

_HostKey = tuple[float, int, str]
"""A host's entry in the ready heap: (next allowed time, turn, host)."""


class _Entry(Generic[RequestT]):
    """One queued request; ``queued`` turns False when it leaves by any way."""

    __slots__ = ("queued", "request")

    def __init__(self, request: RequestT) -> None:
        self.request = request
        self.queued = True


class _HostQueue(Generic[RequestT]):
    """One host's requests in FIFO order (departed entries are skipped lazily)."""

    __slots__ = ("entries", "key", "live", "turn")

    def __init__(self, turn: int) -> None:
        self.entries: deque[_Entry[RequestT]] = deque()
        self.live = 0
        self.turn = turn
        """When the host last had a turn: first queued or last served."""
        self.key: _HostKey | None = None
        """The host's current entry in the ready heap."""


class HostQueues(Generic[RequestT]):
    """Per-host FIFO queues of leased requests, politeness-ordered, with a bounded total."""

    def __init__(
        self,
        politeness: Politeness,
        clock: Clock,
        capacity: int = 1000,
        resume_below: int | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be positive")
        self._politeness = politeness
        self._clock = clock
        self._capacity = capacity
        self._resume_below = capacity // 2 if resume_below is None else resume_below
        self._queues: dict[str, _HostQueue[RequestT]] = {}
        self._size = 0
        self._expired: list[RequestT] = []
        self._by_deadline: list[tuple[int, int, _Entry[RequestT]]] = []
        self._ready: list[_HostKey] = []
        self._order = itertools.count()
        politeness.subscribe(self._host_changed)

    def __len__(self) -> int:
        return self._size

    @property
    def full(self) -> bool:
        """The service should pause its fetch partitions."""
        return self._size >= self._capacity

    @property
    def can_resume(self) -> bool:
        """The service may resume paused partitions (hysteresis below the capacity)."""
        return self._size < self._resume_below

    def hosts(self) -> list[str]:
        """Hosts with queued requests."""
        return list(self._queues)

    def push(self, request: RequestT) -> None:
        """Queue a request behind its host's others and tell politeness its crawl's delay."""
        host = request.host
        self._politeness.note_request(host, request.crawl_id, request.politeness_delay_ms / 1000)
        self._enqueue(request, host, at_head=False)

    def requeue(self, request: RequestT) -> None:
        """Put a popped request back at the head of its host's queue, e.g. after its grant was
        spent on the host's robots.txt."""
        self._enqueue(request, request.host, at_head=True)

    def pop_ready(self) -> tuple[RequestT, Grant] | None:
        """The next request that may start now, with its politeness grant, or None.

        Expired requests met on the way are set aside for :meth:`drop_expired`.
        """
        self._set_aside_expired()
        if self._politeness.saturated:
            return None
        now = self._clock.monotonic()
        while (earliest := self._earliest()) is not None:
            (at, _, host), queue = earliest
            if at > now:
                return None
            grant = self._politeness.try_acquire(host)
            if grant is not None:
                return self._take(host, queue), grant
            self._rekey(host, queue, moved=True)  # politeness moved the host later
        return None

    def next_ready_at(self) -> float | None:
        """Earliest monotonic time a queued request may start (``math.inf``: only after a
        release), or None when nothing is queued."""
        while (earliest := self._earliest()) is not None:
            (at, _, host), queue = earliest
            if self._politeness.host_ready_at(host) == at:
                return math.inf if self._politeness.saturated else at
            self._rekey(host, queue, moved=True)
        return None

    def drop_expired(self) -> list[RequestT]:
        """Remove and return every request whose lease deadline has passed."""
        self._set_aside_expired()
        expired, self._expired = self._expired, []
        return expired

    def remove_where(self, predicate: Callable[[RequestT], bool]) -> list[RequestT]:
        """Remove and return matching requests (a revoked partition's, for instance)."""
        removed: list[RequestT] = []
        for host, queue in list(self._queues.items()):
            kept: deque[_Entry[RequestT]] = deque()
            for entry in queue.entries:
                if not entry.queued:
                    continue
                if predicate(entry.request):
                    entry.queued = False
                    removed.append(entry.request)
                else:
                    kept.append(entry)
            self._size -= queue.live - len(kept)
            queue.entries, queue.live = kept, len(kept)
            if not kept:
                del self._queues[host]
        self._expired = [request for request in self._expired if not predicate(request)]
        self._by_deadline = [item for item in self._by_deadline if item[2].queued]
        heapq.heapify(self._by_deadline)
        return removed

    # ----- internals -------------------------------------------------------------------------

    def _enqueue(self, request: RequestT, host: str, *, at_head: bool) -> None:
        entry = _Entry(request)
        queue = self._queues.get(host)
        if queue is None:
            queue = self._queues[host] = _HostQueue(next(self._order))
        if at_head:
            queue.entries.appendleft(entry)
        else:
            queue.entries.append(entry)
        queue.live += 1
        self._size += 1
        heapq.heappush(self._by_deadline, (request.deadline, next(self._order), entry))
        if queue.key is None:  # a host already queued is rekeyed by politeness when it changes
            self._rekey(host, queue)

    def _take(self, host: str, queue: _HostQueue[RequestT]) -> RequestT:
        """Hand out the host's first live request; the host goes behind the others of its time."""
        entries = queue.entries
        entry = entries.popleft()
        while not entry.queued:
            entry = entries.popleft()
        entry.queued = False
        queue.live -= 1
        self._size -= 1
        if queue.live == 0:
            del self._queues[host]
        else:
            queue.turn = next(self._order)
            self._rekey(host, queue)
        if len(self._by_deadline) > 2 * self._size + _COMPACT_SLACK:
            self._by_deadline = [item for item in self._by_deadline if item[2].queued]
            heapq.heapify(self._by_deadline)
        return entry.request

    def _host_changed(self, host: str) -> None:
        queue = self._queues.get(host)
        if queue is not None:
            self._rekey(host, queue)

    def _rekey(self, host: str, queue: _HostQueue[RequestT], *, moved: bool = False) -> None:
        """Give the host a ready-heap entry at its current next allowed time (a new one when
        ``moved``: its current entry was found wrong)."""
        at = self._politeness.host_ready_at(host)
        key = queue.key
        if not moved and key is not None and key[0] == at and key[1] == queue.turn:
            return
        queue.key = (at, queue.turn, host)
        heapq.heappush(self._ready, queue.key)
        if len(self._ready) > 2 * len(self._queues) + _COMPACT_SLACK:
            keys = (queued.key for queued in self._queues.values())
            self._ready = [key for key in keys if key is not None]
            heapq.heapify(self._ready)

    def _earliest(self) -> tuple[_HostKey, _HostQueue[RequestT]] | None:
        """The top of the ready heap and its host's queue. The key may be too early (a later
        start nobody reported), which the callers find out and correct."""
        while self._ready:
            key = self._ready[0]
            queue = self._queues.get(key[2])
            if queue is not None and queue.key is key:
                return key, queue
            heapq.heappop(self._ready)  # superseded, or the host has nothing queued
        return None

    def _set_aside_expired(self) -> None:
        heap = self._by_deadline
        if not heap:
            return
        now_ms = self._clock.now_ms()
        while heap and heap[0][0] <= now_ms:
            entry = heapq.heappop(heap)[2]
            if not entry.queued:
                continue
            entry.queued = False
            self._expired.append(entry.request)
            host = entry.request.host
            queue = self._queues[host]
            queue.live -= 1
            self._size -= 1
            if queue.live == 0:
                del self._queues[host]
            elif len(queue.entries) > 2 * queue.live + _COMPACT_SLACK:
                queue.entries = deque(queued for queued in queue.entries if queued.queued)
