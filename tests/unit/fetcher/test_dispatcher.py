"""The Dispatcher on its own thread against a local site: every Deferred finished exactly once,
whatever fails; one politeness note and one send stamp per request; the read-ahead observable."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from itertools import pairwise

import pytest
from aiohttp import web

import fetcher.dispatcher as dispatcher_module
from fetcher.dispatcher import Dispatcher, FetchTopics
from fetcher.politeness import Grant, Politeness
from fetcher.results import FetchResult
from fetcher.settings import FetcherSettings
from fetcher.wire import PageFields
from schemas.fetch import FetchRequest
from streamcrawl.clock import SystemClock
from streamcrawl.handler import Deferred
from tests.unit.fetcher.conftest import FAST_LIMITS
from tests.unit.fetcher.servers import AppServer, app_server

TOPICS = FetchTopics(pages="pages", outcomes="outcomes", links="links")
SETTINGS = FetcherSettings(allowed_networks=("127.0.0.0/8",), http=FAST_LIMITS)
WAIT_S = 10.0


def _site() -> web.Application:
    async def answer(request: web.Request) -> web.StreamResponse:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /private\n")
        return web.Response(text="<p>page</p>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    return app


def request_for(server: AppServer, path: str, *, delay_ms: int = 0) -> FetchRequest:
    return FetchRequest(
        crawl_id="crawl",
        url=server.url(path),
        host=f"127.0.0.1:{server.port}",
        depth=1,
        lease_id=path,
        deadline=SystemClock().now_ms() + 600_000,
        politeness_delay_ms=delay_ms,
    )


class Finishes:
    """Deferreds for a test, and every call of their finish callback."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.calls: list[Deferred] = []
        self._done = threading.Event()

    def deferred(self, index: int) -> Deferred:
        return Deferred(("fetch", 0, index), self._on_finish)

    def _on_finish(self, deferred: Deferred) -> None:
        self.calls.append(deferred)
        if len(self.calls) >= self.expected:
            self._done.set()

    async def wait(self) -> bool:
        return await asyncio.to_thread(self._done.wait, WAIT_S)

    def outcomes(self) -> list[dict[str, object]]:
        return [
            json.loads(output.value or b"")
            for deferred in self.calls
            for output in deferred.outputs
            if output.topic == TOPICS.outcomes
        ]


@contextlib.contextmanager
def running(settings: FetcherSettings = SETTINGS) -> Iterator[Dispatcher]:
    dispatcher = Dispatcher(settings, TOPICS, SystemClock())
    dispatcher.start()
    try:
        yield dispatcher
    finally:
        dispatcher.stop(WAIT_S)


async def _fetch_pages(paths: list[str], settings: FetcherSettings = SETTINGS) -> Finishes:
    """Submit one request per path to one host and wait until all are finished."""
    finishes = Finishes(len(paths))
    async with app_server(_site()) as server:
        with running(settings) as dispatcher:
            for index, path in enumerate(paths):
                dispatcher.submit(request_for(server, path), finishes.deferred(index), 0)
            assert await finishes.wait(), f"{len(finishes.calls)}/{len(paths)} finished"
            assert dispatcher.buffered == 0
    return finishes


def _assert_internal_errors(finishes: Finishes) -> None:
    assert len(finishes.calls) == finishes.expected, "each Deferred finished exactly once"
    for deferred in finishes.calls:
        assert [output.topic for output in deferred.outputs] == [TOPICS.outcomes]
    for outcome in finishes.outcomes():
        assert (outcome["kind"], outcome["reason"]) == ("retryable", "internal_error")


