"""The fetcher's handler: the read-ahead bound turns the intake off when the dispatcher's buffer is
full and on again only once it drained below half (no flapping at the bound)."""

from __future__ import annotations

from fetcher.handler import FetcherHandler
from schemas.fetch import FetchRequest
from streamcrawl.handler import Context, Deferred, Record

READ_AHEAD = 4


class Buffer:
    """A RequestSink keeping what it was given, with the dispatcher's full/can_resume rule."""

    def __init__(self) -> None:
        self.requests: list[FetchRequest] = []

    def submit(self, request: FetchRequest, deferred: Deferred, partition: int) -> None:
        self.requests.append(request)

    def revoke(self, partitions: set[int]) -> None:
        self.requests.clear()

    def hand_back(self) -> None:
        self.requests.clear()

    @property
    def full(self) -> bool:
        return len(self.requests) >= READ_AHEAD

    @property
    def can_resume(self) -> bool:
        return len(self.requests) < READ_AHEAD // 2


def _handle(handler: FetcherHandler, offset: int) -> None:
    request = FetchRequest(
        crawl_id="c",
        url=f"https://a.example/{offset}",
        host="a.example",
        depth=0,
        lease_id=str(offset),
        deadline=0,
    )
    record = Record("fetch", 0, offset, "a.example", request, [], 0)
    ticket = ("fetch", 0, offset)
    handler.handle(record, Context(partition=0, defer_factory=lambda: Deferred(ticket, print)))


def test_the_intake_stops_at_the_bound_and_resumes_below_half() -> None:
    buffer = Buffer()
    handler = FetcherHandler(buffer)
    seen = []
    for offset in range(READ_AHEAD + 1):  # a poll's records are all taken, past the bound too
        _handle(handler, offset)
        seen.append(handler.accepting())
    assert seen == [True, True, True, False, False]
    del buffer.requests[:3]
    assert not handler.accepting(), "two left: not below half of the bound yet"
    buffer.requests.pop()
    assert handler.accepting()
    _handle(handler, 9)
    assert handler.accepting(), "two again: on until the bound"
