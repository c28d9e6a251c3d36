"""fetch() against servers that try to hurt a crawler: bombs, endless bodies, huge headers, stalls.

Bodies are produced lazily as the client reads, so a "2 GB" response costs only what the fetcher
actually pulls before its cap stops it. Stalls wait on Events that never fire; the fetcher's
deadlines end them, and the server fixtures cancel the handlers at teardown.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import tracemalloc
from collections.abc import AsyncIterator

import pytest

from fetcher.decoding import SUPPORTED_ENCODINGS
from fetcher.errors import Reason
from fetcher.http import FetchLimits, fetch
from fetcher.results import FetchResult, FetchTarget
from fetcher.wire import outcome_value, page_envelope
from schemas.fetch import FetchRequest
from schemas.outcomes import FetchOutcome
from schemas.pages import MAX_BODY_BYTES, FetchedPage
from schemas.serde import decode, decode_page
from streamcrawl.clock import FakeClock
from tests.unit.fetcher.bombs import BOMBS, MIB
from tests.unit.fetcher.conftest import FAST_LIMITS, Sessions
from tests.unit.fetcher.servers import (
    RawHandler,
    RawServer,
    raw_server,
    response_head,
    send_chunked,
)

BOMB_WIRE_BYTES = 2 * MIB
"""Each bomb repeats a unit that decodes to 1 MiB of zeros until about this much is on the wire:
2 GiB decoded for gzip and deflate, 40 GiB for zstd. A read returns at most a few hundred KiB."""


def _bomb_server(coding: str, head: bytes, unit: bytes) -> RawHandler:
    async def units() -> AsyncIterator[bytes]:
        yield head
        for _ in range(BOMB_WIRE_BYTES // len(unit)):
            yield unit

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        headers = {"Content-Type": "text/html", "Content-Encoding": coding}
        writer.write(response_head(headers={**headers, "Transfer-Encoding": "chunked"}))
        await send_chunked(writer, units())

    return handler


@pytest.mark.parametrize("kind", sorted(BOMBS))
async def test_decompression_bomb_stops_at_the_body_cap(
    kind: str, sessions: Sessions, clock: FakeClock
) -> None:
    head, unit = BOMBS[kind]()
    coding = "deflate" if kind == "raw-deflate" else kind
    session = await sessions.open()
    async with raw_server(_bomb_server(coding, head, unit)) as server:
        result = await fetch(session, FetchTarget(server.url()), FAST_LIMITS, clock)
    assert (result.kind, result.truncated) == ("done", True)
    assert len(result.body) == MAX_BODY_BYTES
    assert result.body.count(0) == MAX_BODY_BYTES
    assert result.wire_bytes < BOMB_WIRE_BYTES // 2


@pytest.mark.skipif("br" not in SUPPORTED_ENCODINGS, reason="no brotli binding with output limits")
async def test_brotli_bomb_stops_at_the_body_cap(sessions: Sessions, clock: FakeClock) -> None:
    import brotli  # type: ignore[import-not-found, import-untyped, unused-ignore]  # noqa: PLC0415

    unit = brotli.compress(bytes(64 * MIB))
    session = await sessions.open()
    async with raw_server(_bomb_server("br", b"", unit)) as server:
        result = await fetch(session, FetchTarget(server.url()), FAST_LIMITS, clock)
    assert (result.kind, result.truncated, len(result.body)) == ("done", True, MAX_BODY_BYTES)


@pytest.mark.skipif("br" in SUPPORTED_ENCODINGS, reason="brotli is supported here")
async def test_brotli_without_a_binding_is_recorded_unsupported(
    sessions: Sessions, clock: FakeClock
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        headers = {"Content-Encoding": "br", "Content-Length": "4"}
        writer.write(response_head(headers=headers) + b"\x0b\x01\x80x")
        await writer.drain()

    session = await sessions.open()
    async with raw_server(handler) as server:
        result = await fetch(session, FetchTarget(server.url()), FAST_LIMITS, clock)
    assert (result.kind, result.status) == ("permanent", 200)
    assert result.failure is not None
    assert result.failure.reason is Reason.UNSUPPORTED_ENCODING
    assert b"br" not in server.requests[0].lower().split(b"accept-encoding:")[1].split(b"\r\n")[0]


async def test_two_gigabyte_chunked_body_stops_at_the_cap(
    sessions: Sessions, clock: FakeClock
) -> None:
    handler, sent = _endless_body({"Transfer-Encoding": "chunked"})

    session = await sessions.open()
    async with raw_server(handler) as server:
        request = _request_for(server, clock)
        result = await fetch(session, FetchTarget.from_request(request), FAST_LIMITS, clock)
    assert (result.kind, result.truncated) == ("done", True)
    assert len(result.body) == MAX_BODY_BYTES == result.wire_bytes
    assert sent[0] < MAX_BODY_BYTES + 64 * MIB
    page, body, outcome = _as_emitted(result, request)
    assert (page.truncated, page.body_size, len(body)) == (True, MAX_BODY_BYTES, MAX_BODY_BYTES)
    assert (outcome.kind, outcome.truncated, outcome.page_sent) == ("done", True, True)


def _endless_body(headers: dict[str, str]) -> tuple[RawHandler, list[int]]:
    """A handler answering 200 with ``headers`` and a 2 GiB chunked body, and the bytes it sent
    so far (in a one-item list the test reads)."""
    sent = [0]
    chunk = b"x" * 65536

    async def endless() -> AsyncIterator[bytes]:
        for _ in range(2 * 1024 * MIB // len(chunk)):
            sent[0] += len(chunk)
            yield chunk

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(response_head(headers=headers))
        await send_chunked(writer, endless())

    return handler, sent


def _request_for(server: RawServer, clock: FakeClock) -> FetchRequest:
    return FetchRequest(
        crawl_id="crawl",
        url=server.url(),
        host=f"127.0.0.1:{server.port}",
        depth=1,
        lease_id="lease",
        deadline=clock.now_ms() + 60_000,
    )


def _as_emitted(
    result: FetchResult, request: FetchRequest
) -> tuple[FetchedPage, bytes, FetchOutcome]:
    """The page and outcome as the dispatcher writes them to `pages` and `outcomes`, read back as
    the parser, storage and the frontier read them."""
    fields = result.page_fields(request)
    assert fields is not None, "a done fetch has a page"
    page, body = decode_page(page_envelope(fields, result.body))
    outcome_fields = result.outcome_fields(request, page_sent=True)
    outcome: FetchOutcome = decode(FetchOutcome, outcome_value(outcome_fields))
    return page, body, outcome


async def test_declared_oversize_is_permanent_when_truncation_is_off(
    sessions: Sessions, clock: FakeClock
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(response_head(headers={"Content-Length": str(2 * 1024 * MIB)}) + b"x" * 1024)
        await writer.drain()
        await asyncio.Event().wait()

    limits = FAST_LIMITS.model_copy(update={"truncate_oversized": False})
    session = await sessions.open(limits=limits)
    async with raw_server(handler) as server:
        result = await fetch(session, FetchTarget(server.url()), limits, clock)
    assert result.kind == "permanent"
    assert result.failure is not None and result.failure.reason is Reason.TOO_LARGE
    assert result.wire_bytes == 0


async def _fetch_raw(
    sessions: Sessions, clock: FakeClock, handler: RawHandler, limits: FetchLimits = FAST_LIMITS
) -> FetchResult:
    session = await sessions.open(limits=limits)
    async with raw_server(handler) as server:
        return await fetch(session, FetchTarget(server.url()), limits, clock)


async def test_one_megabyte_header_is_refused(sessions: Sessions, clock: FakeClock) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nX-Big: ")
        for _ in range(16):
            writer.write(b"a" * 65536)
            await writer.drain()
        writer.write(b"\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    result = await _fetch_raw(sessions, clock, handler)
    assert result.kind == "permanent"
    assert result.failure is not None and result.failure.reason is Reason.HEADERS_TOO_LARGE


async def test_too_many_headers_are_refused(sessions: Sessions, clock: FakeClock) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lines = b"".join(b"X-H%d: v\r\n" % index for index in range(1000))
        writer.write(b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 0\r\n\r\n")
        await writer.drain()

    result = await _fetch_raw(sessions, clock, handler)
    assert result.failure is not None and result.failure.reason is Reason.HEADERS_TOO_LARGE


async def test_header_block_over_the_total_cap_is_refused(
    sessions: Sessions, clock: FakeClock
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lines = b"".join(b"X-H%d: %s\r\n" % (index, b"v" * 8000) for index in range(100))
        writer.write(b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 0\r\n\r\n")
        await writer.drain()

    result = await _fetch_raw(sessions, clock, handler)
    assert result.kind == "permanent"
    assert result.failure is not None and result.failure.reason is Reason.HEADERS_TOO_LARGE


async def test_slow_loris_body_dies_at_the_total_deadline(
    sessions: Sessions, clock: FakeClock
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(response_head(headers={"Content-Length": "1000"}) + b"<")
        await writer.drain()
        await asyncio.Event().wait()

    limits = FAST_LIMITS.model_copy(update={"total_timeout_s": 0.3, "read_timeout_s": 30.0})
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await _fetch_raw(sessions, clock, handler, limits)
    assert loop.time() - started >= 0.25
    assert result.kind == "retryable"
    assert result.failure is not None and result.failure.reason is Reason.TIMEOUT


async def test_slow_loris_headers_die_at_the_total_deadline(
    sessions: Sessions, clock: FakeClock
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        await writer.drain()
        await asyncio.Event().wait()

    limits = FAST_LIMITS.model_copy(update={"total_timeout_s": 0.3, "read_timeout_s": 30.0})
    result = await _fetch_raw(sessions, clock, handler, limits)
    assert result.failure is not None and result.failure.reason is Reason.TIMEOUT


async def test_silent_server_hits_the_read_timeout(sessions: Sessions, clock: FakeClock) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()

    limits = FAST_LIMITS.model_copy(update={"total_timeout_s": 30.0, "read_timeout_s": 0.2})
    result = await _fetch_raw(sessions, clock, handler, limits)
    assert result.kind == "retryable"
    assert result.failure is not None and result.failure.reason is Reason.READ_TIMEOUT


async def test_body_cut_short_is_retryable(sessions: Sessions, clock: FakeClock) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(response_head(headers={"Content-Length": "1000"}) + b"only a little")
        await writer.drain()

    result = await _fetch_raw(sessions, clock, handler)
    assert result.kind == "retryable"
    assert result.failure is not None and result.failure.reason is Reason.INCOMPLETE_BODY


async def test_hang_up_without_response_is_retryable(sessions: Sessions, clock: FakeClock) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        return None

    result = await _fetch_raw(sessions, clock, handler)
    assert result.kind == "retryable"
    assert result.failure is not None and result.failure.reason is Reason.DISCONNECTED


async def test_not_http_is_a_bad_response(sessions: Sessions, clock: FakeClock) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        await writer.drain()

    result = await _fetch_raw(sessions, clock, handler)
    assert result.kind == "permanent"
    assert result.failure is not None and result.failure.reason is Reason.BAD_RESPONSE


async def test_corrupt_gzip_is_permanent(sessions: Sessions, clock: FakeClock) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = b"\x1f\x8b\x08\x00garbage garbage garbage"
        headers = {"Content-Encoding": "gzip", "Content-Length": str(len(body))}
        writer.write(response_head(headers=headers) + body)
        await writer.drain()

    result = await _fetch_raw(sessions, clock, handler)
    assert (result.kind, result.status) == ("permanent", 200)
    assert result.failure is not None and result.failure.reason is Reason.CORRUPT_ENCODING


async def test_refused_connection_is_retryable(sessions: Sessions, clock: FakeClock) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    session = await sessions.open()
    result = await fetch(session, FetchTarget(f"http://127.0.0.1:{port}/"), FAST_LIMITS, clock)
    assert result.kind == "retryable"
    assert result.failure is not None and result.failure.reason is Reason.CONNECTION_ERROR


def _plain_server(size: int) -> RawHandler:
    async def units() -> AsyncIterator[bytes]:
        for _ in range(size // 65536):
            yield b"x" * 65536

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(response_head(headers={"Transfer-Encoding": "chunked"}))
        await send_chunked(writer, units())

    return handler


@pytest.mark.parametrize("kind", [*sorted(BOMBS), "br", "plain"])
async def test_one_capped_fetch_holds_about_one_body(
    kind: str, sessions: Sessions, clock: FakeClock
) -> None:
    """The body grows in place and is handed on as it is: no joined, sliced or bytes() copy of
    it, so a fetch holds one body and one decoder call's output."""
    if kind == "plain":
        handler = _plain_server(MAX_BODY_BYTES + 4 * MIB)
    elif kind == "br":
        if "br" not in SUPPORTED_ENCODINGS:
            pytest.skip("no brotli binding with output limits")
        import brotli  # noqa: PLC0415

        handler = _bomb_server("br", b"", brotli.compress(bytes(64 * MIB)))
    else:
        handler = _bomb_server("deflate" if kind == "raw-deflate" else kind, *BOMBS[kind]())
    session = await sessions.open()
    async with raw_server(handler) as server:
        gc.collect()
        tracemalloc.start()
        try:
            result = await fetch(session, FetchTarget(server.url()), FAST_LIMITS, clock)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert (result.truncated, len(result.body)) == (True, MAX_BODY_BYTES)
    assert peak < 1.5 * MAX_BODY_BYTES, f"{peak / MAX_BODY_BYTES:.2f} bodies"


async def test_a_link_only_checked_is_done_at_its_headers_whatever_follows(
    sessions: Sessions, clock: FakeClock
) -> None:
    """`check_only` (a link outside the crawl's domains): a 2xx is done once its headers are in;
    the endless body behind them is never read, and no page goes out."""
    handler, sent = _endless_body(
        {"Transfer-Encoding": "chunked", "Content-Type": "application/pdf"}
    )

    session = await sessions.open()
    async with raw_server(handler) as server:
        request = _request_for(server, clock).model_copy(update={"check_only": True})
        result = await fetch(session, FetchTarget.from_request(request), FAST_LIMITS, clock)
    assert (result.kind, result.status, result.sha256, len(result.body)) == ("done", 200, None, 0)
    assert result.content_type == "application/pdf"  # any type: only the status was wanted
    assert sent[0] < 64 * MIB
    assert result.page_fields(request) is None
    outcome = result.outcome(request, page_sent=False)
    assert (outcome.kind, outcome.status, outcome.content_hash) == ("done", 200, None)
