"""A disk that fails a write stops the storage before it commits, and dead-letters nothing: once
the disk is fixed and the instance restarted, the redelivered pages are stored, each once."""

from __future__ import annotations

from typing import BinaryIO

import pytest

from storage.blobs import blob_path
from storage.exceptions import StorageUnavailableError
from tests.unit.storage.archive import Archive, make_page

URL = "https://example.org/wiki/Disk"
BODY = b"<html><body>" + b"<p>a page the disk could not take</p>" * 100 + b"</body></html>"


class FailingHandle:
    """A file handle whose next write lands half its bytes and then fails (a full disk)."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle

    def write(self, data: bytes) -> int:
        self._handle.write(data[: len(data) // 2])
        self._handle.flush()
        raise OSError(28, "No space left on device")

    def __getattr__(self, name: str) -> object:
        return getattr(self._handle, name)


def responses(archive: Archive) -> list[str]:
    return [h["WARC-Target-URI"] for kind, h, _ in archive.records() if kind == "response"]


def test_a_full_disk_under_the_warc_stops_the_cycle_and_its_pages_are_stored_after_a_restart(
    archive: Archive,
) -> None:
    archive.deliver(make_page(URL, BODY, 1_000), BODY)
    [current] = archive.warc._open.values()
    current.handle = FailingHandle(current.handle)  # type: ignore[assignment]
    cycle = [
        (make_page(URL + "/full", BODY + b"1", 2_000), BODY + b"1"),
        (make_page(URL + "/later", BODY + b"2", 3_000), BODY + b"2"),
    ]
    with pytest.raises(StorageUnavailableError, match="No space left"):
        archive.deliver_cycle(cycle)
    assert archive.dead_letters == []
    assert archive.history(URL + "/full") is None and archive.history(URL + "/later") is None
    assert responses(archive) == [URL]  # the torn half record was cut off at once

    archive.open_writer()  # the operator freed space; the supervisor restarted the instance
    archive.deliver_cycle(cycle)  # the uncommitted pages come again
    assert responses(archive) == [URL, URL + "/full", URL + "/later"]
    for page, body in cycle:
        history = archive.history(page.url)
        assert history is not None and archive.blobs.read(history.latest.content_hash) == body
    assert len(archive.warc_files()) == 2  # the failed file was closed; a new one took the rest


def test_records_of_other_crawls_held_when_the_disk_failed_are_dropped_not_written_at_close(
    archive: Archive,
) -> None:
    archive.deliver(make_page(URL, BODY, 1_000, crawl_id="crawl-a"), BODY)
    [current] = archive.warc._open.values()
    current.handle = FailingHandle(current.handle)  # type: ignore[assignment]
    cycle = [
        (make_page(URL + "/a", BODY + b"a", 2_000, crawl_id="crawl-a"), BODY + b"a"),
        (make_page(URL + "/b", BODY + b"b", 3_000, crawl_id="crawl-b"), BODY + b"b"),
    ]
    with pytest.raises(StorageUnavailableError, match="No space left"):
        archive.deliver_cycle(cycle)
    archive.warc.close()  # as the stopping service does: nothing held is left to write (or fail)
    assert responses(archive) == [URL]

    archive.open_writer()
    archive.deliver_cycle(cycle)
    assert sorted(responses(archive)) == [URL, URL + "/a", URL + "/b"]


def test_a_blob_the_disk_refuses_stops_the_cycle_and_is_stored_once_after_the_fix(
    archive: Archive,
) -> None:
    archive.root.mkdir(parents=True, exist_ok=True)
    (archive.root / "blobs").write_bytes(b"")  # a file where the blob directory must go
    page = make_page(URL, BODY, 1_000)
    with pytest.raises(StorageUnavailableError):
        archive.deliver(page, BODY)
    assert archive.dead_letters == []
    assert archive.history(URL) is None
    with pytest.raises(StorageUnavailableError):  # still failed: the instance handles nothing more
        archive.deliver(make_page(URL + "/next", BODY + b"n", 2_000), BODY + b"n")
    assert archive.history(URL + "/next") is None

    (archive.root / "blobs").unlink()  # the operator's fix
    archive.open_writer()
    archive.deliver(page, BODY)
    history = archive.history(URL)
    assert history is not None and history.latest.blob == blob_path(page.sha256)
    assert archive.blobs.read(page.sha256) == BODY
    assert responses(archive) == [URL]  # a record written before the failure is not written twice


def test_a_body_that_does_not_match_its_hash_is_still_dead_lettered_and_nothing_stops(
    archive: Archive,
) -> None:
    page = make_page(URL, BODY, 1_000)
    archive.deliver(page, BODY + b"tampered")
    assert archive.dead_letters and "hashes to" in archive.dead_letters[0]
    assert not (archive.root / blob_path(page.sha256)).exists()
    archive.deliver(make_page(URL + "/ok", BODY, 2_000), BODY)
    assert archive.history(URL + "/ok") is not None
