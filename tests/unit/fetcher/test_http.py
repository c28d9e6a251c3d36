"""fetch() against a well-behaved local server: statuses, redirects, conditions, content types."""

from __future__ import annotations

import asyncio
import email.utils
import gzip
import hashlib
from collections import Counter

from aiohttp import web

from fetcher.decoding import ACCEPT_ENCODING
from fetcher.errors import Reason
from fetcher.http import accepts, fetch
from fetcher.results import FetchResult, FetchTarget
from schemas.fetch import FetchRequest
from streamcrawl.clock import FakeClock
from tests.unit.fetcher.conftest import FAST_LIMITS, Sessions
from tests.unit.fetcher.servers import app_server, raw_server, response_head

ETAG = '"v1"'
LAST_MODIFIED = "Tue, 14 Nov 2023 22:13:20 GMT"


def _site(hits: Counter[str], seen_headers: list[dict[str, str]]) -> web.Application:
    """Routes for the tests below; every hit is counted by path."""

    async def record(request: web.Request) -> None:
        hits[request.path] += 1
        seen_headers.append(dict(request.headers))

    async def page(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.Response(body=b"<html>hello</html>", content_type="text/html")

    async def moved(request: web.Request) -> web.StreamResponse:
        await record(request)
        location = request.query.get("to", "../new/?utm_source=x&b=2&a=1")
        return web.Response(
            status=int(request.query.get("status", "301")), headers={"Location": location}
        )

    async def no_location(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.Response(status=302)

    async def status(request: web.Request) -> web.StreamResponse:
        await record(request)
        headers = {"Retry-After": request.query["retry"]} if "retry" in request.query else {}
        return web.Response(status=int(request.match_info["code"]), headers=headers)

    async def conditional(request: web.Request) -> web.StreamResponse:
        await record(request)
        if (
            request.headers.get("If-None-Match") == ETAG
            and request.headers.get("If-Modified-Since") == LAST_MODIFIED
        ):
            return web.Response(status=304, headers={"ETag": ETAG})
        return web.Response(
            body=b"fresh",
            content_type="text/html",
            headers={"ETag": ETAG, "Last-Modified": LAST_MODIFIED},
        )

    async def typed(request: web.Request) -> web.StreamResponse:
        await record(request)
        response = web.StreamResponse(headers={"Content-Type": request.query["type"]})
        await response.prepare(request)
        for _ in range(64):
            await response.write(b"%PDF" * 16384)
        return response

    async def gzipped(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.Response(
            body=gzip.compress(b"<p>zipped</p>"),
            headers={"Content-Encoding": "gzip", "Content-Type": "text/html"},
        )

    async def cookie(request: web.Request) -> web.StreamResponse:
        await record(request)
        response = web.Response(text="cookie", headers={"Set-Cookie": "session=secret; Path=/"})
        return response

    app = web.Application()
    app.router.add_get("/page", page)
    app.router.add_get("/old/here", moved)
    app.router.add_get("/new/", page)
    app.router.add_get("/no-location", no_location)
    app.router.add_get("/status/{code}", status)
    app.router.add_get("/conditional", conditional)
    app.router.add_get("/typed", typed)
    app.router.add_get("/gzipped", gzipped)
    app.router.add_get("/cookie", cookie)
    return app


async def test_redirect_is_reported_with_canonical_target_and_not_followed(
    sessions: Sessions, clock: FakeClock
) -> None:
    hits: Counter[str] = Counter()
    async with app_server(_site(hits, [])) as server:
        session = await sessions.open()
        result = await fetch(session, FetchTarget(server.url("/old/here")), FAST_LIMITS, clock)
    assert result.kind == "redirect"
    assert result.status == 301
    assert result.redirect_to == server.url("/new/?a=1&b=2")
    assert hits["/new/"] == 0


async def test_every_redirect_status_is_reported(sessions: Sessions, clock: FakeClock) -> None:
    async with app_server(_site(Counter(), [])) as server:
        session = await sessions.open()
        for code in (300, 302, 303, 307, 308):
            url = server.url(f"/old/here?status={code}&to=http://elsewhere.example/x")
            result = await fetch(session, FetchTarget(url), FAST_LIMITS, clock)
            assert (result.kind, result.status, result.redirect_to) == (
                "redirect",
                code,
                "http://elsewhere.example/x",
            )


async def test_redirect_without_usable_location_is_permanent(
    sessions: Sessions, clock: FakeClock
) -> None:
    async with app_server(_site(Counter(), [])) as server:
        session = await sessions.open()
        missing = await fetch(session, FetchTarget(server.url("/no-location")), FAST_LIMITS, clock)
        scheme = await fetch(
            session, FetchTarget(server.url("/old/here?to=javascript:alert(1)")), FAST_LIMITS, clock
        )
    for result in (missing, scheme):
        assert result.kind == "permanent"
        assert result.failure is not None and result.failure.reason is Reason.BAD_REDIRECT


async def test_429_with_retry_after_in_seconds(sessions: Sessions, clock: FakeClock) -> None:
    async with app_server(_site(Counter(), [])) as server:
        session = await sessions.open()
        result = await fetch(
            session, FetchTarget(server.url("/status/429?retry=120")), FAST_LIMITS, clock
        )
    assert (result.kind, result.status) == ("retryable", 429)
    assert result.retry_after_s == 120


async def test_429_with_retry_after_as_http_date(sessions: Sessions, clock: FakeClock) -> None:
    date = email.utils.formatdate(clock.now_ms() / 1000 + 300, usegmt=True)
    async with app_server(_site(Counter(), [])) as server:
        session = await sessions.open()
        url = server.url("/status/429") + "?retry=" + date.replace(" ", "%20").replace(",", "%2C")
        result = await fetch(session, FetchTarget(url), FAST_LIMITS, clock)
    assert (result.kind, result.status) == ("retryable", 429)
    assert result.retry_after_s == 300


async def test_503_is_retryable_and_retry_after_is_capped(
    sessions: Sessions, clock: FakeClock
) -> None:
    async with app_server(_site(Counter(), [])) as server:
        session = await sessions.open()
        capped = await fetch(
            session, FetchTarget(server.url("/status/503?retry=999999")), FAST_LIMITS, clock
        )
        plain = await fetch(session, FetchTarget(server.url("/status/503")), FAST_LIMITS, clock)
    assert (capped.kind, capped.status, capped.retry_after_s) == ("retryable", 503, 3600)
    assert (plain.kind, plain.retry_after_s) == ("retryable", None)


async def test_status_classes(sessions: Sessions, clock: FakeClock) -> None:
    expected = {
        404: "permanent",
        410: "permanent",
        403: "permanent",
        408: "retryable",
        500: "retryable",
        502: "retryable",
    }
    async with app_server(_site(Counter(), [])) as server:
        session = await sessions.open()
        for code, kind in expected.items():
            result = await fetch(
                session, FetchTarget(server.url(f"/status/{code}")), FAST_LIMITS, clock
            )
            assert (result.kind, result.status) == (kind, code)
            assert result.failure is not None and result.failure.reason is Reason.HTTP_STATUS


async def test_304_from_conditional_headers_checked_by_the_server(
    sessions: Sessions, clock: FakeClock
) -> None:
    seen: list[dict[str, str]] = []
    async with app_server(_site(Counter(), seen)) as server:
        session = await sessions.open()
        target = FetchTarget(server.url("/conditional"), etag=ETAG, last_modified=LAST_MODIFIED)
        unchanged = await fetch(session, target, FAST_LIMITS, clock)
        fresh = await fetch(session, FetchTarget(server.url("/conditional")), FAST_LIMITS, clock)
    assert (unchanged.kind, unchanged.status, unchanged.body) == ("unchanged", 304, b"")
    assert (unchanged.etag, unchanged.last_modified) == (ETAG, LAST_MODIFIED)
    assert seen[0]["If-None-Match"] == ETAG
    assert seen[0]["If-Modified-Since"] == LAST_MODIFIED
    assert (fresh.kind, fresh.body, fresh.etag, fresh.last_modified) == (
        "done",
        b"fresh",
        ETAG,
        LAST_MODIFIED,
    )
    assert "If-None-Match" not in seen[1]


async def test_same_body_as_last_time_is_unchanged(sessions: Sessions, clock: FakeClock) -> None:
    digest = hashlib.sha256(b"<html>hello</html>").hexdigest()
    async with app_server(_site(Counter(), [])) as server:
        session = await sessions.open()
        result = await fetch(
            session, FetchTarget(server.url("/page"), content_hash=digest), FAST_LIMITS, clock
        )
    assert (result.kind, result.sha256) == ("unchanged", digest)


async def test_content_type_outside_the_list_is_recorded_without_a_body(
    sessions: Sessions, clock: FakeClock
) -> None:
    async with app_server(_site(Counter(), [])) as server:
        session = await sessions.open()
        target = FetchTarget(
            server.url("/typed?type=application/pdf"), content_types=("text/html",)
        )
        result = await fetch(session, target, FAST_LIMITS, clock)
        wildcard = FetchTarget(
            server.url("/typed?type=text/plain;%20charset=utf-8"), content_types=("text/*",)
        )
        accepted = await fetch(session, wildcard, FAST_LIMITS, clock)
    assert (result.kind, result.status, result.content_type) == (
        "permanent",
        200,
        "application/pdf",
    )
    assert result.failure is not None and result.failure.reason is Reason.CONTENT_TYPE
    assert (result.body, result.wire_bytes, result.sha256) == (b"", 0, None)
    assert (accepted.kind, accepted.content_type, len(accepted.body)) == (
        "done",
        "text/plain",
        64 * 65536,
    )


async def test_response_without_content_type_is_accepted(
    sessions: Sessions, clock: FakeClock
) -> None:
    async def untyped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(response_head(headers={"Content-Length": "7"}) + b"no type")
        await writer.drain()

    session = await sessions.open()
    async with raw_server(untyped) as server:
        target = FetchTarget(server.url("/"), content_types=("text/html",))
        result = await fetch(session, target, FAST_LIMITS, clock)
    assert (result.kind, result.content_type, result.body) == ("done", None, b"no type")


def test_accepts_matches_media_types() -> None:
    assert accepts("text/html", [])
    assert accepts("text/html", ["TEXT/HTML; q=0.9"])
    assert accepts("application/xhtml+xml", ["text/html", "application/*"])
    assert accepts("image/png", ["*/*"])
    assert not accepts("image/png", ["text/html", "text/*"])
    assert accepts(None, ["text/html"])


async def test_request_headers_and_no_cookies(sessions: Sessions, clock: FakeClock) -> None:
    seen: list[dict[str, str]] = []
    limits = FAST_LIMITS.model_copy(update={"user_agent": "testbot/1.0 (+https://example.org/bot)"})
    async with app_server(_site(Counter(), seen)) as server:
        session = await sessions.open(limits=limits)
        target = FetchTarget(
            server.url("/cookie"), content_types=("text/html", "application/xhtml+xml")
        )
        await fetch(session, target, limits, clock)
        await fetch(session, FetchTarget(server.url("/page")), limits, clock)
    assert seen[0]["User-Agent"] == "testbot/1.0 (+https://example.org/bot)"
    assert seen[0]["Accept-Encoding"] == ACCEPT_ENCODING
    assert seen[0]["Accept"] == "text/html, application/xhtml+xml"
    assert seen[1]["Accept"] == "*/*"
    assert "Cookie" not in seen[1]


async def test_gzip_body_is_decoded(sessions: Sessions, clock: FakeClock) -> None:
    async with app_server(_site(Counter(), [])) as server:
        session = await sessions.open()
        result = await fetch(session, FetchTarget(server.url("/gzipped")), FAST_LIMITS, clock)
    assert (result.kind, result.body, result.truncated) == ("done", b"<p>zipped</p>", False)
    assert result.headers["content-encoding"] == "gzip"
    assert result.sha256 == hashlib.sha256(b"<p>zipped</p>").hexdigest()


async def test_urls_that_cannot_be_fetched(sessions: Sessions, clock: FakeClock) -> None:
    session = await sessions.open()
    cases = {
        "ftp://example.com/file": Reason.UNSUPPORTED_SCHEME,
        "mailto:someone@example.com": Reason.UNSUPPORTED_SCHEME,
        "file:///etc/passwd": Reason.UNSUPPORTED_SCHEME,
        "http://": Reason.INVALID_URL,
        "http://exa mple.com/": Reason.INVALID_URL,
    }
    for url, reason in cases.items():
        result = await fetch(session, FetchTarget(url), FAST_LIMITS, clock)
        assert result.kind == "permanent", url
        assert result.failure is not None and result.failure.reason is reason, url


async def test_expired_lease_is_not_fetched(sessions: Sessions, clock: FakeClock) -> None:
    hits: Counter[str] = Counter()
    async with app_server(_site(hits, [])) as server:
        session = await sessions.open()
        target = FetchTarget(server.url("/page"), deadline_ms=clock.now_ms() - 1)
        result = await fetch(session, target, FAST_LIMITS, clock)
    assert result.kind == "retryable"
    assert result.failure is not None and result.failure.reason is Reason.TIMEOUT
    assert sum(hits.values()) == 0


async def test_results_become_schema_messages(sessions: Sessions, clock: FakeClock) -> None:
    async with app_server(_site(Counter(), [])) as server:
        request = FetchRequest(
            crawl_id="c1",
            url=server.url("/page"),
            host=f"127.0.0.1:{server.port}",
            depth=2,
            lease_id="lease-1",
            deadline=clock.now_ms() + 60_000,
            redirect_hops=1,
        )
        session = await sessions.open()
        done = await fetch(session, FetchTarget.from_request(request), FAST_LIMITS, clock)
        moved_request = request.model_copy(update={"url": server.url("/old/here")})
        moved = await fetch(session, FetchTarget.from_request(moved_request), FAST_LIMITS, clock)
    page = done.page(request)
    assert page is not None
    assert (page.url, page.final_url, page.status, page.body_size) == (
        request.url,
        request.url,
        200,
        18,
    )
    assert (page.content_type, page.sha256, page.lease_id, page.depth) == (
        "text/html",
        done.sha256,
        "lease-1",
        2,
    )
    outcome = done.outcome(request, page_sent=True)
    assert (outcome.kind, outcome.status, outcome.page_sent, outcome.content_hash) == (
        "done",
        200,
        True,
        done.sha256,
    )
    assert outcome.fetched_at == clock.now_ms()
    assert moved.page(moved_request) is None
    redirect = moved.outcome(moved_request, page_sent=False)
    assert (redirect.kind, redirect.redirect_to, redirect.redirect_hops) == (
        "redirect",
        server.url("/new/?a=1&b=2"),
        1,  # the request's hops: the frontier counts this redirect when it follows it
    )


def test_outcomes_that_carry_no_page_or_a_revisit(clock: FakeClock) -> None:
    request = FetchRequest(
        crawl_id="c1",
        url="http://example.com/a",
        host="example.com",
        depth=0,
        lease_id="lease-2",
        deadline=clock.now_ms() + 60_000,
        content_hash="ab" * 32,
    )
    unchanged = FetchResult(
        url=request.url, kind="unchanged", fetched_at_ms=clock.now_ms(), elapsed_s=0.25, status=304
    )
    denied = FetchResult(
        url=request.url, kind="robots_denied", fetched_at_ms=clock.now_ms(), elapsed_s=0.0
    )
    assert denied.page(request) is None
    revisit = unchanged.page(request)
    assert revisit is not None and revisit.revisit
    assert (revisit.status, revisit.sha256, revisit.body_size) == (304, "ab" * 32, 0)
    no_hash = request.model_copy(update={"content_hash": None})
    assert unchanged.page(no_hash) is None  # nothing stored to point a revisit at
    outcome = unchanged.outcome(request, page_sent=False)
    assert (outcome.kind, outcome.content_hash, outcome.elapsed_ms) == ("unchanged", "ab" * 32, 250)
    assert denied.outcome(request, page_sent=False).kind == "robots_denied"


async def test_the_sent_hook_is_called_once_the_request_is_on_the_socket(
    sessions: Sessions, clock: FakeClock
) -> None:
    hits: Counter[str] = Counter()
    calls: list[int] = []

    def sent() -> None:
        calls.append(sum(hits.values()))  # the server has not answered yet

    session = await sessions.open()
    async with app_server(_site(hits, [])) as server:
        result = await fetch(
            session, FetchTarget(server.url("/page"), on_sent=sent), FAST_LIMITS, clock
        )
        refused_port = server.port
    assert result.kind == "done"
    assert calls == [0]
    fresh = await sessions.open()  # no pooled connection to the stopped server
    for url in ("ftp://example.com/", f"http://127.0.0.1:{refused_port}/page"):
        result = await fetch(fresh, FetchTarget(url, on_sent=sent), FAST_LIMITS, clock)
        assert result.kind != "done", url
    assert calls == [0], "never called for a request that was not sent"


async def test_results_keep_the_decoded_buffer_without_a_copy(
    sessions: Sessions, clock: FakeClock
) -> None:
    async with app_server(_site(Counter(), [])) as server:
        session = await sessions.open()
        result = await fetch(session, FetchTarget(server.url("/page")), FAST_LIMITS, clock)
    assert isinstance(result.body, bytearray)
    assert result.body == b"<html>hello</html>"


async def test_a_crawls_own_headers_go_with_the_fetchers(
    sessions: Sessions, clock: FakeClock
) -> None:
    seen: list[dict[str, str]] = []
    async with app_server(_site(Counter(), seen)) as server:
        session = await sessions.open()
        target = FetchTarget(
            server.url("/page"),
            content_types=("text/html",),
            headers={"Accept-Language": "de-CH, de;q=0.9", "Cookie": "consent=yes"},
        )
        result = await fetch(session, target, FAST_LIMITS, clock)
    assert result.kind == "done"
    assert seen[0]["Accept-Language"] == "de-CH, de;q=0.9"
    assert seen[0]["Cookie"] == "consent=yes"
    assert seen[0]["Accept"] == "text/html"
    assert "streamcrawl" in seen[0]["User-Agent"]
