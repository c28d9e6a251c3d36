"""The WARC writer holds a cycle's records until `flush`: nothing of them (nor their journal lines)
is in a file before, everything after, and a refused write-out forgets them."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import BinaryIO

import pytest

from storage.exceptions import WarcError
from storage.journal import RecordJournal
from storage.warc import WarcWriter
from tests.unit.storage.archive import make_page


class ReadOnlyHandle:
    """A file handle on a disk gone read-only: every write fails."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle

    def write(self, data: bytes) -> int:
        raise OSError(30, "Read-only file system")

    def __getattr__(self, name: str) -> object:
        return getattr(self._handle, name)


def journal_ids(root: Path) -> list[str]:
    return [key for key, _, _, _ in RecordJournal(root, "w", 100, False).entries()]


def test_records_reach_the_file_and_the_journal_at_the_flush(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, "w", max_bytes=1 << 20)
    pages = [make_page(f"https://example.org/{n}", b"body %d" % n) for n in range(3)]
    written = [writer.write_response(page, b"body %d" % n) for n, page in enumerate(pages)]
    [path] = (tmp_path / "warc").glob("*/*.warc.gz")
    size_before = path.stat().st_size  # the warcinfo record alone
    writer._journal.flush()
    assert journal_ids(tmp_path) == []

    writer.flush()
    writer._journal.flush()
    data = path.read_bytes()
    assert len(data) == size_before + sum(w.bytes_written for w in written)
    for fetch, page in zip(written, pages, strict=True):
        member = data[fetch.location.offset : fetch.location.offset + fetch.location.length]
        assert f"WARC-Target-URI: {page.final_url}".encode() in gzip.decompress(member)
    assert journal_ids(tmp_path) == [w.location.record_id for w in written]
    writer.close()


def test_a_refused_write_out_forgets_the_held_records(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, "w", max_bytes=1 << 20)
    page = make_page("https://example.org/full", b"body")
    writer.write_response(page, b"body")
    [current] = writer._open.values()
    current.handle = ReadOnlyHandle(current.handle)  # type: ignore[assignment]
    with pytest.raises(WarcError):
        writer.flush()
    again = writer.write_response(page, b"body")  # a redelivery is written, not "already there"
    assert again.bytes_written > 0
    writer.flush()
    writer.close()
    assert journal_ids(tmp_path) == [again.location.record_id]
