"""Per-partition state: one RocksDB per state partition, its tables as column families.

A state partition p of a role holds the tables its handler names (the frontier's host queues, the
link graph's indexes). Handlers read and write through a `Transaction` that holds the writes of one
processing cycle; the loop then (1) produces every changed key to the role's compacted changelog,
partition p, with the source message's coordinates in a header, (2) waits for delivery, (3) commits
the input offsets and (4) writes the data and the changelog offset in one WriteBatch.

Recovery replays the changelog from the offset after the one the store reflects (the whole topic
when the directory is missing or does not match the changelog) and skips records whose source offset
is at or past the committed input offset: those messages will be processed again, so the restored
state reflects exactly the committed input.

The changelog is the state's log, so writes skip RocksDB's write-ahead log, as Kafka Streams' stores
do: a killed process loses the cycles still in memtables, and the replay from the offset the store
recorded brings them back. Atomic flush keeps that offset and every table on disk at the same cycle
(`tests/unit/test_state.py` kills a writer to check it). Skipping the log saves about a quarter of
a write's CPU (the link graph's ingest cycles: 2.7 against 3.7-4.2 CPU s) and its disk writes.

A table a newer version of a handler no longer names (removed or renamed) is dropped when its
partition is opened, and its changelog records are skipped on restore: RocksDB refuses to open a
directory without every column family in it, so the service would not start otherwise.
"""

from __future__ import annotations

import logging
import shutil
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from pathlib import Path
from typing import Protocol

from rocksdict import (
    BlockBasedOptions,
    Cache,
    DBCompressionType,
    Options,
    Rdict,
    WriteBatch,
    WriteBufferManager,
    WriteOptions,
)

from streamcrawl.exceptions import StateError
from streamcrawl.settings import StateSettings

log = logging.getLogger(__name__)

META_TABLE = "__meta__"
DEFAULT_FAMILY = "default"
"""RocksDB's own column family, always there; no table uses it."""
CHANGELOG_OFFSET_KEY = b"changelog_offset"
CHANGELOG_TOPIC_KEY = b"changelog_topic"
BACKGROUND_WORK = (
    "rocksdb.num-running-compactions",
    "rocksdb.num-running-flushes",
    "rocksdb.compaction-pending",
    "rocksdb.mem-table-flush-pending",
)
KEY_SEPARATOR = b"\x00"
"""Changelog keys are table name, NUL, key: one compacted topic serves every table of a role."""


def changelog_key(table: str, key: bytes) -> bytes:
    return table.encode() + KEY_SEPARATOR + key


def split_changelog_key(raw: bytes) -> tuple[str, bytes]:
    table, separator, key = raw.partition(KEY_SEPARATOR)
    if not separator:
        raise StateError(f"changelog key without table: {raw[:80]!r}")
    return table.decode(), key


def background_work(families: Iterable[Rdict]) -> int:
    """Flushes and compactions RocksDB is running or has queued over these column families (0:
    nothing left to do in the background)."""
    return sum(
        family.property_int_value(name) or 0 for family in families for name in BACKGROUND_WORK
    )


class StoreOptions:
    """RocksDB options sized for many small stores on a small machine: one block cache and one
    memtable budget (a `WriteBufferManager`) shared by every store of the process."""

    def __init__(self, settings: StateSettings) -> None:
        self._settings = settings
        self._cache = Cache(settings.block_cache_bytes)
        self._memtables = WriteBufferManager(settings.memtable_budget_bytes, False)

    def build(self) -> Options:
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.create_missing_column_families(True)
        options.set_write_buffer_size(self._settings.write_buffer_bytes)
        options.set_max_write_buffer_number(self._settings.max_write_buffers)
        options.set_target_file_size_base(self._settings.target_file_bytes)
        options.set_write_buffer_manager(self._memtables)
        options.set_compression_type(DBCompressionType.zstd())
        options.set_max_background_jobs(2)
        # Writes skip the write-ahead log (`PartitionStore.write`): the tables and the changelog
        # offset in META must then reach disk together, whichever table's memtable filled.
        options.set_atomic_flush(True)
        table_options = BlockBasedOptions()
        table_options.set_block_cache(self._cache)
        table_options.set_bloom_filter(10, False)  # a get of an absent key skips the SST files
        # Index and filter blocks live in the shared cache, so they count against its bound
        # instead of growing outside it with every SST file; level-0 ones stay pinned there.
        table_options.set_cache_index_and_filter_blocks(True)
        table_options.set_pin_l0_filter_and_index_blocks_in_cache(True)
        options.set_block_based_table_factory(table_options)
        return options

    @staticmethod
    def write_options() -> WriteOptions:
        """Every store write skips the write-ahead log (module docstring)."""
        options = WriteOptions()
        # A property at run time; rocksdict's stub declares it a method.
        options.disable_wal = True  # type: ignore[method-assign,assignment]
        return options


