"""Bringing a state partition up to date from its changelog.

A store whose directory is kept replays only the changelog records after the offset it recorded; a
missing store, or one whose recorded position does not fit the changelog (another topic, an offset
past the end), is rebuilt from the beginning. Records produced for input messages that were never
committed are skipped (their messages will be processed again); records written by timers carry no
source and are always applied. A handler's derived tables (`streamcrawl.batch.BatchHandler`) are
not in the changelog: their entries are rebuilt from the records they derive from, as those are
applied (`Derivation`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from streamcrawl.kafka import check_consumer_error, coordinates, message_headers, watermarks
from streamcrawl.state import PartitionStore, StoreOptions, split_changelog_key

log = logging.getLogger(__name__)

SOURCE_HEADER = "sc.src"
"""`topic:partition:offset` of the input message whose processing wrote a changelog record."""

RESTORE_BATCH = 10_000
RESTORE_POLL_S = 0.05
"""How long one read of a restore waits to fill its batch. `consume` returns early only when the
batch is full, so the last, partial batch of every partition costs this much: it was 1 s, which
made every restore of a non-empty partition last a second however little it read."""


def source_header(topic: str, partition: int, offset: int) -> str:
    return f"{topic}:{partition}:{offset}"


def parse_source(raw: bytes) -> tuple[str, int, int]:
    topic, partition, offset = raw.decode().rsplit(":", 2)
    return topic, int(partition), int(offset)


Derived = list[tuple[str, bytes, bytes | None]]
"""Writes derived from one changelog record: table, key, value (None: delete)."""


@dataclass(frozen=True)
class Derivation:
    """Tables kept out of the changelog and how their entries follow from other tables' changes:
    `derive(table, key, old, new)` returns the derived writes (table, key, value or None)."""

    tables: frozenset[str]
    derive: Callable[[str, bytes, bytes | None, bytes | None], Derived]


_ABSENT = object()


@dataclass(frozen=True)
class RestoreReport:
    partition: int
    full: bool
    records_read: int
    records_applied: int
    seconds: float


class ChangelogRestorer:
    """Replays changelog partitions into stores with one assign-only consumer."""

    def __init__(self, consumer_config: dict[str, Any], timeout_s: float = 30.0) -> None:
        self._config = consumer_config
        self._timeout_s = timeout_s
        self._consumer: Consumer | None = None

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(self._config)
        return self._consumer

    def open(
        self,
        path: Path,
        tables: tuple[str, ...],
        options: StoreOptions,
        changelog_topic: str,
        partition: int,
        committed: dict[tuple[str, int], int],
        derivation: Derivation | None = None,
    ) -> tuple[PartitionStore, RestoreReport]:
        """Open the store of one partition and replay what it misses from the changelog."""
        started = time.monotonic()
        consumer = self._client()
        low, high = watermarks(
            consumer, TopicPartition(changelog_topic, partition), self._timeout_s
        )
        store = PartitionStore(path, tables, options) if path.exists() else None
        resume_at = self._resume_offset(store, changelog_topic, low, high)
        full = store is None or resume_at is None
        if store is None or resume_at is None:
            if store is not None:
                store.close()
            PartitionStore.destroy(path)
            store = PartitionStore(path, tables, options)
            resume_at = low
        start_offset = resume_at
        read, applied = 0, 0
        if start_offset < high:
            read, applied = self._replay(
                consumer,
                store,
                changelog_topic,
                partition,
                (start_offset, high),
                committed,
                derivation,
            )
        report = RestoreReport(partition, full, read, applied, time.monotonic() - started)
        log.info(
            "state partition %d restored (%s): %d changelog records read, %d applied in %.2fs",
            partition,
            "full" if full else "tail",
            read,
            applied,
            report.seconds,
        )
        return store, report

    @staticmethod
    def _resume_offset(
        store: PartitionStore | None, changelog_topic: str, low: int, high: int
    ) -> int | None:
        """Where to resume replay, or None when the store must be rebuilt from scratch."""
        if store is None:
            return None
        position = store.changelog_position()
        if position is None:
            return None if high > low else low
        topic, offset = position
        if topic != changelog_topic or offset >= high or offset < low - 1:
            return None
        return offset + 1

    def _replay(
        self,
        consumer: Consumer,
        store: PartitionStore,
        changelog_topic: str,
        partition: int,
        span: tuple[int, int],
        committed: dict[tuple[str, int], int],
        derivation: Derivation | None,
    ) -> tuple[int, int]:
        start, high = span
        consumer.assign([TopicPartition(changelog_topic, partition, start)])
        read, applied = 0, 0
        changes: dict[str, dict[bytes, bytes | None]] = {}
        last_offset = start - 1
        deadline = time.monotonic() + self._timeout_s
        try:
            while last_offset < high - 1:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"changelog {changelog_topic}[{partition}] stuck at {last_offset}/{high}"
                    )
                for message in consumer.consume(RESTORE_BATCH, RESTORE_POLL_S):
                    error = message.error()
                    if error is not None:
                        check_consumer_error(error)
                        continue
                    deadline = time.monotonic() + self._timeout_s
                    _, _, last_offset = coordinates(message)
                    read += 1
                    if self._uncommitted(message_headers(message), committed):
                        continue
                    table, key = split_changelog_key(message.key() or b"")
                    if table not in store.tables:
                        continue  # a table this version no longer has (`streamcrawl.state`)
                    if derivation is None:
                        changes.setdefault(table, {})[key] = message.value()
                    elif table not in derivation.tables:  # derived entries are rebuilt instead
                        _apply_derived(store, changes, derivation, table, key, message.value())
                    applied += 1
                if changes:
                    store.write(changes, changelog_topic, last_offset)
                    changes = {}
                elif read:
                    store.write({}, changelog_topic, last_offset)
        finally:
            consumer.unassign()
        return read, applied

    @staticmethod
    def _uncommitted(
        headers: list[tuple[str, bytes]] | None, committed: dict[tuple[str, int], int]
    ) -> bool:
        for name, value in headers or ():
            if name == SOURCE_HEADER:
                topic, partition, offset = parse_source(value)
                return offset >= committed.get((topic, partition), 0)
        return False

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def _apply_derived(
    store: PartitionStore,
    changes: dict[str, dict[bytes, bytes | None]],
    derivation: Derivation,
    table: str,
    key: bytes,
    value: bytes | None,
) -> None:
    """Apply one changelog record and the derived writes it implies, against the value the key
    had before it (this batch's pending change, else the store's)."""
    writes = changes.setdefault(table, {})
    pending = writes.get(key, _ABSENT)
    old = store.get(table, key) if pending is _ABSENT else pending
    assert old is None or isinstance(old, bytes)
    writes[key] = value
    for derived_table, derived_key, derived_value in derivation.derive(table, key, old, value):
        changes.setdefault(derived_table, {})[derived_key] = derived_value
