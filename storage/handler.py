"""The storage's logic for one fetched page: blob, WARC records, index entry (DESIGN section 3,
step 6). No Kafka: the kernel calls `handle` with the page and its partition's index table.

For a page arriving on `pages`:
1. the URL's history is read from the index and the fetch classified (`storage.index.classify`):
   a redelivery changes nothing and writes nothing;
2. its body must hash to the `sha256` the fetcher sent (else it is dead-lettered: a content-
   addressed store must never file a body under another body's name);
3. an unchanged page gets a revisit record and only moves the latest version's timestamp; a new or
   changed one gets its blob (written only if no blob has that hash yet), its response and request
   records and a new version;
4. the new history is put in the table; the kernel ships it to the changelog and commits the
   page's offset, then writes the index.

The expensive part of a new body is compressing it twice (zstd for the blob, gzip for the WARC).
With an executor, the SHA-256 check and the WARC records are prepared on its thread while this one
compresses the blob (both libraries release the GIL), and only then is anything written: blob
first, then the records. On one free core that changes nothing; with two it nearly halves the time.

The blob and the WARC records are on disk before the offset is committed. A crash in between
redelivers the page to an index that does not have it: the blob is already there (content
addressed, not written again), and the WARC writer returns the records it already holds (see
`storage.warc` for the one case where a second identical record is appended), so the index ends
with the same single entry either way.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import Executor

from schemas.pages import FetchedPage
from storage import metrics
from storage.blobs import BlobStore, BlobWrite, blob_path, is_sha256_hex
from storage.index import (
    TABLE,
    Change,
    PageHistory,
    PageVersion,
    RecordRef,
    classify,
    decode_history,
    encode_history,
    with_new_version,
    with_revisit,
)
from storage.warc import PreparedFetch, RevisitTarget, WarcWriter, warc_date
from streamcrawl.handler import BaseHandler, Context, Record

Prepared = tuple[str | None, PreparedFetch | None]
"""A problem with the body, or the fetch's WARC records ready to append."""


def body_problem(page: FetchedPage, body: bytes) -> str | None:
    """Why the body cannot be filed under the page's sha256, or None when it can."""
    actual = hashlib.sha256(body).hexdigest()
    if actual != page.sha256:
        return f"body hashes to {actual}, the page says {page.sha256}"
    return None


class StorageHandler(BaseHandler):
    def __init__(
        self,
        blobs: BlobStore,
        warc: WarcWriter,
        history_limit: int = 64,
        executor: Executor | None = None,
    ) -> None:
        self._blobs = blobs
        self._warc = warc
        self._history_limit = history_limit
        self._executor = executor

    @staticmethod
    def tables() -> tuple[str, ...]:
        return (TABLE,)

    def handle(self, record: Record, ctx: Context) -> None:
        page, body = record.value
        if not is_sha256_hex(page.sha256):
            ctx.dead_letter(f"sha256 is not a lowercase hex digest: {page.sha256[:80]!r}")
            return
        table = ctx.table(TABLE)
        key = page.url.encode()
        history = decode_history(table.get(key))
        change = classify(history, page)
        if change is Change.REDELIVERED:
            metrics.REDELIVERED.inc()
            return
        if change is Change.UNCHANGED and history is not None:
            problem = body_problem(page, body)
            updated = None if problem is not None else self._revisit(history, page)
        else:
            problem, updated = self._store(history, page, body)
        if updated is None:
            ctx.dead_letter(problem or "the page could not be stored")
            return
        table.put(key, encode_history(updated))

    def _revisit(self, history: PageHistory, page: FetchedPage) -> PageHistory:
        latest = history.latest
        target = RevisitTarget(latest.warc_record_id, latest.final_url, latest.warc_date)
        written = self._warc.write_revisit(page, target)
        metrics.PAGES_UNCHANGED.inc()
        metrics.BYTES_WRITTEN.inc(written.bytes_written)
        location = written.location
        reference = RecordRef(
            warc_file=location.file,
            warc_offset=location.offset,
            warc_length=location.length,
            record_id=location.record_id,
        )
        return with_revisit(history, page, reference)

    def _prepare(self, page: FetchedPage, body: bytes) -> Prepared:
        problem = body_problem(page, body)
        if problem is not None:
            return problem, None
        return None, self._warc.prepare_response(page, body)

    def _compress_and_prepare(
        self, page: FetchedPage, body: bytes
    ) -> tuple[bytes | None, Prepared]:
        """The blob's compressed bytes (None when the blob exists) and the prepared records."""
        if self._executor is None:
            prepared = self._prepare(page, body)
            needed = prepared[0] is None and not self._blobs.exists(page.sha256)
            return (self._blobs.compress(body) if needed else None), prepared
        future = self._executor.submit(self._prepare, page, body)
        compressed = None if self._blobs.exists(page.sha256) else self._blobs.compress(body)
        return compressed, future.result()

    def _store(
        self, history: PageHistory | None, page: FetchedPage, body: bytes
    ) -> tuple[str | None, PageHistory | None]:
        compressed, (problem, prepared) = self._compress_and_prepare(page, body)
        if prepared is None:
            return problem, None
        if compressed is None:
            blob = BlobWrite(blob_path(page.sha256), written=False, stored_bytes=0)
        else:
            blob = self._blobs.put_compressed(page.sha256, compressed)
        written = self._warc.append(prepared)
        metrics.PAGES_STORED.inc()
        metrics.BYTES_WRITTEN.inc(blob.stored_bytes + written.bytes_written)
        if blob.written:
            metrics.BLOBS_WRITTEN.inc()
        location = written.location
        version = PageVersion(
            fetched_at=page.fetched_at,
            last_fetched_at=page.fetched_at,
            status=page.status,
            content_hash=page.sha256,
            content_type=page.content_type,
            body_size=page.body_size,
            truncated=page.truncated,
            crawl_id=page.crawl_id,
            final_url=page.final_url,
            blob=blob.path,
            warc_file=location.file,
            warc_offset=location.offset,
            warc_length=location.length,
            warc_record_id=location.record_id,
            warc_date=warc_date(page.fetched_at),
        )
        return None, with_new_version(history, page, version, self._history_limit)