class PartitionStore:
    """The RocksDB of one state partition."""

    def __init__(self, path: Path, tables: tuple[str, ...], options: StoreOptions) -> None:
        self.path = path
        self.tables = tables
        path.parent.mkdir(parents=True, exist_ok=True)
        built = options.build()
        families = {name: options.build() for name in (*tables, META_TABLE)}
        on_disk = Rdict.list_cf(str(path), built) if (path / "CURRENT").exists() else []
        unused = [name for name in on_disk if name not in families and name != DEFAULT_FAMILY]
        opened = {**families, **{name: options.build() for name in unused}}
        self._db = Rdict(str(path), options=built, column_families=opened)
        for name in unused:
            log.info("state %s: dropping table %r, which no handler names any more", path, name)
            self._db.drop_column_family(name)
        self._families = {name: self._db.get_column_family(name) for name in families}
        self._handles = {name: self._db.get_column_family_handle(name) for name in families}
        self._write_options = options.write_options()

    def get(self, table: str, key: bytes) -> bytes | None:
        value: bytes | None = self._families[table].get(key)
        return value

    def get_many(self, table: str, keys: list[bytes]) -> list[bytes | None]:
        """The values of ``keys`` in order (None where absent): one RocksDB multi-get."""
        if not keys:
            return []
        request: list[str | int | float | bytes | bool] = list(keys)
        values: list[bytes | None] = self._families[table].get(request) or []
        return values

    def scan(
        self, table: str, prefix: bytes = b"", start: bytes = b""
    ) -> Iterator[tuple[bytes, bytes]]:
        """The entries under ``prefix`` in key order, from the first key at or after ``start``."""
        iterator = self._families[table].iter()
        iterator.seek(max(prefix, start))
        while iterator.valid():
            key: bytes = iterator.key()
            if not key.startswith(prefix):
                break
            yield key, iterator.value()
            iterator.next()

    def changelog_position(self) -> tuple[str, int] | None:
        """The changelog topic and the last offset of it this store reflects, if recorded."""
        offset = self.get(META_TABLE, CHANGELOG_OFFSET_KEY)
        topic = self.get(META_TABLE, CHANGELOG_TOPIC_KEY)
        if offset is None or topic is None:
            return None
        return topic.decode(), int(offset)

    def write(
        self,
        changes: dict[str, dict[bytes, bytes | None]],
        changelog_topic: str,
        changelog_offset: int | None,
    ) -> None:
        """Apply changes, ``{table: {key: value or None for a delete}}``, and the changelog offset
        they reach in one atomic WriteBatch (without the write-ahead log: module docstring)."""
        batch = WriteBatch(raw_mode=True)
        put, delete = batch.put, batch.delete
        for table, writes in changes.items():
            handle = self._handles[table]
            for key, value in writes.items():
                if value is None:
                    delete(key, handle)
                else:
                    put(key, value, handle)
        if changelog_offset is not None:
            batch.put(CHANGELOG_TOPIC_KEY, changelog_topic.encode(), self._handles[META_TABLE])
            batch.put(
                CHANGELOG_OFFSET_KEY, str(changelog_offset).encode(), self._handles[META_TABLE]
            )
        self._db.write(batch, self._write_options)

    def count(self, table: str) -> int:
        return sum(1 for _ in self.scan(table))

    def int_property(self, name: str) -> int:
        """A RocksDB integer property summed over the tables, e.g.
        ``rocksdb.cur-size-all-mem-tables`` (0 where a table does not report it)."""
        return sum(family.property_int_value(name) or 0 for family in self._families.values())

    def background_work(self) -> int:
        """Flushes and compactions RocksDB is running or has queued, over all the tables (0:
        nothing left to do in the background)."""
        return background_work(self._families.values())

    def close(self) -> None:
        """Flush and release the directory lock; column family views must go first."""
        self._db.flush()
        for family in self._families.values():
            family.close()
        self._families = {}
        self._handles = {}
        self._db.close()

    @staticmethod
    def destroy(path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)


