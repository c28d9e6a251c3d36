"""One HTTP GET, safely: no redirect followed, every wait bounded, every size capped as it streams.

DESIGN.md section 3 step 4 and section 5. :func:`open_session` builds the one pooled
``aiohttp.ClientSession`` a fetcher uses (robots.txt included): the address-checking resolver and
socket factory (`fetcher.resolver`), a DNS cache, no cookies, no proxies from the environment, no
automatic decompression, and parser limits on the status line, each header and their number.
:func:`fetch` then

1. sends the User-Agent, Accept (from the request's content types), Accept-Encoding (what
   `fetcher.decoding` can decode) and the conditional headers (If-None-Match, If-Modified-Since);
2. bounds the connect, each socket read, and the whole exchange (a total deadline, cut to the
   lease deadline, around connecting, headers and the streamed body, so a server that trickles one
   byte at a time dies on time);
3. refuses a header block over ``max_header_bytes`` in total;
4. maps 304 to ``unchanged``, other 3xx to ``redirect`` with the Location resolved against the URL
   and canonicalised (never followed: the frontier admits the target so scope, robots and
   politeness apply to it), and failures through `fetcher.errors`;
5. reads a 2xx body only when its content type is accepted, decoding as it streams and stopping at
   ``max_body_bytes`` decoded or ``max_wire_bytes`` read (``truncated`` is recorded), so neither a
   2 GB body nor a decompression bomb is ever held in memory;
6. reports a body whose sha256 equals the request's ``content_hash`` as ``unchanged``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Annotated

import aiohttp
from aiohttp.abc import AbstractResolver
from pydantic import BaseModel, ConfigDict, Field
from yarl import URL

from fetcher.addresses import AddressPolicy
from fetcher.clock import Clock
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
from fetcher.resolver import SafeResolver, guarded_socket_factory
from fetcher.results import FetchResult, FetchTarget
from schemas.canonical import canonical_url
from schemas.pages import MAX_BODY_BYTES

KIB = 1024
_FETCH_ERRORS = (aiohttp.ClientError, OSError, TimeoutError, FetcherError)
"""What a fetch may raise that is the server's or the network's doing; anything else is a bug."""


class FetchLimits(BaseModel):
    """Deadlines and caps for every fetch; defaults suit a polite general-purpose crawler."""

    model_config = ConfigDict(frozen=True)

    connect_timeout_s: Annotated[float, Field(gt=0)] = 10.0
    read_timeout_s: Annotated[float, Field(gt=0)] = 30.0
    """Longest wait for any single read from the socket (aiohttp's ``sock_read``)."""
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


@asynccontextmanager
async def open_session(
    limits: FetchLimits, policy: AddressPolicy, dns: AbstractResolver | None = None
) -> AsyncIterator[aiohttp.ClientSession]:
    """The fetcher's one session (call inside the running loop); closed with its resolver.

    ``dns`` replaces aiohttp's default resolver underneath the address checks (aiodns, or a
    fake one in tests).
    """
    resolver = SafeResolver(policy, dns)
    connector = aiohttp.TCPConnector(
        resolver=resolver,
        socket_factory=guarded_socket_factory(policy),
        use_dns_cache=True,
        ttl_dns_cache=limits.dns_cache_ttl_s,
        limit=limits.max_connections,
        keepalive_timeout=limits.keepalive_s,
    )
    session = aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(
            total=None, sock_connect=limits.connect_timeout_s, sock_read=limits.read_timeout_s
        ),
        auto_decompress=False,
        max_line_size=limits.max_line_bytes,
        max_field_size=limits.max_field_bytes,
        max_headers=limits.max_headers,
        headers={"User-Agent": limits.user_agent, "Accept-Encoding": ACCEPT_ENCODING},
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
    )
    try:
        yield session
    finally:
        await session.close()
        await resolver.close()


async def fetch(
    session: aiohttp.ClientSession, target: FetchTarget, limits: FetchLimits, clock: Clock
) -> FetchResult:
    """GET ``target.url`` once and say how it went; raises only on programming errors."""
    started = clock.monotonic()
    result = FetchResult(
        url=target.url, kind="permanent", fetched_at_ms=clock.now_ms(), elapsed_s=0.0
    )
    url = canonical_url(target.url)
    if url is None:
        scheme = target.url.partition(":")[0].lower()
        reason = Reason.INVALID_URL if scheme in ("http", "https") else Reason.UNSUPPORTED_SCHEME
        result = _failed(result, permanent(reason, target.url[:200]))
    else:
        result = await _exchange(session, url, target, limits, clock, result)
    return replace(result, elapsed_s=max(clock.monotonic() - started, 0.0))


