"""Where this instance's recent WARC records are: the memory that makes redelivery idempotent.

One line per fetch written, appended right after its records reach the WARC file:
`record id TAB file TAB offset TAB length`. Lines are buffered: the writer flushes them (`flush`)
before it removes a file's `.open` marker, since only then does a restart need them (a file still
marked open is walked record by record instead), so a page costs no journal syscall of its own.
A line never reaches the file before its records: they were written first.

When the writer restarts after a crash it reads the journal back (the current generation and the
previous one, so at least `generation_lines` recent records), and together with a walk of the files
still marked open (which covers a record written just before the kill, whose line may be missing) it
knows every record of the uncommitted window, even when the file rotated inside that window. A torn
last line is ignored. The journal lives at `journal/<instance>.log` under `storage.root`, beside
`journal/<instance>.log.1`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

JOURNAL_DIR = "journal"


class RecordJournal:
    def __init__(self, root: Path, instance: str, generation_lines: int, fsync: bool) -> None:
        self.path = root / JOURNAL_DIR / f"{instance}.log"
        self._previous = self.path.with_name(self.path.name + ".1")
        self._generation_lines = generation_lines
        self._fsync = fsync
        self._handle: BinaryIO | None = None
        self._lines = 0

    def entries(self) -> Iterator[tuple[str, str, int, int]]:
        """(record id, file, offset, length) of the recorded lines, oldest first."""
        for path in (self._previous, self.path):
            if not path.exists():
                continue
            for line in path.read_bytes().split(b"\n"):
                fields = line.decode("utf-8", "replace").split("\t")
                if len(fields) == 4 and fields[2].isdigit() and fields[3].isdigit():
                    yield fields[0], fields[1], int(fields[2]), int(fields[3])

    def append(self, record_id: str, file: str, offset: int, length: int) -> None:
        if self._handle is None or self._lines >= self._generation_lines:
            self._rotate()
        handle = self._handle
        if handle is None:
            raise RuntimeError("journal not open")
        handle.write(f"{record_id}\t{file}\t{offset}\t{length}\n".encode())
        self._lines += 1

    def flush(self) -> None:
        """Hand the buffered lines to the OS (and to the disk with fsync on)."""
        if self._handle is not None:
            self._handle.flush()
            if self._fsync:
                os.fsync(self._handle.fileno())

    def _rotate(self) -> None:
        if self._handle is not None:
            self.flush()
            self._handle.close()
            os.replace(self.path, self._previous)
        elif self.path.exists():
            # A restart: keep what the last run wrote as the previous generation.
            os.replace(self.path, self._previous)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("ab")
        self._lines = 0

    def close(self) -> None:
        if self._handle is not None:
            self.flush()
            self._handle.close()
            self._handle = None
