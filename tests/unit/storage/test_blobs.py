"""Content-addressed blobs: sharded names, written once, verify finds every kind of damage."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from storage.blobs import BlobProblem, BlobStore, blob_path
from storage.exceptions import BlobCorruptError, StorageError
from storage.warcfiles import crawl_directory

BODY = b"<html>" + b"x" * 5000 + b"</html>"
DIGEST = hashlib.sha256(BODY).hexdigest()


def test_a_blob_is_written_once_under_its_sharded_hash(tmp_path: Path) -> None:
    store = BlobStore(tmp_path, "storage-1")
    first = store.put(DIGEST, BODY)
    second = store.put(DIGEST, BODY)
    assert first.written and first.stored_bytes > 0
    assert not second.written and second.stored_bytes == 0
    assert first.path == f"blobs/{DIGEST[:2]}/{DIGEST[2:4]}/{DIGEST}.zst"
    assert store.read(DIGEST) == BODY
    assert [p.name for p in (tmp_path / "blobs").rglob("*") if p.is_file()] == [f"{DIGEST}.zst"]


def test_a_name_that_is_not_a_sha256_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StorageError):
        blob_path("../../etc/passwd")
    with pytest.raises(StorageError):
        BlobStore(tmp_path, "s").put(DIGEST.upper(), BODY)


def test_verify_reports_corrupt_misplaced_and_stray_files(tmp_path: Path) -> None:
    store = BlobStore(tmp_path, "storage-1")
    good = b"good body"
    bad = b"body to damage"
    store.put(hashlib.sha256(good).hexdigest(), good)
    bad_hash = hashlib.sha256(bad).hexdigest()
    store.put(bad_hash, bad)
    damaged = tmp_path / blob_path(bad_hash)
    other = BlobStore(tmp_path / "other", "x")
    other.put(bad_hash, b"another body entirely")  # a valid frame whose content does not match
    damaged.write_bytes((tmp_path / "other" / blob_path(bad_hash)).read_bytes())
    wrong_shard = tmp_path / "blobs" / "00" / "00" / f"{hashlib.sha256(good).hexdigest()}.zst"
    wrong_shard.parent.mkdir(parents=True)
    wrong_shard.write_bytes(b"not zstd")
    stray = damaged.parent / f"{bad_hash}.tmp-storage-1-abc"
    stray.write_bytes(b"half")

    results = list(store.verify())
    problems = {r.path: r.problem for r in results if isinstance(r, BlobProblem)}
    assert hashlib.sha256(good).hexdigest() in results
    assert "does not match" in problems[blob_path(bad_hash)]
    assert "wrong shard" in problems[wrong_shard.relative_to(tmp_path).as_posix()]
    assert "stray temporary" in problems[stray.relative_to(tmp_path).as_posix()]
    with pytest.raises(BlobCorruptError):
        store.read(bad_hash)


def test_a_garbled_blob_is_reported_not_raised(tmp_path: Path) -> None:
    store = BlobStore(tmp_path, "storage-1")
    store.put(DIGEST, BODY)
    (tmp_path / blob_path(DIGEST)).write_bytes(b"\x28\xb5\x2f\xfd garbage")
    [problem] = list(store.verify())
    assert isinstance(problem, BlobProblem) and "zstd" in problem.problem


def test_a_writer_removes_only_its_own_temporaries(tmp_path: Path) -> None:
    store = BlobStore(tmp_path, "storage-1")
    store.put(DIGEST, BODY)
    shard = (tmp_path / blob_path(DIGEST)).parent
    mine = shard / f"{DIGEST}.tmp-storage-1-1"
    theirs = shard / f"{DIGEST}.tmp-storage-2-1"
    mine.write_bytes(b"a")
    theirs.write_bytes(b"b")
    assert store.remove_own_temporaries() == 1
    assert not mine.exists() and theirs.exists()


@pytest.mark.parametrize(
    ("crawl_id", "safe"),
    [("crawl-1", True), ("a.b:c_d", True), ("..", False), ("", False), ("a/../b", False)],
)
def test_crawl_directories_never_leave_the_warc_directory(crawl_id: str, safe: bool) -> None:
    name = crawl_directory(crawl_id)
    assert "/" not in name and name not in {"", ".", ".."}
    assert (name == crawl_id) == safe
