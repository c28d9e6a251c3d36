"""The fetcher's read-ahead: fetch requests queued per host, under one bound on the total.

The service reads `fetch` ahead of what it can start, because politeness decides per host when a
request may go (DESIGN.md section 3, step 4). Requests wait here in FIFO order per host;
:meth:`HostQueues.pop_ready` hands out the next request of whichever host may start now (the one
ready longest first; hosts ready at the same moment take turns), so a host that is slow to answer
or has a long delay only ever holds back its own requests. The buffer is bounded: when
:attr:`HostQueues.full` the service pauses its partitions, and resumes them once
:attr:`HostQueues.can_resume`; requests already polled are always accepted, so the overshoot is at
most one poll batch. A host cannot fill the buffer by itself in practice because the frontier
leases each host only as many requests as its politeness lets be in flight.

A request whose lease deadline has passed is never handed out: the frontier has queued it again.
Such requests are collected by :meth:`HostQueues.drop_expired` so the service can mark their
offsets done without an outcome. Each pop looks at every queued host and request, which is cheap
for a buffer of a few thousand.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from fetcher.clock import Clock
from fetcher.politeness import Grant, Politeness


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
        self._queues: dict[str, deque[RequestT]] = {}
        self._size = 0
        self._expired: list[RequestT] = []

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
        self._politeness.note_request(
            request.host, request.crawl_id, request.politeness_delay_ms / 1000
        )
        self._queues.setdefault(request.host, deque()).append(request)
        self._size += 1

    def requeue(self, request: RequestT) -> None:
        """Put a popped request back at the head of its host's queue, e.g. after its grant was
        spent on the host's robots.txt."""
        queue = self._queues.setdefault(request.host, deque())
        queue.appendleft(request)
        self._size += 1

    def pop_ready(self) -> tuple[RequestT, Grant] | None:
        """The next request that may start now, with its politeness grant, or None.

        Expired requests met on the way are set aside for :meth:`drop_expired`.
        """
        now = self._clock.monotonic()
        self._set_aside_expired()
        # Stable sort: among hosts ready at the same time, the one served least recently goes
        # first, because serving a host moves it to the end of the dict (see _pop).
        ready = sorted(
            (
                (at, host)
                for host in self._queues
                if (at := self._politeness.next_allowed_at(host)) <= now
            ),
            key=lambda pair: pair[0],
        )
        for _, host in ready:
            grant = self._politeness.try_acquire(host)
            if grant is not None:
                return self._pop(host), grant
        return None

    def next_ready_at(self) -> float | None:
        """Earliest monotonic time a queued request may start (``math.inf``: only after a
        release), or None when nothing is queued."""
        return min((self._politeness.next_allowed_at(host) for host in self._queues), default=None)

    def drop_expired(self) -> list[RequestT]:
        """Remove and return every request whose lease deadline has passed."""
        self._set_aside_expired()
        expired, self._expired = self._expired, []
        return expired

    def remove_where(self, predicate: Callable[[RequestT], bool]) -> list[RequestT]:
        """Remove and return matching requests (a revoked partition's, for instance)."""
        removed: list[RequestT] = []
        for host in list(self._queues):
            kept: deque[RequestT] = deque()
            for request in self._queues[host]:
                (removed if predicate(request) else kept).append(request)
            self._replace(host, kept)
        self._expired = [request for request in self._expired if not predicate(request)]
        return removed

    def _set_aside_expired(self) -> None:
        now_ms = self._clock.now_ms()
        for host in list(self._queues):
            queue = self._queues[host]
            if any(request.deadline <= now_ms for request in queue):
                kept: deque[RequestT] = deque()
                for request in queue:
                    (self._expired if request.deadline <= now_ms else kept).append(request)
                self._replace(host, kept)

    def _replace(self, host: str, kept: deque[RequestT]) -> None:
        self._size += len(kept) - len(self._queues[host])
        if kept:
            self._queues[host] = kept
        else:
            del self._queues[host]

    def _pop(self, host: str) -> RequestT:
        queue = self._queues[host]
        request = queue.popleft()
        self._size -= 1
        del self._queues[host]
        if queue:
            self._queues[host] = queue
        return request
