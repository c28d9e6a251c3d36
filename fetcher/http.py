"""One HTTP GET, safely: no redirect followed, every wait bounded, every size capped as it streams.

DESIGN.md section 3 step 4 and section 5. :func:`open_session` builds the one pooled
``aiohttp.ClientSession`` a fetcher uses (robots.txt included): the address-checking resolver and
socket factory (`fetcher.resolver`), a DNS cache, no cookie jar of aiohttp's own (a crawl asking
for cookies has its jars in `fetcher.cookies`), no proxies from the environment (a configured one
instead, `fetcher.proxy`), the system's certificates and any configured besides, no automatic
decompression, and parser limits on the status line, each header and their number.
:func:`fetch` then

1. sends the User-Agent, Accept (from the request's content types), Accept-Encoding (what
   `fetcher.decoding` can decode) and the conditional headers (If-None-Match, If-Modified-Since),
   and calls the target's ``on_sent`` once the request is on the socket (the session's request
   class reports it), which is when politeness counts the request as started;
2. bounds the connect (aiohttp's ``sock_connect``), each wait for data and the whole exchange (a
   total deadline, cut to the lease deadline, around connecting, headers and the streamed body,
   so a server that trickles one byte at a time dies on time), both of the latter checked by
   one sweep per event loop (`fetcher.deadlines`);
3. refuses a header block over ``max_header_bytes`` in total;
4. maps 304 to ``unchanged``, other 3xx to ``redirect`` with the Location resolved against the URL
   and canonicalised (never followed: the frontier admits the target so scope, robots and
   politeness apply to it), and failures through `fetcher.errors`;
5. for a link only checked (``check_only``), stops at a 2xx's headers: done, no body, no page;
   otherwise reads a 2xx body only when its content type is accepted, decoding as it streams into
   one buffer and stopping at ``max_body_bytes`` decoded or ``max_wire_bytes`` read
   (``truncated`` is recorded), so neither a 2 GB body nor a decompression bomb is ever held in
   memory: the buffer never exceeds the cap, becomes the result's body without a copy, and beside
   it a fetch holds only aiohttp's read buffer and one decoder call's output (`fetcher.decoding`);
6. reports a body whose sha256 equals the request's ``content_hash`` as ``unchanged``.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Annotated, Any

import aiohttp
import uvloop
from aiohttp.abc import AbstractResolver
from aiohttp.connector import Connection
from pydantic import BaseModel, ConfigDict, Field
from yarl import URL

from fetcher.addresses import AddressPolicy
from fetcher.cookies import CookieJars
from fetcher.credentials import Authorizations, SiteCredentials
from fetcher.deadlines import FetchDeadline
from fetcher.decoding import ACCEPT_ENCODING, decoder_for
from fetcher.errors import (
    Failure,
    Reason,
    classify_exception,
    classify_status,
    permanent,
    retryable,
)
from fetcher.exceptions import (
    CorruptEncodingError,
    FetcherError,
    HeadersTooLargeError,
    UnsupportedEncodingError,
)
from fetcher.proxy import Proxy, ProxySettings
from fetcher.resolver import SafeResolver, guarded_socket_factory
from fetcher.results import FetchResult, FetchTarget
from fetcher.urls import fetch_url
from schemas.canonical import canonical_url
from schemas.pages import MAX_BODY_BYTES
from streamcrawl.clock import Clock

KIB = 1024
_SHA256 = hashlib.sha256()
"""An empty digest copied for each body."""
_FETCH_ERRORS = (aiohttp.ClientError, OSError, TimeoutError, FetcherError)
"""What a fetch may raise that is the server's or the network's doing; anything else is a bug."""


class FetchLimits(BaseModel):
    """Deadlines and caps for every fetch; defaults suit a polite general-purpose crawler."""

    model_config = ConfigDict(frozen=True)

    connect_timeout_s: Annotated[float, Field(gt=0)] = 10.0
    read_timeout_s: Annotated[float, Field(gt=0)] = 30.0
    """Longest wait for data: from sending the request to its header block, and between body
    chunks (`fetcher.deadlines`)."""
    total_timeout_s: Annotated[float, Field(gt=0)] = 90.0
    """Wall-clock bound on one whole fetch, DNS to last body byte."""
    max_body_bytes: Annotated[int, Field(gt=0, le=MAX_BODY_BYTES)] = MAX_BODY_BYTES
    """Decoded body bytes kept; more is cut and ``truncated`` set."""
    max_wire_bytes: Annotated[int, Field(gt=0)] = MAX_BODY_BYTES
    """Body bytes read from the connection, before decoding (stops streams that decode to
    nothing)."""
    truncate_oversized: bool = True
    """False: a body over a cap is a permanent ``too_large`` failure instead of a truncated page."""
    max_line_bytes: Annotated[int, Field(ge=1 * KIB)] = 8 * KIB
    max_field_bytes: Annotated[int, Field(ge=1 * KIB)] = 16 * KIB
    max_headers: Annotated[int, Field(ge=8)] = 128
    max_header_bytes: Annotated[int, Field(ge=4 * KIB)] = 64 * KIB
    """All header names and values together."""
    dns_cache_ttl_s: Annotated[int, Field(ge=0)] = 300
    max_connections: Annotated[int, Field(gt=0)] = 512
    """The connection pool's size; politeness keeps concurrency below it."""
    keepalive_s: Annotated[float, Field(gt=0)] = 15.0
    user_agent: str = "Mozilla/5.0 (compatible; streamcrawl/0.1; +https://github.com/streamcrawl)"
    """Sent with every request; name the crawler and a contact URL, as site operators expect."""


