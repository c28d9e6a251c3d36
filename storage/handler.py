"""The storage's logic for one fetched page: blob, WARC records, index entry (DESIGN section 3,
step 6). No Kafka: the kernel calls `handle` with the page and its partition's index table.

For a page arriving on `pages`:
1. the URL's history is read from the index and the fetch classified (`storage.index.classify`):
   a redelivery changes nothing and writes nothing, nor does a bodiless revisit page (a recrawl's
   304 or same-hash answer) of content the index does not hold as the URL's latest;
2. its body must hash to the `sha256` the fetcher sent (else it is dead-lettered and nothing is
   written: a content-addressed store must never file a body under another body's name);
3. an unchanged page (a revisit page, or a body that hashes as the latest) gets a revisit record
   and only moves the latest version's timestamp; a new or changed one gets its blob (written only
   if no blob has that hash yet), its response and request records and a new version;
4. the new history is put in the table; the kernel ships it to the changelog and commits the
   page's offset, then writes the index.

The expensive part of a new body is compressing it twice (zstd for the blob, gzip for the WARC).
With an executor, the blob (zstd, temporary file, rename) is handed to its one thread
(`storage.handoff`, one job per cycle) and `handle` returns without waiting, so the next page's
records are built while that blob is compressed (zstd, ISA-L, hashlib and file writes release the
GIL). The body's hash is checked first, on this thread, so a body that does not match is
dead-lettered before anything is written. The WARC writer holds the cycle's records in memory. The
loop calls `on_tick` after the last `handle` of a cycle and before it delivers, commits and writes
the index (streamcrawl.loop, steps 3 to 6): `on_tick` writes the records out and waits for every
blob handed off, so no offset is committed and no index entry is written before its records and
its blob are on disk. The fetcher's sha256 is checked once (here) and then trusted for the blob's
name and the WARC-Payload-Digest; the only second pass over the body is the WARC-Block-Digest,
which covers the HTTP header block as well.

The blob and the WARC records are on disk before the offset is committed. A crash in between
redelivers the page to an index that does not have it: the blob is already there (content
addressed, not written again), and the WARC writer returns the records it already holds (see
`storage.warc` for the one case where a second identical record is appended), so the index ends
with the same single entry either way.

A disk that fails a write (OSError: full, read-only, I/O error) is not the page's fault, so the
page is not dead-lettered: the handler stops handling, the next `on_tick` drops the WARC records
still held and raises `StorageUnavailableError`, and the service stops before the cycle commits
anything. Every page of
that cycle (and after) stays in `pages` and is stored once an operator has fixed the disk and the
supervisor restarted the instance; what had reached the disk already is found again, not doubled.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import Executor

from schemas.pages import FetchedPage
from storage import metrics
from storage.blobs import BlobStore, BlobWrite, blob_path, is_sha256_hex
from storage.exceptions import StorageUnavailableError, WarcError
from storage.fetchrecords import RevisitTarget
from storage.handoff import BlobHandoff
from storage.index import (
    TABLE,
    Change,
    PageHistory,
    PageVersion,
    RecordRef,
    classify,
    decode_history,
    encode_first_history,
    encode_history,
    version_fields,
    with_new_version,
    with_revisit,
)
from storage.records import warc_date
from storage.warc import WarcWriter
from streamcrawl.handler import BaseHandler, Context, Record


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
        self._handoff = BlobHandoff(blobs, executor) if executor is not None else None
        self._failure: OSError | WarcError | None = None
        self._counts = metrics.StorageCounts()

    @staticmethod
    def tables() -> tuple[str, ...]:
        return (TABLE,)

    def handle(self, record: Record, ctx: Context) -> None:
        if self._failure is not None:
            return  # the disk failed earlier in this cycle: on_tick stops the service uncommitted
        page, body = record.value
        if not is_sha256_hex(page.sha256):
            ctx.dead_letter(f"sha256 is not a lowercase hex digest: {page.sha256[:80]!r}")
            return
        table = ctx.table(TABLE)
        key = page.url.encode()
        history = decode_history(table.get(key))
        change = classify(history, page)
        if change is Change.REDELIVERED:
            self._counts.redelivered += 1
            return
        if change is Change.UNMATCHED_REVISIT:
            # No body came and none is stored under the URL with that hash (this storage joined
            # after the first fetch): there is nothing to point a revisit record at.
            self._counts.revisits_unmatched += 1
            return
        problem = None if page.revisit else body_problem(page, body)
        if problem is not None:
            ctx.dead_letter(problem)
            return
        try:
            if change is Change.UNCHANGED and history is not None:
                updated = self._revisit(history, page)
            else:
                updated = self._store(history, page, body)
        except (OSError, WarcError) as error:
            self._failure = error
            return
        table.put(key, updated)

    def on_tick(self, ctx: Context) -> None:
        self.settle()

    def on_stop(self) -> None:
        self.settle()

    def close(self) -> None:
        """Let the blob thread's job end without settling (the service is stopping on an error and
        commits nothing more), so the executor can shut down."""
        if self._handoff is not None:
            self._handoff.close()

    def settle(self) -> None:
        """Write out the WARC records and wait for every blob handed to the executor; raise
        StorageUnavailableError if the disk failed a write since the last settle (the loop then
        stops before it commits)."""
        try:
            self._warc.flush()
        except WarcError as error:
            self._failure = self._failure or error
        if self._handoff is not None:
            written, failure = self._handoff.settle()
            for blob in written:
                self._count_blob(blob)
            self._failure = self._failure or failure
        self._counts.publish()
        if self._failure is not None:
            self._warc.discard_held()
            raise StorageUnavailableError(
                f"storage cannot write under {self._blobs.root}: {self._failure}"
            ) from self._failure

    def _count_blob(self, blob: BlobWrite) -> None:
        self._counts.bytes_written += blob.stored_bytes
        self._counts.blobs_written += 1 if blob.written else 0

    def _revisit(self, history: PageHistory, page: FetchedPage) -> bytes:
        latest = history.latest
        target = RevisitTarget(latest.warc_record_id, latest.final_url, latest.warc_date)
        written = self._warc.write_revisit(page, target)
        self._counts.pages_unchanged += 1
        self._counts.bytes_written += written.bytes_written
        location = written.location
        reference = RecordRef(
            warc_file=location.file,
            warc_offset=location.offset,
            warc_length=location.length,
            record_id=location.record_id,
        )
        return encode_history(with_revisit(history, page, reference))

    def _store(self, history: PageHistory | None, page: FetchedPage, body: bytes) -> bytes:
        """A new version: its blob (handed off when there is an executor), its records and the
        URL's encoded history."""
        if self._handoff is None:
            self._count_blob(self._blobs.put(page.sha256, body))
        else:
            self._handoff.put(page.sha256, body)
        written = self._warc.write_response(page, body)
        self._counts.pages_stored += 1
        self._counts.bytes_written += written.bytes_written
        location = written.location
        version = version_fields(
            page,
            blob=blob_path(page.sha256),
            warc_file=location.file,
            warc_offset=location.offset,
            warc_length=location.length,
            warc_record_id=location.record_id,
            warc_date=warc_date(page.fetched_at),
        )
        if history is None:
            return encode_first_history(page, version)
        changed = with_new_version(history, page, PageVersion(**version), self._history_limit)
        return encode_history(changed)
