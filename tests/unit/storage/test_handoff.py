"""Blobs handed to the second thread: one job per cycle, all on disk once settled, a failed write
reported with what came before it, and a job that never settles cannot hang the shutdown."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from storage.blobs import BlobStore
from storage.handoff import BlobHandoff

T = TypeVar("T")


class CountingExecutor(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.jobs = 0

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        self.jobs += 1
        return super().submit(fn, *args, **kwargs)


def bodies(count: int, tag: str) -> list[tuple[str, bytes]]:
    made = [f"<html>{tag} page {n}</html>".encode() * 50 for n in range(count)]
    return [(hashlib.sha256(body).hexdigest(), body) for body in made]


def test_a_cycle_of_blobs_is_one_job_and_every_blob_is_on_disk_once_settled(
    tmp_path: Path,
) -> None:
    store = BlobStore(tmp_path, "storage-1")
    with CountingExecutor() as executor:
        handoff = BlobHandoff(store, executor)
        for cycle in ("first", "second"):
            for content_hash, body in bodies(30, cycle):
                handoff.put(content_hash, body)
            written, failure = handoff.settle()
            assert failure is None
            assert len(written) == 30 and all(blob.written for blob in written)
            for content_hash, body in bodies(30, cycle):
                assert store.read(content_hash) == body
        assert executor.jobs == 2
        assert handoff.settle() == ([], None)  # a cycle that handed nothing off
        assert executor.jobs == 2


def test_a_failed_write_is_reported_with_the_blobs_before_it_and_nothing_after(
    tmp_path: Path,
) -> None:
    store = BlobStore(tmp_path, "storage-1")
    blobs = bodies(3, "disk")
    blocked = blobs[1][0]
    (tmp_path / "blobs" / blocked[:2]).mkdir(parents=True)
    (tmp_path / "blobs" / blocked[:2] / blocked[2:4]).write_bytes(b"")  # a file, not a directory
    with ThreadPoolExecutor(max_workers=1) as executor:
        handoff = BlobHandoff(store, executor)
        for content_hash, body in blobs:
            handoff.put(content_hash, body)
        written, failure = handoff.settle()
    assert isinstance(failure, OSError)
    assert [blob.path for blob in written] == [
        f"blobs/{h[:2]}/{h[2:4]}/{h}.zst" for h, _ in blobs[:1]
    ]
    assert not (tmp_path / f"blobs/{blobs[2][0][:2]}/{blobs[2][0][2:4]}/{blobs[2][0]}.zst").exists()


def test_a_closed_handoff_lets_the_executor_shut_down(tmp_path: Path) -> None:
    store = BlobStore(tmp_path, "storage-1")
    executor = ThreadPoolExecutor(max_workers=1)
    handoff = BlobHandoff(store, executor)
    [(content_hash, body)] = bodies(1, "stop")
    handoff.put(content_hash, body)
    handoff.close()  # the service stops on an error: nothing settles this cycle
    executor.shutdown(wait=True)  # returns: the job took the end mark (pytest-timeout otherwise)
    assert store.read(content_hash) == body
