"""One timer per fetch for its two deadlines: the whole exchange, and the longest wait for data.

A fetch must die on time however the server trickles (DESIGN.md section 5): by a total deadline
(cut to the lease's), and sooner when nothing arrives for ``read_timeout_s``. aiohttp's
``sock_read`` moves a timer on every chunk the socket delivers, and a total deadline is one more
timer: two timer handles per response and one more per chunk (twice the CPU of the way below,
tests/bench/bench_fetcher_costs.py). :class:`FetchDeadline` keeps a single ``loop.call_at``
handle at the earlier of the two due times and only stamps the time of the latest progress; when
the handle fires early (there was progress) it is set again for the new due time, so a fetch that
completes in time costs one handle.

Connecting has its own bound (aiohttp's ``sock_connect``, ``connect_timeout_s``) inside these:
until the request is written, the read deadline counts from the fetch's start. Progress is: the
request written to the socket, the response's status and headers read, and each body chunk read.
So the header block must arrive within ``read_timeout_s`` of the request being sent however
slowly its bytes come (stricter than a per-socket-read timer, and meant: a server that needs that
long for a header block is one to stop), and the body may not pause longer than that between
chunks.

Expiry goes through :class:`asyncio.Timeout` (entered with no deadline of its own), which cancels
the fetch's task and turns the cancellation into ``TimeoutError`` at its block's end while an
outside cancellation stays a cancellation; :attr:`FetchDeadline.expired` then says which deadline
it was.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from fetcher.results import SentHook

Expiry = Literal["total", "read"]


class FetchDeadline:
    """The total and read deadlines of one fetch, on the running loop's clock."""

    __slots__ = (
        "_handle",
        "_loop",
        "_on_sent",
        "_progress_at",
        "_read_s",
        "_timeout",
        "_total_at",
        "expired",
    )

    def __init__(
        self,
        timeout: asyncio.Timeout,
        total_s: float,
        read_s: float,
        on_sent: SentHook | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._timeout = timeout
        self._progress_at = now = self._loop.time()
        self._total_at = now + total_s
        self._read_s = read_s
        self._on_sent = on_sent
        self.expired: Expiry | None = None
        self._handle: asyncio.TimerHandle | None = self._loop.call_at(self._due(), self._check)

    def progress(self) -> None:
        """Data moved: the read deadline counts from now."""
        self._progress_at = self._loop.time()

    def sent(self) -> None:
        """The request is on the socket: progress, and the fetch's ``on_sent`` is told."""
        self._progress_at = self._loop.time()
        if self._on_sent is not None:
            self._on_sent()

    def cancel(self) -> None:
        """The fetch ended: no deadline applies any more."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _due(self) -> float:
        return min(self._total_at, self._progress_at + self._read_s)

    def _check(self) -> None:
        due = self._due()
        now = self._loop.time()
        if due > now:
            self._handle = self._loop.call_at(due, self._check)
            return
        self._handle = None
        self.expired = "total" if self._total_at <= now else "read"
        self._timeout.reschedule(now)
