"""Every way a fetch can fail, sorted once into retryable or permanent (STYLE: one place).

Retryable (the frontier retries with backoff; the host may be slowed down): timeouts, connection
failures and resets, a body cut short, TLS handshake failures, DNS failures other than "no such
name", 408, 429 and 5xx. 429 and 503 carry the parsed Retry-After, capped at one hour. A proxy that
cannot be reached, refuses a tunnel or asks for credentials (407) is retryable too: that is the
crawler's network failing, not the URL.

Permanent (the frontier gives the URL up): other 4xx, a blocked address, an unsupported scheme or
invalid URL, a redirect without a usable Location, a content type outside the request's list, a
body or header block over its cap (when truncation is off), a Content-Encoding that is not
supported or does not decode, a response that is not HTTP, a certificate that does not verify, and
a name that does not exist in DNS.
"""

from __future__ import annotations

import email.utils
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import aiohttp

from fetcher.exceptions import (
    BlockedAddressError,
    CorruptEncodingError,
    HeadersTooLargeError,
    UnsupportedEncodingError,
)

RETRY_AFTER_CAP_S = 3600.0
_DNS_NOT_FOUND = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}
_HEADER_LIMIT_MESSAGES = ("got more than", "too many headers", "too long")


class Reason(StrEnum):
    """Why a fetch did not end in a page; the value goes into FetchOutcome.error."""

    TIMEOUT = "timeout"
    CONNECT_TIMEOUT = "connect_timeout"
    READ_TIMEOUT = "read_timeout"
    CONNECTION_ERROR = "connection_error"
    DISCONNECTED = "disconnected"
    INCOMPLETE_BODY = "incomplete_body"
    DNS_ERROR = "dns_error"
    TLS_ERROR = "tls_error"
    HTTP_STATUS = "http_status"
    DNS_NOT_FOUND = "dns_not_found"
    TLS_CERTIFICATE = "tls_certificate"
    BLOCKED_ADDRESS = "blocked_address"
    UNSUPPORTED_SCHEME = "unsupported_scheme"
    INVALID_URL = "invalid_url"
    BAD_REDIRECT = "bad_redirect"
    CONTENT_TYPE = "content_type"
    TOO_LARGE = "too_large"
    HEADERS_TOO_LARGE = "headers_too_large"
    UNSUPPORTED_ENCODING = "unsupported_encoding"
    CORRUPT_ENCODING = "corrupt_encoding"
    BAD_RESPONSE = "bad_response"
    PROXY_ERROR = "proxy_error"


@dataclass(frozen=True)
class Failure:
    """A classified failure: what the frontier should do, why, and how long to wait."""

    kind: Literal["retryable", "permanent"]
    reason: Reason
    detail: str = ""
    retry_after_s: float | None = None

    def message(self) -> str:
        """``reason: detail``, short enough for an outcome's error field."""
        return f"{self.reason.value}: {self.detail}"[:500] if self.detail else self.reason.value


def retryable(reason: Reason, detail: str = "", retry_after_s: float | None = None) -> Failure:
    return Failure("retryable", reason, detail, retry_after_s)


def permanent(reason: Reason, detail: str = "") -> Failure:
    return Failure("permanent", reason, detail)