async def _exchange(
    session: aiohttp.ClientSession,
    url: str,
    target: FetchTarget,
    limits: FetchLimits,
    clock: Clock,
    result: FetchResult,
) -> FetchResult:
    """The request and response under the total deadline, errors classified."""
    budget = limits.total_timeout_s
    if target.deadline_ms is not None:
        budget = min(budget, (target.deadline_ms - result.fetched_at_ms) / 1000)
    if budget <= 0:
        return _failed(result, retryable(Reason.TIMEOUT, "lease deadline passed"))
    try:
        async with asyncio.timeout(budget):
            async with session.get(
                URL(url, encoded=True), allow_redirects=False, headers=_request_headers(target)
            ) as response:
                return await _read_response(response, url, target, limits, clock, result)
    except _FETCH_ERRORS as error:
        return _failed(result, classify_exception(error))


def _failed(result: FetchResult, failure: Failure) -> FetchResult:
    return replace(result, kind=failure.kind, failure=failure)


def _request_headers(target: FetchTarget) -> dict[str, str]:
    headers = {"Accept": ", ".join(target.content_types) if target.content_types else "*/*"}
    if target.etag:
        headers["If-None-Match"] = target.etag
    if target.last_modified:
        headers["If-Modified-Since"] = target.last_modified
    return headers


async def _read_response(
    response: aiohttp.ClientResponse,
    url: str,
    target: FetchTarget,
    limits: FetchLimits,
    clock: Clock,
    result: FetchResult,
) -> FetchResult:
    """Everything after the status line arrived: sort the status, then maybe stream the body."""
    header_bytes = sum(len(name) + len(value) + 4 for name, value in response.raw_headers)
    if header_bytes > limits.max_header_bytes:
        raise HeadersTooLargeError(f"{header_bytes} header bytes, limit {limits.max_header_bytes}")
    headers = _joined_headers(response.raw_headers)
    result = replace(
        result,
        status=response.status,
        headers=headers,
        etag=headers.get("etag") or None,
        last_modified=headers.get("last-modified") or None,
    )
    if response.status == 304:
        return replace(
            result,
            kind="unchanged",
            etag=result.etag or target.etag,
            last_modified=result.last_modified or target.last_modified,
        )
    if 300 <= response.status < 400:
        return _redirected(result, url, headers.get("location", ""))
    failure = classify_status(response.status, headers.get("retry-after"), clock.now_ms() / 1000)
    if failure is not None:
        return _failed(result, failure)
    result = replace(result, content_type=_media_type(headers.get("content-type")))
    if not accepts(result.content_type, target.content_types):
        return _failed(result, permanent(Reason.CONTENT_TYPE, result.content_type or ""))
    declared = response.content_length
    if not limits.truncate_oversized and declared is not None and declared > limits.max_wire_bytes:
        return _failed(result, permanent(Reason.TOO_LARGE, f"declared {declared} bytes"))
    try:
        body, wire_bytes, truncated = await _stream_body(response, headers, limits)
    except (UnsupportedEncodingError, CorruptEncodingError) as error:
        return _failed(result, classify_exception(error))
    result = replace(result, wire_bytes=wire_bytes)
    if truncated and not limits.truncate_oversized:
        return _failed(result, permanent(Reason.TOO_LARGE, "over a body cap"))
    sha256 = hashlib.sha256(body).hexdigest()
    return replace(
        result,
        kind="unchanged" if target.content_hash == sha256 else "done",
        body=body,
        sha256=sha256,
        truncated=truncated,
    )


def _redirected(result: FetchResult, url: str, location: str) -> FetchResult:
    """A redirect to the canonical target, or a permanent failure when there is none."""
    redirect_to = canonical_url(location, base=url) if location else None
    if redirect_to is None:
        return _failed(result, permanent(Reason.BAD_REDIRECT, location[:200] or "no Location"))
    return replace(result, kind="redirect", redirect_to=redirect_to)


async def _stream_body(
    response: aiohttp.ClientResponse, headers: Mapping[str, str], limits: FetchLimits
) -> tuple[bytes, int, bool]:
    """The decoded body, bytes read, and whether a cap cut it; never holds more than the caps."""
    decoder = decoder_for(headers.get("content-encoding"))
    body = bytearray()
    wire_bytes = 0
    while True:
        chunk = await response.content.readany()
        if not chunk:
            return bytes(body), wire_bytes, False
        over_wire = wire_bytes + len(chunk) > limits.max_wire_bytes
        if over_wire:
            chunk = chunk[: limits.max_wire_bytes - wire_bytes]
        wire_bytes += len(chunk)
        wanted = limits.max_body_bytes - len(body)
        decoded = decoder.decode(chunk, wanted + 1) if chunk else b""
        body += decoded[:wanted]
        if len(decoded) > wanted or over_wire:
            return bytes(body), wire_bytes, True


def accepts(content_type: str | None, accepted: Sequence[str]) -> bool:
    """Whether a media type matches the list (``type/subtype``, ``type/*``, ``*/*``).

    An empty list accepts anything, and so does a response without Content-Type: the parser
    sniffs those rather than the fetcher guessing.
    """
    if not accepted or content_type is None:
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


def _joined_headers(raw_headers: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header names lowercased, repeated headers joined with ", " (RFC 9110 5.3)."""
    joined: dict[str, str] = {}
    for raw_name, raw_value in raw_headers:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        joined[name] = f"{joined[name]}, {value}" if name in joined else value
    return joined
