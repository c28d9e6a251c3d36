"""The WARC records of one fetch, as fields: ids, dates, digests and the HTTP blocks.

Record ids are name-based UUIDs of the fetch (URL, fetch time, lease id) and the record's type, so
the same fetch always gets the same ids (what makes redelivery detectable, see `storage.warc`).
Digests are SHA-256 in base32, labelled `sha256:` as WARC 1.1 allows.

The response and request records of every new page are laid out here, byte for byte as warcio's
`RecordBuilder` and `WARCWriter` lay them out (same header order, same Content-Type and
Content-Length; tests/unit/storage/test_records.py compares the two), because warcio's generic path
(header objects, 16 KB stream copies, pure-Python base32) cost about as much CPU as compressing the
page. The HTTP header block is still warcio's `StatusAndHeaders` whenever a header is not plain
ASCII (it percent-encodes those); revisit and warcinfo records go through warcio itself.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http
import re
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders

from schemas.pages import FetchedPage

RECORD_NAMESPACE = uuid.UUID("6f1b8f5e-3c2a-4f4e-9a57-2a0c0e7d7b11")
_ENCODING_HEADERS = {"content-encoding", "transfer-encoding"}
_LINE_BREAKS = re.compile(r"[\r\n]+")
_REASONS = {status.value: status.phrase for status in http.HTTPStatus}
_SIMPLE_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#\[\]]*)(/[^?#]*)?(?:\?([^#]*))?(?:#.*)?")
"""An absolute URL `urlsplit` takes apart by its delimiters alone (checked printable ASCII first):
netloc without IPv6 brackets, then path, query, fragment."""
_VARIANT_DIGIT = {f"{n:x}": f"{n & 0x3 | 0x8:x}" for n in range(16)}
"""A hex digit with its top two bits set to RFC 4122's variant, 10."""


_NAMESPACE_BYTES = RECORD_NAMESPACE.bytes
_B32_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_PAIRS = [first + second for first in _B32_ALPHABET for second in _B32_ALPHABET]
"""Base32 digits two at a time: index = 10 bits."""
WARC_VERSION = "WARC/1.1"
RESPONSE_TYPE = "application/http; msgtype=response"
REQUEST_TYPE = "application/http; msgtype=request"
RECORD_END = b"\r\n\r\n"


def record_id(kind: str, page: FetchedPage) -> str:
    """`<urn:uuid:...>` of uuid5(RECORD_NAMESPACE, name), without building a UUID object: the
    SHA-1's first 32 hex digits with the version digit made 5 and the variant bits 10."""
    name = f"{kind}\n{page.url}\n{page.fetched_at}\n{page.lease_id}"
    h = hashlib.sha1(_NAMESPACE_BYTES + name.encode()).hexdigest()
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-5{h[13:16]}-{_VARIANT_DIGIT[h[16]]}{h[17:20]}-{h[20:32]}>"


@functools.lru_cache(maxsize=1024)
def warc_date(epoch_ms: int) -> str:
    moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def b32_digest(sha256: bytes) -> str:
    """A WARC digest value: `sha256:` and the 32-byte digest in base32 (RFC 4648, padded)."""
    if len(sha256) != 32:
        return "sha256:" + base64.b32encode(sha256).decode()
    bits = int.from_bytes(sha256, "big") << 4  # 256 bits padded to 52 five-bit digits
    pairs = _B32_PAIRS
    return (
        "sha256:"
        + "".join([pairs[(bits >> shift) & 0x3FF] for shift in range(250, -1, -10)])
        + "===="
    )


def sha256_digest(hex_digest: str) -> str:
    """A WARC digest value from a hex SHA-256."""
    return b32_digest(bytes.fromhex(hex_digest))


EMPTY_PAYLOAD_DIGEST = b32_digest(hashlib.sha256(b"").digest())
"""A GET request carries no body."""


def _clean(value: str) -> str:
    if "\r" in value or "\n" in value:
        return _LINE_BREAKS.sub(" ", value)
    return value


def response_headers(page: FetchedPage, body_length: int) -> StatusAndHeaders:
    reason = _REASONS.get(page.status, "Unknown")
    headers: list[tuple[str, str]] = []
    for name, value in page.headers.items():
        lowered = name.lower()
        if lowered == "content-length":
            continue
        shown = f"X-Archive-Orig-{name}" if lowered in _ENCODING_HEADERS else name
        headers.append((_clean(shown), _clean(value)))
    headers.append(("Content-Length", str(body_length)))
    return StatusAndHeaders(f"{page.status} {reason}", headers, protocol="HTTP/1.1")


def http_header_block(page: FetchedPage, body_length: int) -> bytes:
    """The response's HTTP header block, as warcio's `compute_headers_buffer` makes it."""
    reason = _REASONS.get(page.status, "Unknown")
    lines = [f"HTTP/1.1 {page.status} {reason}\r\n"]
    for name, value in page.headers.items():
        lowered = name.lower()
        if lowered == "content-length":
            continue
        shown = f"X-Archive-Orig-{name}" if lowered in _ENCODING_HEADERS else name
        lines.append(f"{_clean(shown)}: {_clean(value)}\r\n")
    lines.append(f"Content-Length: {body_length}\r\n\r\n")
    try:
        return "".join(lines).encode("ascii")
    except UnicodeEncodeError:
        headers = response_headers(page, body_length)  # warcio percent-encodes what is not ASCII
        headers.compute_headers_buffer()
        block: bytes = headers.headers_buff
        return block


def warc_header_block(
    record_type: str,
    target_uri: str,
    fields: Iterable[tuple[str, str]],
    content_type: str,
    length: int,
) -> bytes:
    """A record's WARC header block, fields in warcio's order: the given ones, then WARC-Type,
    WARC-Target-URI, Content-Type and Content-Length."""
    head = "".join([f"{name}: {value}\r\n" for name, value in fields])
    return (
        f"{WARC_VERSION}\r\n{head}WARC-Type: {record_type}\r\nWARC-Target-URI: {target_uri}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def request_bytes(url: str) -> bytes:
    """The request as the fetcher sends it; the fetcher records no request headers of its own.
    Host and target are `urlsplit`'s, read straight off a plain URL (most of them)."""
    simple = _SIMPLE_URL.fullmatch(url) if url.isascii() and url.isprintable() else None
    if simple is not None and " " not in url:
        netloc, path, query = simple.groups()
    else:
        parts = urlsplit(url)
        netloc, path, query = parts.netloc, parts.path, parts.query
    target = (path or "/") + (f"?{query}" if query else "")
    return f"GET {target} HTTP/1.1\r\nHost: {netloc}\r\n\r\n".encode()
