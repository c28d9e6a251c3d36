"""A fetch's WARC records, each made into its own gzip member, ready to append to a file.

A new page gets a response record and a request record, laid out by `storage.records` byte for byte
as warcio lays them out (tests/unit/storage/test_records.py compares the two); an unchanged page
gets a revisit record with the identical-payload-digest profile (server-not-modified for a 304)
pointing at the earlier response, and its request; a file begins with a warcinfo record. Revisit
and warcinfo records go through warcio itself. Members are compressed by ISA-L (the same deflate
format as zlib's, several times faster).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass

from isal import isal_zlib
from warcio.recordbuilder import RecordBuilder
from warcio.warcwriter import WARCWriter

from schemas.pages import FetchedPage
from storage.records import (
    EMPTY_PAYLOAD_DIGEST,
    RECORD_END,
    REQUEST_TYPE,
    RESPONSE_TYPE,
    WARC_VERSION,
    b32_digest,
    http_header_block,
    record_id,
    request_bytes,
    response_headers,
    sha256_digest,
    warc_date,
    warc_header_block,
)

SERVER_NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"


@dataclass(frozen=True, slots=True)
class RevisitTarget:
    """The earlier response an unchanged page's revisit record refers to."""

    record_id: str
    target_uri: str
    date: str


class RecordMaker:
    """For one thread at a time (warcio's writer is reused)."""

    def __init__(self, gzip_level: int) -> None:
        self._level = gzip_level
        self._builder = RecordBuilder(warc_version=WARC_VERSION)
        self._serializer = WARCWriter(None, gzip=False, warc_version=WARC_VERSION)

    def response(self, page: FetchedPage, body: bytes, response_id: str) -> bytes:
        http_block = http_header_block(page, len(body))
        block = hashlib.sha256(http_block)
        block.update(body)
        fields = [
            ("WARC-Record-ID", response_id),
            ("WARC-Date", warc_date(page.fetched_at)),
            ("WARC-Payload-Digest", sha256_digest(page.sha256)),
            ("WARC-Block-Digest", b32_digest(block.digest())),
        ]
        if page.truncated:
            fields.append(("WARC-Truncated", "length"))
        head = warc_header_block(
            "response", page.final_url, fields, RESPONSE_TYPE, len(http_block) + len(body)
        )
        return self._member(head, http_block, body, RECORD_END)

    def revisit(self, page: FetchedPage, refers_to: RevisitTarget, revisit_id: str) -> bytes:
        fields = {
            "WARC-Record-ID": revisit_id,
            "WARC-Date": warc_date(page.fetched_at),
            "WARC-Refers-To": refers_to.record_id,
        }
        record = self._builder.create_revisit_record(
            page.final_url,
            sha256_digest(page.sha256),
            refers_to.target_uri,
            refers_to.date,
            http_headers=response_headers(page, 0),
            warc_headers_dict=fields,
        )
        if page.status == 304:  # the server said so itself; a same-hash 200 keeps warcio's profile
            record.rec_headers.replace_header("WARC-Profile", SERVER_NOT_MODIFIED_PROFILE)
        return self._serialize(record)

    def request(self, page: FetchedPage, concurrent_to: str) -> bytes:
        message = request_bytes(page.final_url)
        fields = (
            ("WARC-Record-ID", record_id("request", page)),
            ("WARC-Date", warc_date(page.fetched_at)),
            ("WARC-Concurrent-To", concurrent_to),
            ("WARC-Payload-Digest", EMPTY_PAYLOAD_DIGEST),
            ("WARC-Block-Digest", b32_digest(hashlib.sha256(message).digest())),
        )
        head = warc_header_block("request", page.final_url, fields, REQUEST_TYPE, len(message))
        return self._member(head, message, RECORD_END, level=0)  # a few hundred bytes: level 0

    def warcinfo(self, filename: str) -> bytes:
        info = self._builder.create_warcinfo_record(
            filename, {"software": "streamcrawl", "format": "WARC File Format 1.1"}
        )
        return self._serialize(info)

    def _serialize(self, record: object) -> bytes:
        """warcio's serialization, uncompressed, made into one gzip member by ISA-L."""
        out = io.BytesIO()
        self._serializer.out = out
        self._serializer.write_record(record)
        return isal_zlib.compress(out.getbuffer(), self._level, wbits=31)

    def _member(self, *parts: bytes, level: int | None = None) -> bytes:
        """One gzip member of the parts, compressed by ISA-L (the maker's level unless given)."""
        chosen = self._level if level is None else level
        return isal_zlib.compress(b"".join(parts), chosen, wbits=31)
