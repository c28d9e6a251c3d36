"""Content-addressed page bodies: one zstd file per distinct SHA-256, shared by every instance.

A body with hash `h` lives at `blobs/h[0:2]/h[2:4]/h.zst` under `storage.root`. It is written to a
temporary file in the same directory, named after the writing instance, and renamed into place
(atomic on POSIX), so a reader never sees half a blob, whoever wrote it and whenever it died. Since
the name is the content, a blob that exists is never written again, and two instances racing on the
same body rename identical bytes over each other. A crash leaves at most a temporary file, which
the instance that left it removes when it starts again (`remove_own_temporaries`), and which
`verify` reports as stray if it lingers.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import zstandard

from storage.exceptions import BlobCorruptError, StorageError
from streamcrawl.crashpoints import CrashPoints

BLOB_DIR = "blobs"
BLOB_SUFFIX = ".zst"
TEMP_MARK = ".tmp-"
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")

CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL
CRASH_BEFORE_BLOB_RENAME = "storage_before_blob_rename"
"""Crash point: the temporary file holds the whole compressed body, not yet renamed."""


def is_sha256_hex(value: str) -> bool:
    return SHA256_HEX.match(value) is not None


def blob_path(content_hash: str) -> str:
    """The blob's path relative to `storage.root`."""
    if not is_sha256_hex(content_hash):
        raise StorageError(f"not a lowercase sha256 hex digest: {content_hash[:80]!r}")
    return f"{BLOB_DIR}/{content_hash[:2]}/{content_hash[2:4]}/{content_hash}{BLOB_SUFFIX}"


@dataclass(frozen=True, slots=True)
class BlobWrite:
    path: str
    """Relative to `storage.root`."""
    written: bool
    """False when the blob already existed and nothing was written."""
    stored_bytes: int
    """Compressed bytes written now (0 when it existed)."""


@dataclass(frozen=True, slots=True)
class BlobProblem:
    path: str
    problem: str


class BlobStore:
    def __init__(
        self,
        root: Path,
        writer_id: str,
        *,
        level: int = 3,
        fsync: bool = False,
        crash_points: CrashPoints | None = None,
    ) -> None:
        self.root = root
        self._writer_id = writer_id
        self._compressor = zstandard.ZstdCompressor(level=level)
        self._decompressor = zstandard.ZstdDecompressor()
        self._fsync = fsync
        self._crash = crash_points or CrashPoints(None)
        self._root = str(root)
        self._temporary_mark = f"{TEMP_MARK}{writer_id}-{uuid.uuid4().hex[:12]}-"
        """Unique to this writer and this run, so no two runs' temporaries share a name."""
        self._serial = itertools.count()

    def put(self, content_hash: str, body: bytes) -> BlobWrite:
        """Store `body` under its hash unless already there. The caller has checked the hash."""
        relative = blob_path(content_hash)
        final = f"{self._root}/{relative}"
        if os.path.exists(final):
            return BlobWrite(relative, written=False, stored_bytes=0)
        return self._write(relative, final, self._compressor.compress(body))

    def _write(self, relative: str, final: str, compressed: bytes) -> BlobWrite:
        stem = final.removesuffix(BLOB_SUFFIX)
        temporary = f"{stem}{self._temporary_mark}{next(self._serial)}"
        try:
            descriptor = os.open(temporary, CREATE_FLAGS, 0o644)
        except FileNotFoundError:  # the shard's first blob (once per directory, ever)
            os.makedirs(os.path.dirname(final), exist_ok=True)
            descriptor = os.open(temporary, CREATE_FLAGS, 0o644)
        try:
            written = os.write(descriptor, compressed)
            while written < len(compressed):
                written += os.write(descriptor, memoryview(compressed)[written:])
            if self._fsync:
                os.fsync(descriptor)
        except OSError:
            os.unlink(temporary)  # a full disk: no temporary is left behind; the error goes on
            raise
        finally:
            os.close(descriptor)
        self._crash.reached(CRASH_BEFORE_BLOB_RENAME)
        os.rename(temporary, final)
        return BlobWrite(relative, written=True, stored_bytes=len(compressed))

    def read(self, content_hash: str, *, verify: bool = True) -> bytes:
        """The body stored under `content_hash`; FileNotFoundError when there is none."""
        path = self.root / blob_path(content_hash)
        body = self._decompress(path)
        if verify and hashlib.sha256(body).hexdigest() != content_hash:
            raise BlobCorruptError(f"{blob_path(content_hash)}: content does not match its hash")
        return body

    def _decompress(self, path: Path) -> bytes:
        data = path.read_bytes()
        try:
            with self._decompressor.stream_reader(data) as reader:
                return reader.read()
        except zstandard.ZstdError as error:
            raise BlobCorruptError(f"{path.name}: not a zstd frame: {error}") from error

    def remove_own_temporaries(self) -> int:
        """Delete temporary files this writer left when it died; returns how many."""
        removed = 0
        for path in self._temporaries():
            if f"{TEMP_MARK}{self._writer_id}-" in path.name:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def _temporaries(self) -> Iterator[Path]:
        base = self.root / BLOB_DIR
        if base.exists():
            yield from (p for p in base.glob("*/*/*") if TEMP_MARK in p.name)

    def hashes(self) -> Iterator[str]:
        base = self.root / BLOB_DIR
        if not base.exists():
            return
        for path in sorted(base.glob(f"*/*/*{BLOB_SUFFIX}")):
            yield path.name.removesuffix(BLOB_SUFFIX)

    def verify(self) -> Iterator[BlobProblem | str]:
        """Re-hash every blob: yields each good hash, or a problem (corrupt, misplaced, stray)."""
        base = self.root / BLOB_DIR
        if not base.exists():
            return
        for path in sorted(base.glob("*/*/*")):
            relative = path.relative_to(self.root).as_posix()
            if TEMP_MARK in path.name:
                yield BlobProblem(relative, "stray temporary file (a writer died mid-blob)")
                continue
            name = path.name.removesuffix(BLOB_SUFFIX)
            if not path.name.endswith(BLOB_SUFFIX) or not is_sha256_hex(name):
                yield BlobProblem(relative, "not a blob name")
                continue
            if relative != blob_path(name):
                yield BlobProblem(relative, "blob in the wrong shard directory")
                continue
            try:
                self.read(name)
            except BlobCorruptError as error:
                yield BlobProblem(relative, str(error))
                continue
            yield name
