"""The WARC records of one fetch, as fields: ids, dates, digests and the HTTP blocks.

Record ids are name-based UUIDs of the fetch (URL, fetch time, lease id) and the record's type, so
the same fetch always gets the same ids (what makes redelivery detectable, see `storage.warc`).
Digests are SHA-256 in base32, labelled `sha256:` as WARC 1.1 allows.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http
import re
import uuid
from datetime import UTC, datetime
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders

from schemas.pages import FetchedPage

RECORD_NAMESPACE = uuid.UUID("6f1b8f5e-3c2a-4f4e-9a57-2a0c0e7d7b11")
_ENCODING_HEADERS = {"content-encoding", "transfer-encoding"}
_LINE_BREAKS = re.compile(r"[\r\n]+")


def record_id(kind: str, page: FetchedPage) -> str:
    name = f"{kind}\n{page.url}\n{page.fetched_at}\n{page.lease_id}"
    return f"<urn:uuid:{uuid.uuid5(RECORD_NAMESPACE, name)}>"


@functools.lru_cache(maxsize=1024)
def warc_date(epoch_ms: int) -> str:
    moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def b32_digest(sha256: bytes) -> str:
    """A WARC digest value: `sha256:` and the digest in base32."""
    return "sha256:" + base64.b32encode(sha256).decode()


def sha256_digest(hex_digest: str) -> str:
    """A WARC digest value from a hex SHA-256."""
    return b32_digest(bytes.fromhex(hex_digest))


EMPTY_PAYLOAD_DIGEST = b32_digest(hashlib.sha256(b"").digest())
"""A GET request carries no body."""


def _clean(value: str) -> str:
    return _LINE_BREAKS.sub(" ", value)


def response_headers(page: FetchedPage, body_length: int) -> StatusAndHeaders:
    try:
        reason = http.HTTPStatus(page.status).phrase
    except ValueError:
        reason = "Unknown"
    headers: list[tuple[str, str]] = []
    for name, value in page.headers.items():
        lowered = name.lower()
        if lowered == "content-length":
            continue
        shown = f"X-Archive-Orig-{name}" if lowered in _ENCODING_HEADERS else name
        headers.append((_clean(shown), _clean(value)))
    headers.append(("Content-Length", str(body_length)))
    return StatusAndHeaders(f"{page.status} {reason}", headers, protocol="HTTP/1.1")


def request_bytes(url: str) -> bytes:
    """The request as the fetcher sends it; the fetcher records no request headers of its own."""
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode()