def parse_retry_after(
    value: str | None, now: float, cap_s: float = RETRY_AFTER_CAP_S
) -> float | None:
    """Seconds to wait from a Retry-After value: delay-seconds or an HTTP date (RFC 9110 10.2.3).

    ``now`` is epoch seconds. A date in the past means 0; anything over ``cap_s`` is cut to it;
    an unparseable value is None (no advice, so the frontier's own backoff applies).
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return min(float(text), cap_s)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return min(max(when.timestamp() - now, 0.0), cap_s)


def classify_status(status: int, retry_after: str | None, now: float) -> Failure | None:
    """The failure a status means, or None for 2xx and 3xx (the caller handles those)."""
    if 200 <= status < 400:
        return None
    detail = str(status)
    if status in (429, 503):
        return retryable(Reason.HTTP_STATUS, detail, parse_retry_after(retry_after, now))
    if status == 408 or 500 <= status < 600:
        return retryable(Reason.HTTP_STATUS, detail)
    if 400 <= status < 500:
        return permanent(Reason.HTTP_STATUS, detail)
    return permanent(Reason.BAD_RESPONSE, f"status {status}")


def classify_exception(error: BaseException, proxy_host: str | None = None) -> Failure:
    """The failure an exception raised while fetching means.

    Handles the exceptions :func:`fetcher.http.fetch` lets through to it: aiohttp client errors,
    OS errors, timeouts and this package's errors. Causes are searched, because aiohttp wraps
    resolver and socket errors in its own. ``proxy_host`` is the proxy's when the request went
    through one: failing to reach it is a proxy error, whatever the cause.
    """
    detail = str(error)[:300]
    for cause in _causes(error):
        if isinstance(cause, BlockedAddressError):
            return permanent(Reason.BLOCKED_ADDRESS, f"{cause.address} for {cause.host}")
    if isinstance(error, aiohttp.ClientHttpProxyError):
        detail = f"{error.status} from the proxy: {error.message}"
        return retryable(Reason.PROXY_ERROR, detail[:300])
    if isinstance(error, aiohttp.ClientProxyConnectionError) or (
        isinstance(error, aiohttp.ClientConnectorError) and error.host == proxy_host
    ):
        return retryable(Reason.PROXY_ERROR, detail)
    if isinstance(error, HeadersTooLargeError):
        return permanent(Reason.HEADERS_TOO_LARGE, detail)
    if isinstance(error, UnsupportedEncodingError):
        return permanent(Reason.UNSUPPORTED_ENCODING, detail)
    if isinstance(error, CorruptEncodingError):
        return permanent(Reason.CORRUPT_ENCODING, detail)
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        return permanent(Reason.TLS_CERTIFICATE, detail)
    if isinstance(error, aiohttp.ClientSSLError):
        return retryable(Reason.TLS_ERROR, detail)
    if isinstance(error, aiohttp.ClientConnectorDNSError):
        not_found = isinstance(error.os_error, socket.gaierror) and (
            error.os_error.errno in _DNS_NOT_FOUND
        )
        return _dns_failure(not_found, detail)
    if isinstance(error, socket.gaierror):  # a target's name resolved before a proxy sees it
        return _dns_failure(error.errno in _DNS_NOT_FOUND, detail)
    return _classify_transport(error, detail)


def _dns_failure(not_found: bool, detail: str) -> Failure:
    if not_found:
        return permanent(Reason.DNS_NOT_FOUND, detail)
    return retryable(Reason.DNS_ERROR, detail)


def _classify_transport(error: BaseException, detail: str) -> Failure:
    """Timeouts, connection errors and malformed responses."""
    if isinstance(error, aiohttp.ConnectionTimeoutError):
        return retryable(Reason.CONNECT_TIMEOUT, detail)
    if isinstance(error, aiohttp.ServerTimeoutError):
        return retryable(Reason.READ_TIMEOUT, detail)
    if isinstance(error, TimeoutError):
        return retryable(Reason.TIMEOUT, detail or "total deadline")
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return retryable(Reason.DISCONNECTED, detail)
    if isinstance(error, aiohttp.ClientPayloadError):
        return retryable(Reason.INCOMPLETE_BODY, detail)
    if isinstance(error, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        return permanent(Reason.INVALID_URL, detail)
    if isinstance(error, aiohttp.ClientResponseError):
        # Raised before any response exists: the parser refused the status line or headers.
        lowered = error.message.lower()
        if any(marker in lowered for marker in _HEADER_LIMIT_MESSAGES):
            return permanent(Reason.HEADERS_TOO_LARGE, error.message[:300])
        return permanent(Reason.BAD_RESPONSE, error.message[:300])
    if isinstance(error, aiohttp.ClientError | OSError):
        return retryable(Reason.CONNECTION_ERROR, detail)
    raise TypeError(f"not a fetch error: {type(error).__name__}") from error


def _causes(error: BaseException) -> Iterator[BaseException]:
    """The error, what it wraps (``os_error``), and its causes, at most a few levels deep."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return
        yield seen
        wrapped = getattr(seen, "os_error", None)
        if isinstance(wrapped, BaseException) and wrapped is not seen:
            yield wrapped
        seen = seen.__cause__ or seen.__context__