def new_event_loop() -> asyncio.AbstractEventLoop:
    """The event loop fetches run on: uvloop's (libuv) rather than asyncio's selector loop. Its
    transports, timers and callbacks are C; on the fetcher benchmark the dispatcher spends about
    7 % less CPU a page on it (tests/bench/RESULTS.md, session 19). Its clock
    (``loop.time()``) is read once per iteration at millisecond resolution: enough for the
    deadlines (`fetcher.deadlines`, seconds); politeness keeps to `streamcrawl.clock.Clock`."""
    return uvloop.new_event_loop()


_DEADLINE: ContextVar[FetchDeadline | None] = ContextVar("fetcher_deadline", default=None)
"""The deadlines of the fetch running in this task, set around its request."""


class _SendReportingRequest(aiohttp.ClientRequest):
    """Tells the running fetch's deadlines (and so its ``on_sent``) once the request is on the
    socket: aiohttp's send writes a request without a body before it returns. (A TraceConfig's
    headers-sent signal would do the same, but tracing costs about 15 us of CPU per request, a
    tenth of the request.)"""

    async def send(self, conn: Connection) -> aiohttp.ClientResponse:
        response = await super().send(conn)
        deadline = _DEADLINE.get()
        if deadline is not None:
            deadline.sent()
        return response


@dataclass(frozen=True)
class FetchSession:
    """What every fetch goes through: the pooled aiohttp session, and the proxy when one is
    configured (`fetcher.proxy`)."""

    http: aiohttp.ClientSession
    proxy: Proxy | None = None
    authorizations: Authorizations = field(default_factory=lambda: Authorizations({}))
    cookies: CookieJars = field(default_factory=CookieJars)


@asynccontextmanager
async def open_session(
    limits: FetchLimits,
    policy: AddressPolicy,
    dns: AbstractResolver | None = None,
    *,
    proxy: ProxySettings | None = None,
    ssl_context: ssl.SSLContext | None = None,
    credentials: dict[str, SiteCredentials] | None = None,
) -> AsyncIterator[FetchSession]:
    """The fetcher's one session (call inside the running loop); closed with its resolver.

    ``dns`` replaces aiohttp's default resolver underneath the address checks (aiodns, or a
    fake one in tests). ``ssl_context`` replaces the default certificate checks (one trusting
    more certificates, `fetcher.settings.FetcherSettings.ssl_context`). ``credentials`` are
    sent to their origins (`fetcher.credentials`).
    """
    endpoint = None if proxy is None else proxy.endpoint()
    resolver = SafeResolver(policy, dns, trusted=endpoint)
    connector = aiohttp.TCPConnector(
        resolver=resolver,
        socket_factory=guarded_socket_factory(policy, resolver.trusted_addresses),
        ssl=ssl_context if ssl_context is not None else True,
        use_dns_cache=True,
        ttl_dns_cache=limits.dns_cache_ttl_s,
        limit=limits.max_connections,
        keepalive_timeout=limits.keepalive_s,
    )
    session = aiohttp.ClientSession(
        connector=connector,
        # The read and total deadlines are fetcher.deadlines' (one sweep per loop, no timer each).
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=limits.connect_timeout_s),
        auto_decompress=False,
        max_line_size=limits.max_line_bytes,
        max_field_size=limits.max_field_bytes,
        max_headers=limits.max_headers,
        headers={"User-Agent": limits.user_agent, "Accept-Encoding": ACCEPT_ENCODING},
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
        request_class=_SendReportingRequest,
    )
    try:
        through = None
        if proxy is not None and endpoint is not None:
            through = Proxy(proxy, resolver, policy)
        yield FetchSession(session, through, Authorizations(credentials or {}))
    finally:
        await session.close()
        await resolver.close()