class StoreSource(Protocol):
    """The open store of a state partition, or None: what the service loop offers a reader in
    another thread (an HTTP API answering from the partitions this instance holds)."""

    def store(self, partition: int) -> PartitionStore | None: ...


class Transaction:
    """Writes not yet in RocksDB, layered over the store or over another transaction.

    The loop keeps one per state partition per cycle and gives each message a child, merged into
    the parent only when the handler succeeds: a handler that fails leaves no half-written state.

    `writes` is ``{table: {key: value}}`` (value None: a delete); `sources` is ``{table: {key:
    source}}``, the input message that last wrote each key, for the changelog header (absent: timer
    work). A table is in both, and in `_keys`, from its first write in this layer on. Keeping one
    dict per table, not one keyed by a (table, key) tuple, spares a tuple per write.
    """

    def __init__(self, parent: PartitionStore | Transaction) -> None:
        self.parent = parent
        self.writes: dict[str, dict[bytes, bytes | None]] = {}
        self.sources: dict[str, dict[bytes, str]] = {}
        self._keys: dict[str, _KeyIndex] = {}

    def _table(self, table: str) -> dict[bytes, bytes | None]:
        """This layer's writes of ``table``, created (with its sources and key index) if new."""
        writes = self.writes.get(table)
        if writes is None:
            writes = self.writes[table] = {}
            self.sources[table] = {}
            self._keys[table] = _KeyIndex()
        return writes

    def get(self, table: str, key: bytes) -> bytes | None:
        writes = self.writes.get(table)
        if writes is not None and key in writes:
            return writes[key]
        return self.parent.get(table, key)

    def get_many(self, table: str, keys: list[bytes]) -> list[bytes | None]:
        """What `get` answers for each key, in order; the keys this layer did not write are read
        from the parent in one call (down to one RocksDB multi-get)."""
        writes = self.writes.get(table)
        if writes is None:
            return self.parent.get_many(table, keys)
        values: list[bytes | None] = [None] * len(keys)
        missing: list[int] = []
        for index, key in enumerate(keys):
            if key in writes:
                values[index] = writes[key]
            else:
                missing.append(index)
        if missing:
            read = self.parent.get_many(table, [keys[index] for index in missing])
            for index, value in zip(missing, read, strict=True):
                values[index] = value
        return values

    def put(self, table: str, key: bytes, value: bytes | None, source: str | None) -> None:
        """Write `value` (None: delete) with the message that wrote it (None: timer work); the
        hottest call of every stateful service, so it is one function without helpers."""
        writes = self.writes.get(table)
        if writes is None:
            writes = self._table(table)
        if key not in writes:
            self._keys[table].add(key)
        writes[key] = value
        if source is None:
            self.sources[table].pop(key, None)
        else:
            self.sources[table][key] = source

    def delete(self, table: str, key: bytes, source: str | None) -> None:
        self.put(table, key, None, source)

    def put_many(
        self,
        table: str,
        keys: list[bytes],
        values: Sequence[bytes | None],
        source: str | Sequence[str] | None,
    ) -> None:
        """`put` of each key and value in turn, with one source or one per key: a handler's bulk
        write (a page's out-links, a batch's in-links). Keys not written yet in this layer (the
        common case) cost a few C-level dict updates, not a `put` call each."""
        sources: Iterable[str | None]
        if source is None or isinstance(source, str):
            sources = repeat(source)
        elif len(source) != len(keys):
            raise ValueError(f"{len(keys)} keys but {len(source)} sources")
        else:
            sources = source
        if len(values) != len(keys):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        if not keys:
            return  # no table entry: a layer with a table in `writes` has written to it
        writes = self._table(table)
        if not writes.keys().isdisjoint(keys) or len(set(keys)) != len(keys):
            for key, value, one in zip(keys, values, sources, strict=False):  # lengths checked
                self.put(table, key, value, one)
            return
        writes.update(zip(keys, values, strict=False))
        if isinstance(source, str):
            self.sources[table].update(dict.fromkeys(keys, source))
        elif source is not None:
            self.sources[table].update(zip(keys, source, strict=False))
        self._keys[table].extend(keys)

    def merge_into_parent(self) -> None:
        parent = self.parent
        if not isinstance(parent, Transaction):
            raise StateError("a top-level transaction is written by the loop, not merged")
        for table, writes in self.writes.items():
            into = parent._table(table)
            sources, into_sources = self.sources[table], parent.sources[table]
            if into.keys().isdisjoint(writes):  # the common case: keys new to the parent,
                parent._keys[table].extend(list(writes))  # so none of them has a source there
                into.update(writes)
                into_sources.update(sources)
                continue
            index = parent._keys[table]
            for key, value in writes.items():
                if key not in into:
                    index.add(key)
                into[key] = value
                source = sources.get(key)
                if source is None:
                    into_sources.pop(key, None)
                else:
                    into_sources[key] = source

    def scan(
        self, table: str, prefix: bytes = b"", start: bytes = b""
    ) -> Iterator[tuple[bytes, bytes]]:
        """The parent's entries merged with this layer's writes, in key order, from ``start``.

        The layer's keys are indexed per table (`_KeyIndex`), so a scan costs the keys under its
        prefix, not every write of the cycle."""
        writes = self.writes.get(table)
        pending = (
            []
            if writes is None
            else [(key, writes[key]) for key in self._keys[table].under(prefix) if key >= start]
        )
        index = 0
        for key, value in self.parent.scan(table, prefix, start):
            while index < len(pending) and pending[index][0] < key:
                yield from _present(pending[index])
                index += 1
            if index < len(pending) and pending[index][0] == key:
                yield from _present(pending[index])
                index += 1
                continue
            yield key, value
        for entry in pending[index:]:
            yield from _present(entry)


