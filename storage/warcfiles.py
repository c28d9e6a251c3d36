"""Reading the WARC files back: gzip members, record headers, torn tails, the file layout.

Every record this service writes is one gzip member (the usual `.warc.gz` layout, which warcio's
ArchiveIterator and every WARC tool read). Walking members with zlib finds their exact boundaries,
so a member cut short by a kill (a torn tail) is told apart from the complete ones before it; the
writer truncates its own torn tails when it restarts, and `verify` reports any other.

Layout under `storage.root`: `warc/<crawl>/<PREFIX>-<UTC time>-<serial>-<instance>.warc.gz`, one
directory per crawl (so a crawl's WARC is its directory), one writer per instance; while a file is
being written a sidecar `<file>.open` exists, removed when the writer closes or rotates it.
"""

from __future__ import annotations

import functools
import hashlib
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

WARC_DIR = "warc"
WARC_SUFFIX = ".warc.gz"
OPEN_SUFFIX = ".open"
READ_CHUNK = 1 << 20
_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]")


@functools.lru_cache(maxsize=1024)
def crawl_directory(crawl_id: str) -> str:
    """A directory name for a crawl id: safe characters kept, never `.` or `..`, never empty.
    Asked for every fetch written, of a handful of crawls: kept."""
    cleaned = _UNSAFE.sub("_", crawl_id)[:100]
    if cleaned != crawl_id or cleaned in {"", ".", ".."}:
        digest = hashlib.sha256(crawl_id.encode()).hexdigest()[:16]
        cleaned = f"{cleaned.strip('.') or 'crawl'}-{digest}"
    return cleaned


@dataclass(frozen=True, slots=True)
class Member:
    offset: int
    length: int
    """Compressed bytes, so `offset + length` is where the next member starts."""
    data: bytes
    """The decompressed WARC record."""


class TornMemberError(Exception):
    """The file ends inside a gzip member (or holds bytes that are not gzip) at `offset`."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"torn or invalid gzip member at offset {offset}: {reason}")
        self.offset = offset


def iter_members(handle: BinaryIO) -> Iterator[Member]:
    """Each complete gzip member from the start; TornMemberError at the first one that is not."""
    offset = 0
    pending = b""
    while True:
        decompressor = zlib.decompressobj(wbits=31)
        parts: list[bytes] = []
        consumed = 0
        while True:
            if not pending:
                pending = handle.read(READ_CHUNK)
                if not pending:
                    if consumed == 0:
                        return
                    raise TornMemberError(offset, "file ends inside the member")
            try:
                parts.append(decompressor.decompress(pending))
            except zlib.error as error:
                raise TornMemberError(offset, str(error)) from error
            if decompressor.eof:
                used = len(pending) - len(decompressor.unused_data)
                consumed += used
                pending = decompressor.unused_data
                break
            consumed += len(pending)
            pending = b""
        yield Member(offset, consumed, b"".join(parts))
        offset += consumed


@dataclass(frozen=True, slots=True)
class RecordHead:
    """The WARC header fields of one record, as written (names case-insensitive on lookup)."""

    fields: dict[str, str]

    def get(self, name: str) -> str | None:
        return self.fields.get(name.lower())

    @property
    def record_type(self) -> str:
        return self.get("WARC-Type") or ""

    @property
    def record_id(self) -> str:
        return self.get("WARC-Record-ID") or ""


def record_head(record: bytes) -> RecordHead:
    head, _, _ = record.partition(b"\r\n\r\n")
    lines = head.decode("utf-8", "replace").split("\r\n")
    fields: dict[str, str] = {}
    for line in lines[1:]:
        name, separator, value = line.partition(":")
        if separator:
            fields[name.strip().lower()] = value.strip()
    return RecordHead(fields)


def warc_files(root: Path, crawl_id: str | None = None) -> list[Path]:
    """Every WARC file under `root` (of one crawl when given), in name order."""
    base = root / WARC_DIR
    if crawl_id is not None:
        base = base / crawl_directory(crawl_id)
        return sorted(base.glob(f"*{WARC_SUFFIX}")) if base.is_dir() else []
    return sorted(base.glob(f"*/*{WARC_SUFFIX}")) if base.is_dir() else []


def is_open(path: Path) -> bool:
    return path.with_name(path.name + OPEN_SUFFIX).exists()
