"""The WARC writer of one storage instance: request, response and revisit records.

For each fetch it writes the response (or, for an unchanged page, a revisit record with the
identical-payload-digest profile pointing at the earlier response) followed by the request, each its
own gzip member (made by `storage.fetchrecords`), to the current file of the page's crawl (layout
in `storage.warcfiles`). A file is rotated before it would pass `warc_max_bytes`; each file begins
with a warcinfo record. A fetch's records are held in memory and written out by `flush`, which the
handler calls before the loop commits (and sooner once a file holds a megabyte): one write per
cycle, where one per page cost a syscall per page. What a crash loses of them was not committed,
so it comes again.

Fields: WARC-Target-URI (the URL the body came from), WARC-Date (the fetch time, milliseconds),
WARC-Payload-Digest and WARC-Block-Digest (sha256, base32), WARC-Truncated: length when the fetcher
cut the body, WARC-Concurrent-To linking the request to its response. The HTTP header block is the
response's as the fetcher saw it, except that the body is stored decoded: Content-Encoding and
Transfer-Encoding are kept as X-Archive-Orig-* and Content-Length is the stored length, so the
record's HTTP message is self-consistent (what wget and Heritrix's tooling do with decoded bodies).

Idempotence: record ids are derived from the fetch (URL, fetch time, lease id), so a redelivered
page yields the same ids. The writer remembers the location of every record it wrote recently; after
a crash it learns them again from its journal (`storage.journal`, which also covers files rotated
since the last commit) and from a walk of the files it had open (where a torn last member is cut
off). A record it already holds is not written again: its existing location is returned. A page
redelivered to a different instance (after a rebalance) does append a second, identical record to
that instance's file, which the index does not point to and `storage export` drops by record id.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from schemas.pages import FetchedPage
from storage.exceptions import WarcError
from storage.fetchrecords import RecordMaker, RevisitTarget
from storage.journal import RecordJournal
from storage.records import record_id
from storage.warcfiles import (
    OPEN_SUFFIX,
    WARC_DIR,
    WARC_SUFFIX,
    TornMemberError,
    crawl_directory,
    iter_members,
    record_head,
)
from streamcrawl.crashpoints import CrashPoints

FILE_PREFIX = "streamcrawl"
REMEMBERED_RECORDS = 50_000
"""Record ids kept for redelivery detection: far more than can be uncommitted at once (at most
`loop.max_uncommitted_per_partition`, 500 by default, per partition held)."""
WRITE_OUT_BYTES = 1 << 20
"""Bytes of records held for a file before they are written out even though no `flush` came."""
CRASH_MID_WARC = "storage_mid_warc"
"""Crash point: half of a fetch's records are in the file, the rest never will be."""


@dataclass(frozen=True, slots=True)
class WarcLocation:
    file: str
    """Relative to `storage.root`."""
    offset: int
    length: int
    record_id: str


@dataclass(frozen=True, slots=True)
class WrittenFetch:
    location: WarcLocation
    """The response or revisit record."""
    bytes_written: int
    """0 when the records were already in a file (a redelivery)."""


@dataclass(frozen=True, slots=True)
class PreparedFetch:
    """A fetch's records, each a compressed gzip member, ready to append."""

    crawl_id: str
    main_id: str
    main: bytes
    request: bytes
    known: WarcLocation | None
    """Set when these records are already in a file: nothing is appended."""


@dataclass
class _OpenFile:
    path: Path
    relative: str
    handle: BinaryIO
    size: int
    """Where the next record goes: the bytes in the file and those held in `held`."""
    written: int
    """The bytes in the file."""
    records_from: int = 0
    """Where the first fetch's records begin (after the warcinfo record)."""
    held: list[bytes] = field(default_factory=list)
    """Records appended since the last write-out, in order."""
    held_lines: list[tuple[str, int, int]] = field(default_factory=list)
    """Their journal lines (record id, offset, length), which go to the journal once they are
    written: a line never reaches the journal before its records reach the file."""


