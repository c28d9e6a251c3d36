"""The fetcher's handler: each FetchRequest is handed to the dispatcher and finished later.

The loop commits a request's offset only after the dispatcher produced its page and outcome
(`Deferred`), so offsets advance by the contiguous watermark while fast hosts finish before slow
ones (DESIGN section 4). Revoked partitions' queued requests are dropped; on shutdown the queued
ones are handed back uncommitted and only in-flight fetches are awaited.

The read-ahead bound: :meth:`FetcherHandler.accepting` turns False once the dispatcher's buffer
(requests submitted and not yet started, across every host and partition) reaches
``read_ahead``, and True again only once it drained below half of it, so the service pauses its
``fetch`` partitions while the buffer is full and resumes them when it drains, without ever
blocking the poll loop (requests already polled are always taken, so the buffer may pass the
bound by one poll's batch). The kernel asks it once a cycle (``BaseHandler.accepting``), on top of
its own per-partition bound, ``max_uncommitted_per_partition``.
"""

from __future__ import annotations

from typing import Protocol

from schemas.fetch import FetchRequest
from streamcrawl.handler import BaseHandler, Context, Deferred, Record


class RequestSink(Protocol):
    def submit(self, request: FetchRequest, deferred: Deferred, partition: int) -> None: ...

    def revoke(self, partitions: set[int]) -> None: ...

    def hand_back(self) -> None: ...

    @property
    def full(self) -> bool:
        """The read-ahead buffer reached its bound."""
        ...

    @property
    def can_resume(self) -> bool:
        """The read-ahead buffer drained enough to take more."""
        ...


class FetcherHandler(BaseHandler):
    def __init__(self, dispatcher: RequestSink) -> None:
        self._dispatcher = dispatcher
        self._holding = False
        """The buffer was full and has not drained to the resume mark since."""

    def handle(self, record: Record, ctx: Context) -> None:
        request: FetchRequest = record.value
        self._dispatcher.submit(request, ctx.defer(), record.partition)

    def accepting(self) -> bool:
        """Whether the service should keep its input partitions running (module docstring)."""
        if self._holding:
            self._holding = not self._dispatcher.can_resume
        else:
            self._holding = self._dispatcher.full
        return not self._holding

    def on_inputs_revoked(self, partitions: list[tuple[str, int]]) -> None:
        self._dispatcher.revoke({partition for _, partition in partitions})

    def on_stop(self) -> None:
        self._dispatcher.hand_back()
