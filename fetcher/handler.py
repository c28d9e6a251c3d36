"""The fetcher's handler: each FetchRequest is handed to the dispatcher and finished later.

The loop commits a request's offset only after the dispatcher produced its page and outcome
(`Deferred`), so offsets advance by the contiguous watermark while fast hosts finish before slow
ones (DESIGN section 4). Revoked partitions' queued requests are dropped; on shutdown the queued
ones are handed back uncommitted and only in-flight fetches are awaited.
"""

from __future__ import annotations

from typing import Protocol

from schemas.fetch import FetchRequest
from streamcrawl.handler import BaseHandler, Context, Deferred, Record


class RequestSink(Protocol):
    def submit(self, request: FetchRequest, deferred: Deferred, partition: int) -> None: ...

    def revoke(self, partitions: set[int]) -> None: ...

    def hand_back(self) -> None: ...


class FetcherHandler(BaseHandler):
    def __init__(self, dispatcher: RequestSink) -> None:
        self._dispatcher = dispatcher

    def handle(self, record: Record, ctx: Context) -> None:
        request: FetchRequest = record.value
        self._dispatcher.submit(request, ctx.defer(), record.partition)

    def on_inputs_revoked(self, partitions: list[tuple[str, int]]) -> None:
        self._dispatcher.revoke({partition for _, partition in partitions})

    def on_stop(self) -> None:
        self._dispatcher.hand_back()