class WarcWriter:
    def __init__(
        self,
        root: Path,
        instance_id: str,
        *,
        max_bytes: int,
        gzip_level: int = 1,
        fsync: bool = False,
        max_open: int = 16,
        crash_points: CrashPoints | None = None,
    ) -> None:
        self.root = root
        self._instance = re.sub(r"[^A-Za-z0-9.-]", "_", instance_id)
        self._max_bytes = max_bytes
        self._fsync = fsync
        self._max_open = max_open
        self._crash = crash_points
        """None unless a test armed one: then each fetch is written in two halves around it."""
        self._records = RecordMaker(gzip_level)
        self._open: OrderedDict[str, _OpenFile] = OrderedDict()
        self._known: OrderedDict[str, WarcLocation] = OrderedDict()
        self._serial = 0
        self._journal = RecordJournal(root, self._instance, REMEMBERED_RECORDS // 2, fsync)

    # ----- recovery --------------------------------------------------------------------------

    def recover(self) -> list[str]:
        """Close out the files this instance had open when it died: cut a torn last member, learn
        the ids of the records they hold, remove their `.open` markers. Returns their paths. The
        journal first tells where the records of files closed before the crash are."""
        for key, file, offset, length in self._journal.entries():
            self._remember(key, WarcLocation(file, offset, length, key))
        recovered = []
        base = self.root / WARC_DIR
        suffix = f"-{self._instance}{WARC_SUFFIX}{OPEN_SUFFIX}"
        for marker in sorted(base.glob(f"*/*{suffix}")) if base.is_dir() else []:
            path = marker.with_name(marker.name.removesuffix(OPEN_SUFFIX))
            if path.exists():
                self._recover_file(path)
            marker.unlink()
            recovered.append(path.relative_to(self.root).as_posix())
        return recovered

    def _recover_file(self, path: Path) -> None:
        relative = path.relative_to(self.root).as_posix()
        good_end = 0
        with path.open("rb") as handle:
            try:
                for member in iter_members(handle):
                    head = record_head(member.data)
                    if head.record_type in {"response", "revisit"}:
                        self._remember(
                            head.record_id,
                            WarcLocation(relative, member.offset, member.length, head.record_id),
                        )
                    good_end = member.offset + member.length
            except TornMemberError:
                pass  # everything from good_end on is the torn tail, cut below
        if path.stat().st_size != good_end:
            with path.open("r+b") as handle:
                handle.truncate(good_end)
            cut = [
                key
                for key, known in self._known.items()
                if known.file == relative and known.offset + known.length > good_end
            ]
            for key in cut:
                del self._known[key]

    def _remember(self, key: str, location: WarcLocation) -> None:
        self._known[key] = location
        self._known.move_to_end(key)
        while len(self._known) > REMEMBERED_RECORDS:
            self._known.popitem(last=False)

    # ----- writing ---------------------------------------------------------------------------

    def write_response(self, page: FetchedPage, body: bytes) -> WrittenFetch:
        return self.append(self.prepare_response(page, body))

    def write_revisit(self, page: FetchedPage, refers_to: RevisitTarget) -> WrittenFetch:
        return self.append(self.prepare_revisit(page, refers_to))

    def prepare_response(self, page: FetchedPage, body: bytes) -> PreparedFetch:
        """The fetch's records built and compressed, not yet written. Like every method here, for
        one thread at a time."""
        response_id = record_id("response", page)
        known = self._known.get(response_id)
        if known is not None:
            return PreparedFetch(page.crawl_id, response_id, b"", b"", known)
        main = self._records.response(page, body, response_id)
        request = self._records.request(page, response_id)
        return PreparedFetch(page.crawl_id, response_id, main, request, None)

    def prepare_revisit(self, page: FetchedPage, refers_to: RevisitTarget) -> PreparedFetch:
        revisit_id = record_id("revisit", page)
        known = self._known.get(revisit_id)
        if known is not None:
            return PreparedFetch(page.crawl_id, revisit_id, b"", b"", known)
        main = self._records.revisit(page, refers_to, revisit_id)
        request = self._records.request(page, revisit_id)
        return PreparedFetch(page.crawl_id, revisit_id, main, request, None)

    def append(self, prepared: PreparedFetch) -> WrittenFetch:
        """Add prepared records to the crawl's current file (nothing when already written). They
        are written out by the next `flush` (or once a file holds `WRITE_OUT_BYTES`): one write a
        cycle, not one a page."""
        if prepared.known is not None:
            return WrittenFetch(prepared.known, 0)
        length = len(prepared.main) + len(prepared.request)
        current = self._file_for(prepared.crawl_id, length)
        main_id = prepared.main_id
        location = WarcLocation(current.relative, current.size, len(prepared.main), main_id)
        if self._crash is not None:  # a test's crash point: the fetch is written at once, halved
            self._write_out(current)
            self._append(current, prepared.main + prepared.request)
            self._journal.append(main_id, location.file, location.offset, location.length)
        else:
            current.held += (prepared.main, prepared.request)
            current.held_lines.append((main_id, location.offset, location.length))
            current.size += length
            if current.size - current.written >= WRITE_OUT_BYTES:
                self._write_out(current)
        self._remember(main_id, location)
        return WrittenFetch(location, length)

    def flush(self) -> None:
        """Write out every record appended so far (the handler calls this before the loop
        commits): WarcError if the disk refused them."""
        for current in list(self._open.values()):
            self._write_out(current)

    def discard_held(self) -> None:
        """Forget the records not yet written out (the cycle failed and commits nothing: its
        pages come again), so closing after a failed disk writes nothing more to it."""
        for current in self._open.values():
            for key, _, _ in current.held_lines:
                self._known.pop(key, None)
            current.size = current.written
            current.held.clear()
            current.held_lines.clear()

    def _write_out(self, current: _OpenFile) -> None:
        if not current.held:
            return
        data = b"".join(current.held)
        self._append(current, data, crash_point=False)
        current.held.clear()
        for key, offset, length in current.held_lines:
            self._journal.append(key, current.relative, offset, length)
        current.held_lines.clear()

    def _append(self, current: _OpenFile, data: bytes, *, crash_point: bool = True) -> None:
        try:
            if crash_point and self._crash is not None:
                half = len(data) // 2
                current.handle.write(data[:half])
                current.handle.flush()
                self._crash.reached(CRASH_MID_WARC)
                current.handle.write(data[half:])
            else:
                current.handle.write(data)
            current.handle.flush()
            if self._fsync:
                os.fsync(current.handle.fileno())
        except OSError as error:
            self._abandon(current)
            raise WarcError(f"cannot append to {current.relative}: {error}") from error
        current.written += len(data)
        current.size = max(current.size, current.written)  # written straight, nothing was held

    def _abandon(self, current: _OpenFile) -> None:
        """After a failed write: cut what part of it landed, forget the records held for it, and
        begin a new file next time."""
        for key, _, _ in current.held_lines:
            self._known.pop(key, None)
        current.held.clear()
        current.held_lines.clear()
        current.size = current.written
        try:
            current.handle.truncate(current.written)
            current.handle.close()
            self._journal.flush()  # its lines are needed once the marker is gone
        except OSError:
            pass  # its `.open` marker stays: the next start cuts the torn tail
        else:
            current.path.with_name(current.path.name + OPEN_SUFFIX).unlink(missing_ok=True)
        for directory, held in list(self._open.items()):
            if held is current:
                del self._open[directory]

    def _file_for(self, crawl_id: str, incoming: int) -> _OpenFile:
        directory = crawl_directory(crawl_id)
        current = self._open.get(directory)
        if (
            current is not None
            and current.size > current.records_from
            and current.size + incoming > self._max_bytes
        ):
            self._close(directory)
            current = None
        if current is None:
            current = self._start_file(directory)
            self._open[directory] = current
            while len(self._open) > self._max_open:
                self._close(next(iter(self._open)))
        self._open.move_to_end(directory)
        return current

    def _start_file(self, directory: str) -> _OpenFile:
        self._serial += 1
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")[:17]
        name = f"{FILE_PREFIX}-{stamp}-{self._serial:05d}-{self._instance}{WARC_SUFFIX}"
        path = self.root / WARC_DIR / directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_name(name + OPEN_SUFFIX).touch()
        handle = path.open("ab")
        start = handle.tell()
        current = _OpenFile(path, path.relative_to(self.root).as_posix(), handle, start, start)
        self._append(current, self._records.warcinfo(name), crash_point=False)
        current.records_from = current.size
        return current

    def _close(self, directory: str) -> None:
        self._write_out(self._open[directory])
        current = self._open.pop(directory)
        current.handle.close()
        self._journal.flush()  # a restart finds this file's records in the journal, not by a walk
        current.path.with_name(current.path.name + OPEN_SUFFIX).unlink(missing_ok=True)

    def close(self) -> None:
        for directory in list(self._open):
            self._close(directory)
        self._journal.close()
