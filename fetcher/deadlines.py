"""The two deadlines of every fetch, checked by one sweep per event loop instead of a timer each.

A fetch must die on time however the server trickles (DESIGN.md section 5): by a total deadline
(cut to the lease's), and sooner when nothing arrives for ``read_timeout_s``. aiohttp's
``sock_read`` moves a timer on every chunk the socket delivers, and a total deadline is one more
timer; even one timer per fetch (``loop.call_at`` and its cancel, inside an ``asyncio.timeout``)
cost about 6.5 us of a fetch's CPU (tests/bench/bench_fetcher_costs.py). Here a fetch's
:class:`FetchDeadline` only stamps the time of its latest progress, and :class:`DeadlineSweep`, one
per loop, looks at every running fetch each `SWEEP_S` while any runs: a fetch costs a set insert
and removal, and ends at most `SWEEP_S` after its deadline passed (the deadlines are seconds).

Connecting has its own bound (aiohttp's ``sock_connect``, ``connect_timeout_s``) inside these:
until the request is written, the read deadline counts from the fetch's start. Progress is: the
request written to the socket, the response's status and headers read, and each body chunk read.
So the header block must arrive within ``read_timeout_s`` of the request being sent however
slowly its bytes come (stricter than a per-socket-read timer, and meant: a server that needs that
long for a header block is one to stop), and the body may not pause longer than that between
chunks.

Expiry cancels the fetch's task; leaving the ``with`` block turns that cancellation into
``TimeoutError`` while a cancellation from outside stays a cancellation, exactly as
:class:`asyncio.Timeout` does (its ``cancelling``/``uncancel`` bookkeeping, without its timer);
:attr:`FetchDeadline.expired` then says which deadline it was.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Literal
from weakref import WeakKeyDictionary

from fetcher.results import SentHook

Expiry = Literal["total", "read"]

SWEEP_S = 0.05
"""How often the running fetches' deadlines are checked: the most a fetch outlives its deadline."""


class DeadlineSweep:
    """The running fetches of one event loop, checked every `SWEEP_S` while there are any."""

    __slots__ = ("_handle", "_live", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._live: set[FetchDeadline] = set()
        self._handle: asyncio.TimerHandle | None = None

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> DeadlineSweep:
        """The loop's sweep (made on its first fetch)."""
        sweep = _SWEEPS.get(loop)
        if sweep is None:
            sweep = _SWEEPS[loop] = cls(loop)
        return sweep

    def __len__(self) -> int:
        """How many running fetches it watches."""
        return len(self._live)

    @property
    def armed(self) -> bool:
        """Whether its timer is set (only while it watches a fetch, and one sweep after)."""
        return self._handle is not None

    def add(self, deadline: FetchDeadline) -> None:
        self._live.add(deadline)
        if self._handle is None:
            self._handle = self._loop.call_at(self._loop.time() + SWEEP_S, self._sweep)

    def discard(self, deadline: FetchDeadline) -> None:
        self._live.discard(deadline)

    def _sweep(self) -> None:
        now = self._loop.time()
        for deadline in [deadline for deadline in self._live if deadline.due_at() <= now]:
            self._live.discard(deadline)
            deadline.expire(now)
        self._handle = self._loop.call_at(now + SWEEP_S, self._sweep) if self._live else None


_SWEEPS: WeakKeyDictionary[asyncio.AbstractEventLoop, DeadlineSweep] = WeakKeyDictionary()


class FetchDeadline:
    """The total and read deadlines of one fetch, on the running loop's clock; a ``with`` block
    around the fetch (in its task) that they end with ``TimeoutError``."""

    __slots__ = (
        "_cancelling",
        "_loop",
        "_on_sent",
        "_progress_at",
        "_read_s",
        "_sweep",
        "_task",
        "_total_at",
        "expired",
    )

    def __init__(self, total_s: float, read_s: float, on_sent: SentHook | None = None) -> None:
        self._loop = loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("a fetch's deadlines apply inside a task")
        self._task = task
        self._cancelling = 0
        self._sweep = DeadlineSweep.of(loop)
        self._progress_at = now = loop.time()
        self._total_at = now + total_s
        self._read_s = read_s
        self._on_sent = on_sent
        self.expired: Expiry | None = None

    def __enter__(self) -> FetchDeadline:
        self._cancelling = self._task.cancelling()
        self._sweep.add(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._sweep.discard(self)
        # After an expiry our cancel request is taken back (always); the cancellation is a
        # timeout only if nobody else asked for one.
        if (
            self.expired is not None
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from exc

    def progress(self) -> None:
        """Data moved: the read deadline counts from now."""
        self._progress_at = self._loop.time()

    def sent(self) -> None:
        """The request is on the socket: progress, and the fetch's ``on_sent`` is told."""
        self._progress_at = self._loop.time()
        if self._on_sent is not None:
            self._on_sent()

    def due_at(self) -> float:
        """When the earlier of the two deadlines passes, given the progress so far."""
        total_at, read_at = self._total_at, self._progress_at + self._read_s
        return total_at if total_at < read_at else read_at

    def expire(self, now: float) -> None:
        """A deadline passed (the sweep saw it): the fetch's task is cancelled."""
        self.expired = "total" if self._total_at <= now else "read"
        self._task.cancel()