async def fetch(
    session: FetchSession, target: FetchTarget, limits: FetchLimits, clock: Clock
) -> FetchResult:
    """GET ``target.url`` once and say how it went; raises only on programming errors."""
    started = clock.monotonic()
    # Filled in as the exchange goes (one object per fetch, not a draft and then a copy).
    draft = FetchResult(target.url, "permanent", fetched_at_ms=clock.now_ms(), elapsed_s=0.0)
    url = fetch_url(target.url)
    if url is None:
        scheme = target.url.partition(":")[0].lower()
        reason = Reason.INVALID_URL if scheme in ("http", "https") else Reason.UNSUPPORTED_SCHEME
        _fail(draft, permanent(reason, target.url[:200]))
    else:
        await _exchange(session, url, target, limits, clock, draft)
    draft.elapsed_s = max(clock.monotonic() - started, 0.0)
    return draft


def _fail(draft: FetchResult, failure: Failure) -> None:
    draft.kind, draft.failure = failure.kind, failure


async def _exchange(
    session: FetchSession,
    url: str,
    target: FetchTarget,
    limits: FetchLimits,
    clock: Clock,
    draft: FetchResult,
) -> None:
    """The request and response under the total deadline, errors classified."""
    budget = limits.total_timeout_s
    if target.deadline_ms is not None:
        budget = min(budget, (target.deadline_ms - draft.fetched_at_ms) / 1000)
    if budget <= 0:
        _fail(draft, retryable(Reason.TIMEOUT, "lease deadline passed"))
        return
    deadline = FetchDeadline(budget, limits.read_timeout_s, target.on_sent)
    request_url = URL(url, encoded=True)
    proxy = session.proxy
    if proxy is not None and not proxy.routes(request_url.raw_host or ""):
        proxy = None
    try:
        with deadline:
            token = _DEADLINE.set(deadline)
            try:
                headers, via = await _prepared(session, proxy, request_url, target)
                async with session.http.get(
                    request_url, allow_redirects=False, headers=headers, **via
                ) as response:
                    draft.answered_at = clock.monotonic()
                    deadline.progress()
                    if target.cookie_jar is not None:
                        session.cookies.remember(target.cookie_jar, request_url, response.cookies)
                    if proxy is not None and response.status == 407:
                        _fail(draft, retryable(Reason.PROXY_ERROR, "407 from the proxy"))
                        return
                    await _read_response(response, url, target, limits, clock, draft, deadline)
            finally:
                _DEADLINE.reset(token)
    except TimeoutError as error:
        if deadline.expired == "read":
            _fail(draft, retryable(Reason.READ_TIMEOUT, f"no data for {limits.read_timeout_s} s"))
        else:
            _fail(draft, classify_exception(error))
    except _FETCH_ERRORS as error:
        _fail(draft, classify_exception(error, proxy.host if proxy is not None else None))


async def _prepared(
    session: FetchSession, proxy: Proxy | None, url: URL, target: FetchTarget
) -> tuple[dict[str, str], dict[str, Any]]:
    """The request's headers, with the origin's credentials, and aiohttp's proxy arguments
    (none when it goes direct); a proxied target's address is checked first (`fetcher.proxy`)."""
    headers = _request_headers(target)
    authorization = session.authorizations.header_for(str(url))
    if authorization is not None:
        headers["Authorization"] = authorization
    if target.cookie_jar is not None:
        _add_cookies(headers, session.cookies.header_for(target.cookie_jar, url))
    if proxy is None:
        return headers, {}
    await proxy.check_target(url.raw_host or "", url.port or 0)
    return headers, proxy.request_arguments(url, headers)


def _add_cookies(headers: dict[str, str], kept: str | None) -> None:
    """The jar's cookies after any the crawl's own headers set (``--header 'Cookie: ...'``)."""
    if kept is None:
        return
    name = next((name for name in headers if name.lower() == "cookie"), "Cookie")
    given = headers.get(name)
    headers[name] = f"{given}; {kept}" if given else kept


def _request_headers(target: FetchTarget) -> dict[str, str]:
    headers = dict(target.headers) if target.headers else {}
    headers["Accept"] = _accept_header(target.content_types)
    if target.etag:
        headers["If-None-Match"] = target.etag
    if target.last_modified:
        headers["If-Modified-Since"] = target.last_modified
    return headers


@functools.lru_cache(maxsize=256)
def _accept_header(content_types: tuple[str, ...]) -> str:
    return ", ".join(content_types) if content_types else "*/*"


