"""A fetch's deadlines (`fetcher.deadlines`): a body that keeps coming outlives the read deadline,
a pause longer than it ends the fetch, the total deadline ends everything, a cancellation from
outside stays a cancellation, and one sweep per loop watches every running fetch."""

from __future__ import annotations

import asyncio

import pytest

from fetcher.deadlines import SWEEP_S, DeadlineSweep, FetchDeadline
from fetcher.errors import Reason
from fetcher.http import FetchLimits, fetch
from fetcher.results import FetchResult, FetchTarget
from streamcrawl.clock import FakeClock
from tests.unit.fetcher.conftest import FAST_LIMITS, Sessions
from tests.unit.fetcher.servers import RawHandler, raw_server, response_head

CHUNKS = 6


def _trickling(pause_s: float, *, stall_after: int | None = None) -> RawHandler:
    """A body of CHUNKS chunks, ``pause_s`` apart; after ``stall_after`` of them, silence."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(response_head(headers={"Content-Length": str(CHUNKS)}))
        for index in range(CHUNKS):
            if index == stall_after:
                await asyncio.Event().wait()
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(pause_s)

    return handler


async def _fetch(
    sessions: Sessions, handler: RawHandler, limits: FetchLimits
) -> tuple[float, FetchResult]:
    session = await sessions.open(limits=limits)
    loop = asyncio.get_running_loop()
    async with raw_server(handler) as server:
        started = loop.time()
        result = await fetch(session, FetchTarget(server.url()), limits, FakeClock())
    return loop.time() - started, result


async def test_a_body_that_keeps_coming_outlives_the_read_deadline(sessions: Sessions) -> None:
    limits = FAST_LIMITS.model_copy(update={"read_timeout_s": 0.25, "total_timeout_s": 5.0})
    elapsed, result = await _fetch(sessions, _trickling(0.1), limits)
    assert result.kind == "done", result.failure
    assert result.body == b"x" * CHUNKS
    assert elapsed > limits.read_timeout_s, "the timer was moved on by the chunks"


async def test_a_pause_longer_than_the_read_deadline_ends_the_fetch(sessions: Sessions) -> None:
    limits = FAST_LIMITS.model_copy(update={"read_timeout_s": 0.3, "total_timeout_s": 5.0})
    elapsed, result = await _fetch(sessions, _trickling(0.05, stall_after=3), limits)
    assert result.failure is not None and result.failure.reason is Reason.READ_TIMEOUT
    assert 0.3 <= elapsed < 2.0


async def test_the_total_deadline_ends_a_body_that_keeps_coming(sessions: Sessions) -> None:
    limits = FAST_LIMITS.model_copy(update={"read_timeout_s": 0.25, "total_timeout_s": 0.35})
    elapsed, result = await _fetch(sessions, _trickling(0.1), limits)
    assert result.failure is not None and result.failure.reason is Reason.TIMEOUT
    assert 0.35 <= elapsed < 2.0


async def test_a_cancellation_from_outside_is_not_a_timeout(sessions: Sessions) -> None:
    limits = FAST_LIMITS.model_copy(update={"read_timeout_s": 5.0, "total_timeout_s": 5.0})
    session = await sessions.open(limits=limits)
    async with raw_server(_trickling(0.05, stall_after=1)) as server:
        task = asyncio.create_task(fetch(session, FetchTarget(server.url()), limits, FakeClock()))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_an_expired_total_deadline_ends_its_block_with_a_timeout() -> None:
    with pytest.raises(TimeoutError), FetchDeadline(0.05, 5.0) as deadline:
        await asyncio.sleep(5)
    assert deadline.expired == "total"


async def test_a_block_without_progress_ends_at_the_read_deadline() -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError), FetchDeadline(5.0, 0.1) as deadline:
        await asyncio.sleep(5)
    assert deadline.expired == "read"
    assert 0.1 <= loop.time() - started < 0.1 + SWEEP_S + 1.0


async def test_progress_keeps_a_block_alive_past_its_read_deadline() -> None:
    loop = asyncio.get_running_loop()
    with FetchDeadline(5.0, 0.15) as deadline:
        until = loop.time() + 0.5
        while loop.time() < until:
            await asyncio.sleep(0.02)
            deadline.progress()
    assert deadline.expired is None


async def test_a_cancellation_from_outside_at_the_moment_of_expiry_stays_a_cancellation() -> None:
    async def fetching() -> None:
        with FetchDeadline(5.0, 5.0) as deadline:
            deadline.expire(asyncio.get_running_loop().time())  # as the sweep does
            this = asyncio.current_task()
            assert this is not None
            this.cancel()  # and somebody else, before the task runs again
            await asyncio.sleep(1)

    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(fetching())


async def test_many_fetches_share_one_sweep_that_stops_when_they_end() -> None:
    loop = asyncio.get_running_loop()
    sweep = DeadlineSweep.of(loop)
    expired: list[str | None] = []

    async def stalled(read_s: float) -> None:
        deadline = FetchDeadline(5.0, read_s)
        try:
            with deadline:
                await asyncio.sleep(5)
        except TimeoutError:
            expired.append(deadline.expired)

    tasks = [asyncio.create_task(stalled(0.05 + index / 1000)) for index in range(100)]
    await asyncio.sleep(0)
    assert len(sweep) == 100 and sweep.armed
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=5.0)
    assert expired == ["read"] * 100
    assert len(sweep) == 0
    deadline_at = loop.time() + 5.0
    while sweep.armed and loop.time() < deadline_at:  # one more sweep finds nothing and stops
        await asyncio.sleep(SWEEP_S / 2)
    assert not sweep.armed