async def test_an_error_after_the_release_finishes_the_deferred(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The grant was released before encoding failed: releasing it again would raise, leaving the
    Deferred, and so its partition's watermark, stuck. The host's next request still gets its
    turn, so the grant was given back exactly once."""

    def broken_page_envelope(page: PageFields, body: bytes) -> bytes:
        raise RuntimeError("encoder broke")

    monkeypatch.setattr(dispatcher_module, "page_envelope", broken_page_envelope)
    _assert_internal_errors(await _fetch_pages(["/a", "/b"]))


async def test_an_error_in_the_result_builder_finishes_the_deferred(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken_page(result: FetchResult, request: FetchRequest) -> PageFields | None:
        raise ValueError("builder broke")

    monkeypatch.setattr(FetchResult, "page_fields", broken_page)
    _assert_internal_errors(await _fetch_pages(["/a", "/b"]))


async def test_an_error_before_the_release_gives_the_grant_back_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def broken_fetch(*args: object) -> FetchResult:
        raise RuntimeError("fetch broke")

    monkeypatch.setattr(dispatcher_module, "fetch", broken_fetch)
    _assert_internal_errors(await _fetch_pages(["/a", "/b"]))


async def test_a_failing_finish_callback_is_not_finished_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raised: list[Deferred] = []
    original = Deferred.finish

    def finish_then_raise(deferred: Deferred) -> None:
        original(deferred)
        if not raised:
            raised.append(deferred)
            raise RuntimeError("callback broke")

    monkeypatch.setattr(Deferred, "finish", finish_then_raise)
    finishes = await _fetch_pages(["/a", "/b"])
    assert len(finishes.calls) == 2
    assert [outcome["kind"] for outcome in finishes.outcomes()] == ["done", "done"]


async def test_one_politeness_note_and_one_send_stamp_per_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    noted: list[str] = []
    stamped: list[int] = []
    note_request, mark_sent = Politeness.note_request, Politeness.mark_sent

    def counting_note(politeness: Politeness, host: str, crawl_id: str, delay_s: float) -> None:
        noted.append(host)
        note_request(politeness, host, crawl_id, delay_s)

    def counting_mark(politeness: Politeness, grant: Grant) -> None:
        stamped.append(grant.grant_id)
        mark_sent(politeness, grant)

    monkeypatch.setattr(Politeness, "note_request", counting_note)
    monkeypatch.setattr(Politeness, "mark_sent", counting_mark)
    finishes = await _fetch_pages(["/a", "/private", "/b"])
    assert len(noted) == 3
    assert len(stamped) == len(set(stamped)) == 3, "robots.txt, /a and /b; /private was denied"
    kinds = sorted(str(outcome["kind"]) for outcome in finishes.outcomes())
    assert kinds == ["done", "done", "robots_denied"]


async def test_the_read_ahead_is_observable_from_the_service_thread() -> None:
    settings = SETTINGS.model_copy(update={"read_ahead": 4})
    finishes = Finishes(5)
    server = AppServer(port=9)  # never connected to: a new host waits its 60 s delay first
    with running(settings) as dispatcher:
        assert dispatcher.buffered == 0 and not dispatcher.full and dispatcher.can_resume
        for index in range(5):
            request = request_for(server, f"/{index}", delay_ms=60_000)
            dispatcher.submit(request, finishes.deferred(index), 0)
            assert dispatcher.buffered == index + 1
        assert dispatcher.full and not dispatcher.can_resume
        dispatcher.revoke({0})
        assert await finishes.wait()
        assert dispatcher.buffered == 0 and not dispatcher.full and dispatcher.can_resume
    # Handed back, never finished: the loop must not commit them, their new owner fetches them.
    assert all(deferred.abandoned and not deferred.outputs for deferred in finishes.calls)


async def test_a_url_without_an_origin_is_reported_not_retried() -> None:
    """It has no robots.txt to ask, and asking must not turn into a retryable internal error
    that the frontier would retry again and again."""
    finishes = Finishes(1)
    request = request_for(AppServer(port=9), "/").model_copy(update={"url": "ftp://example.com/x"})
    with running() as dispatcher:
        dispatcher.submit(request, finishes.deferred(0), 0)
        assert await finishes.wait()
    [outcome] = finishes.outcomes()
    assert (outcome["kind"], outcome["reason"]) == ("permanent", "unsupported_scheme")


async def test_a_hosts_requests_are_sent_a_delay_and_a_margin_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The timer wakes the dispatcher for each allowed time, and each gap counts from the moment
    the previous request went out (robots.txt first), plus the margin."""
    delay_s = 0.15
    sends: list[float] = []
    mark_sent = Politeness.mark_sent

    def recording_mark(politeness: Politeness, grant: Grant) -> None:
        sends.append(time.monotonic())
        mark_sent(politeness, grant)

    monkeypatch.setattr(Politeness, "mark_sent", recording_mark)
    finishes = Finishes(3)
    async with app_server(_site()) as server:
        with running() as dispatcher:
            for index in range(3):
                request = request_for(server, f"/{index}", delay_ms=round(delay_s * 1000))
                dispatcher.submit(request, finishes.deferred(index), 0)
            assert await finishes.wait()
    assert len(sends) == 4, "robots.txt and three pages"
    smallest = delay_s + max(0.005, 0.02 * delay_s) - 1e-6  # less float rounding
    assert all(later - earlier >= smallest for earlier, later in pairwise(sends))