async def _read_response(
    response: aiohttp.ClientResponse,
    url: str,
    target: FetchTarget,
    limits: FetchLimits,
    clock: Clock,
    draft: FetchResult,
    deadline: FetchDeadline,
) -> None:
    """Everything after the status line arrived: sort the status, then maybe stream the body."""
    headers = _joined_headers(response.raw_headers, limits.max_header_bytes)
    status = draft.status = response.status
    draft.headers = headers
    draft.etag = headers.get("etag") or None
    draft.last_modified = headers.get("last-modified") or None
    if status == 304:
        draft.kind = "unchanged"
        draft.etag = draft.etag or target.etag
        draft.last_modified = draft.last_modified or target.last_modified
        return
    if 300 <= status < 400:
        _redirected(draft, url, headers.get("location", ""))
        return
    if not 200 <= status < 300:
        failure = classify_status(status, headers.get("retry-after"), clock.now_ms() / 1000)
        if failure is not None:
            _fail(draft, failure)
            return
    draft.content_type = _media_type(headers.get("content-type"))
    if target.check_only:
        draft.kind = "done"  # the link works; its body is not the crawl's (no page is sent)
        return
    if not accepts(draft.content_type, target.content_types):
        _fail(draft, permanent(Reason.CONTENT_TYPE, draft.content_type or ""))
        return
    declared = response.content_length
    if not limits.truncate_oversized and declared is not None and declared > limits.max_wire_bytes:
        _fail(draft, permanent(Reason.TOO_LARGE, f"declared {declared} bytes"))
        return
    try:
        body, draft.wire_bytes, truncated = await _stream_body(response, headers, limits, deadline)
    except (UnsupportedEncodingError, CorruptEncodingError) as error:
        _fail(draft, classify_exception(error))
        return
    if truncated and not limits.truncate_oversized:
        _fail(draft, permanent(Reason.TOO_LARGE, "over a body cap"))
        return
    digest = _SHA256.copy()  # hashlib.sha256() would look the digest up in OpenSSL each time
    digest.update(body)
    sha256 = digest.hexdigest()
    draft.kind = "unchanged" if target.content_hash == sha256 else "done"
    draft.body, draft.sha256, draft.truncated = body, sha256, truncated


def _redirected(draft: FetchResult, url: str, location: str) -> None:
    """A redirect to the canonical target, or a permanent failure when there is none."""
    redirect_to = canonical_url(location, base=url) if location else None
    if redirect_to is None:
        _fail(draft, permanent(Reason.BAD_REDIRECT, location[:200] or "no Location"))
    else:
        draft.kind, draft.redirect_to = "redirect", redirect_to


async def _stream_body(
    response: aiohttp.ClientResponse,
    headers: Mapping[str, str],
    limits: FetchLimits,
    deadline: FetchDeadline,
) -> tuple[bytearray, int, bool]:
    """The decoded body, bytes read, and whether a cap cut it.

    The body grows in one bytearray that is returned as it is (no copy); decoders append to it
    directly and never past one byte over the body cap, which tells that the body goes on.
    """
    decoder = decoder_for(headers.get("content-encoding"))
    max_body, max_wire = limits.max_body_bytes, limits.max_wire_bytes
    body = bytearray()
    wire_bytes = 0
    while True:
        chunk = await response.content.readany()
        deadline.progress()
        if not chunk:
            return body, wire_bytes, False
        over_wire = wire_bytes + len(chunk) > max_wire
        if over_wire:
            chunk = chunk[: max_wire - wire_bytes]
        wire_bytes += len(chunk)
        if chunk:
            decoder.decode_into(chunk, body, max_body + 1)
        if len(body) > max_body or over_wire:
            del body[max_body:]
            return body, wire_bytes, True


def accepts(content_type: str | None, accepted: Sequence[str]) -> bool:
    """Whether a media type matches the list (``type/subtype``, ``type/*``, ``*/*``).

    An empty list accepts anything, and so does a response without Content-Type: the parser
    sniffs those rather than the fetcher guessing.
    """
    if not accepted or content_type is None or content_type in accepted:
        return True
    major = content_type.partition("/")[0]
    for pattern in accepted:
        wanted = _media_type(pattern)
        if wanted in (content_type, "*/*", f"{major}/*"):
            return True
    return False


def _media_type(value: str | None) -> str | None:
    media_type = (value or "").partition(";")[0].strip().lower()
    return media_type or None


def _joined_headers(raw_headers: Sequence[tuple[bytes, bytes]], limit: int) -> dict[str, str]:
    """Header names lowercased, repeated headers joined with ", " (RFC 9110 5.3); raises
    HeadersTooLargeError when names and values take more than ``limit`` bytes in all."""
    size = 0
    joined: dict[str, str] = {}
    for raw_name, raw_value in raw_headers:
        size += len(raw_name) + len(raw_value) + 4
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        joined[name] = f"{joined[name]}, {value}" if name in joined else value
    if size > limit:
        raise HeadersTooLargeError(f"{size} header bytes, limit {limit}")
    return joined