class _KeyIndex:
    """One table's written keys in sorted order: a sorted list plus an unsorted tail of keys added
    since. A lookup looks through a short tail and folds a long one in (sorting a sorted run plus
    a tail is cheap), so a cycle of writes with no scan in between costs one sort, and a scan costs
    a bisection plus at most `LOOK_AT` keys of the tail."""

    LOOK_AT = 256

    def __init__(self) -> None:
        self._sorted: list[bytes] = []
        self._tail: list[bytes] = []

    def add(self, key: bytes) -> None:
        self._tail.append(key)

    def extend(self, keys: list[bytes]) -> None:
        self._tail.extend(keys)

    def under(self, prefix: bytes) -> list[bytes]:
        """The keys starting with ``prefix``, sorted."""
        if len(self._tail) > self.LOOK_AT:
            self._sorted.extend(self._tail)
            self._sorted.sort()
            self._tail = []
        keys = self._sorted
        start = bisect_left(keys, prefix)
        after = _after_prefix(prefix)
        found = keys[start : len(keys) if after is None else bisect_left(keys, after, start)]
        tail = [key for key in self._tail if key.startswith(prefix)]
        if tail:
            found.extend(tail)
            found.sort()
        return found


def _after_prefix(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no such key)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _present(entry: tuple[bytes, bytes | None]) -> Iterator[tuple[bytes, bytes]]:
    key, value = entry
    if value is not None:
        yield key, value


class Table:
    """A handler's view of one table of its partition: get, put, delete, ordered scans."""

    def __init__(self, transaction: Transaction, name: str, source: str | None) -> None:
        self._transaction = transaction
        self._name = name
        self._source = source

    def get(self, key: bytes) -> bytes | None:
        return self._transaction.get(self._name, key)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        """`get` of each key, in order, in one read of the store (a RocksDB multi-get)."""
        return self._transaction.get_many(self._name, keys)

    def put(self, key: bytes, value: bytes) -> None:
        self._transaction.put(self._name, key, value, self._source)

    def delete(self, key: bytes) -> None:
        self._transaction.delete(self._name, key, self._source)

    def scan(self, prefix: bytes = b"", start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """The entries under ``prefix`` in key order, from the first key at or after ``start``."""
        return self._transaction.scan(self._name, prefix, start)
