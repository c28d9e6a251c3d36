"""The records `storage.records` lays out by hand are the bytes warcio itself would write."""

from __future__ import annotations

import base64
import hashlib
import io
import random
import uuid
import zlib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from warcio.recordbuilder import RecordBuilder
from warcio.warcwriter import WARCWriter

from schemas.pages import FetchedPage
from storage.records import (
    EMPTY_PAYLOAD_DIGEST,
    RECORD_NAMESPACE,
    WARC_VERSION,
    b32_digest,
    record_id,
    request_bytes,
    response_headers,
    sha256_digest,
    warc_date,
)
from storage.warc import WarcWriter
from tests.unit.storage.archive import make_page


def warcio_records(page: FetchedPage, body: bytes) -> tuple[bytes, bytes]:
    """The response and request records as warcio's generic builder and writer make them."""
    builder = RecordBuilder(warc_version=WARC_VERSION)
    http_headers = response_headers(page, len(body))
    http_headers.compute_headers_buffer()
    block = hashlib.sha256(http_headers.headers_buff + body).digest()
    fields = {
        "WARC-Record-ID": record_id("response", page),
        "WARC-Date": warc_date(page.fetched_at),
        "WARC-Payload-Digest": sha256_digest(page.sha256),
        "WARC-Block-Digest": b32_digest(block),
    }
    if page.truncated:
        fields["WARC-Truncated"] = "length"
    response = builder.create_warc_record(
        page.final_url,
        "response",
        payload=io.BytesIO(body),
        length=len(body),
        http_headers=http_headers,
        warc_headers_dict=fields,
    )
    message = request_bytes(page.final_url)
    request = builder.create_warc_record(
        page.final_url,
        "request",
        payload=io.BytesIO(message),
        length=len(message),
        warc_headers_dict={
            "WARC-Record-ID": record_id("request", page),
            "WARC-Date": warc_date(page.fetched_at),
            "WARC-Concurrent-To": fields["WARC-Record-ID"],
            "WARC-Payload-Digest": EMPTY_PAYLOAD_DIGEST,
            "WARC-Block-Digest": b32_digest(hashlib.sha256(message).digest()),
        },
    )
    written = []
    for record in (response, request):
        out = io.BytesIO()
        WARCWriter(out, gzip=False, warc_version=WARC_VERSION).write_record(record)
        written.append(out.getvalue())
    return written[0], written[1]


PAGES = {
    "plain": (make_page("https://example.org/a?b=1", b"<html>hello</html>"), b"<html>hello</html>"),
    "truncated": (
        make_page("https://example.org/big", b"x" * 5000, truncated=True),
        b"x" * 5000,
    ),
    "encoded": (
        make_page(
            "https://example.org/gz",
            b"decoded body",
            headers={"Content-Encoding": "gzip", "Content-Length": "31", "Server": "s"},
        ),
        b"decoded body",
    ),
    "not ascii": (
        make_page(
            "https://example.org/u",
            b"body",
            headers={"Content-Disposition": "attachment; filename=caf\u00e9.txt", "X-A": "\u00fc"},
        ),
        b"body",
    ),
    "line breaks and an unknown status": (
        make_page("https://example.org/s", b"", status=599, headers={"X-Split": "a\r\nb"}),
        b"",
    ),
}


@pytest.mark.parametrize("case", sorted(PAGES))
def test_response_and_request_records_are_the_bytes_warcio_writes(
    tmp_path: Path, case: str
) -> None:
    page, body = PAGES[case]
    prepared = WarcWriter(tmp_path, "w", max_bytes=1 << 20).prepare_response(page, body)
    expected_response, expected_request = warcio_records(page, body)
    assert zlib.decompress(prepared.main, wbits=31) == expected_response
    assert zlib.decompress(prepared.request, wbits=31) == expected_request


def test_record_ids_are_the_name_based_uuids_of_the_fetch() -> None:
    for n in range(200):  # every variant digit comes up
        page = make_page(f"https://example.org/id/{n}", b"x", lease_id=f"lease-{n}")
        for kind in ("response", "request", "revisit"):
            name = f"{kind}\n{page.url}\n{page.fetched_at}\n{page.lease_id}"
            assert record_id(kind, page) == f"<urn:uuid:{uuid.uuid5(RECORD_NAMESPACE, name)}>"


def test_base32_digests_match_the_standard_library() -> None:
    for seed in range(300):
        digest = hashlib.sha256(str(seed).encode()).digest()
        assert b32_digest(digest) == "sha256:" + base64.b32encode(digest).decode()
    short = hashlib.sha1(b"x").digest()
    assert b32_digest(short) == "sha256:" + base64.b32encode(short).decode()


def test_request_targets_and_hosts_are_those_urlsplit_finds() -> None:
    rng = random.Random(7)
    pieces = [
        "a",
        "Z",
        "9",
        "/",
        "//",
        "?",
        "#",
        ":",
        "@",
        "[",
        "]",
        "%20",
        " ",
        "\t",
        "\u00e9",
        "=",
    ]
    urls = [
        "https://example.org",
        "https://example.org?q",
        "https://example.org/a?",
        "https://example.org/a#f?x",
        "https://u:p@example.org:8443/a/b?c=d&e#f",
        "http://[::1]:8080/x?y",
        "https:///nohost",
        "mailto:someone",
    ]
    for _ in range(3000):
        scheme = rng.choice(["https://", "http://", "HTTP://", "x+y.z-1://", "1a://", "", "https:"])
        urls.append(scheme + "".join(rng.choices(pieces, k=rng.randint(0, 12))))
    for url in urls:
        try:
            parts = urlsplit(url)
        except ValueError:  # an unbalanced IPv6 bracket: so must the records say
            with pytest.raises(ValueError):
                request_bytes(url)
            continue
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        expected = f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode()
        assert request_bytes(url) == expected, url
