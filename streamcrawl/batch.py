"""Batch handling: a stateful handler given one state partition's records of a cycle together.

A `BaseHandler` sees one record at a time, each in its own child `Transaction` merged into the
cycle's only when it succeeded, so a failing record leaves no write behind; that costs a Context,
a Transaction and a merge per record, and a handler cannot share work between the records of a
cycle (the link graph's nodes, a page's out-links written at once). A `BatchHandler` instead gets
every decoded record of one state partition in the cycle, in arrival order, in one `Batch` over the
cycle's transaction, after the loop decoded the whole cycle and before `on_tick`:

- it writes into the cycle's transaction directly (`Batch.transaction`, `Batch.table`), with the
  record's changelog source (`Batch.source`), so keeping a failing record's writes out is its own
  job: it holds them until the record succeeded, or writes only after everything that can fail;
- it reports a record it cannot process with `Batch.reject` (the record is invalid: like
  `Context.dead_letter`) or `Batch.failed` (an exception: like an exception out of `handle`); the
  kernel dead-letters it exactly as it does for a per-record handler (same reasons, same metrics,
  the raw message as payload) and its offset moves on with the others;
- it produces through `Batch.produce`, or `Batch.produce_rows` for many records to one topic
  (`Rows`: no object each); everything is sent with the cycle's outputs, before the commit.

An exception escaping `handle_batch` cannot be pinned to a record, and the cycle's transaction may
hold part of its writes: the kernel lets it through, so the service stops before producing or
committing anything of the cycle, and its records are redelivered after a restart (as after a
failed delivery). `apply_batch` is the kernel's one place that runs a batch; the loop calls it,
and so do the benchmarks, so they time the kernel's own path.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from streamcrawl.handler import BaseHandler, Context, Headers, Output, Record
from streamcrawl.recovery import Derived, source_header
from streamcrawl.state import Table, Transaction

log = logging.getLogger(__name__)

Row = tuple[str | bytes | None, bytes | None, int | None]
"""One message of `Batch.produce_rows`: key, value, partition (None: placed by its key)."""


class Rows:
    """The messages of one `Batch.produce_rows`: keys, values and partitions (None: placed by
    the key; all None when not given) in three sequences of one length, iterated as `Row`
    triples. Not a tuple each: a bulk output (the link graph's forward pass makes one message
    per edge) then allocates nothing per message for the collector to scan, and that pass took
    0.91 of the CPU (tests/bench/RESULTS.md, session 16)."""

    __slots__ = ("keys", "partitions", "values")

    def __init__(
        self,
        keys: Sequence[str | bytes | None],
        values: Sequence[bytes | None],
        partitions: Sequence[int | None] | None = None,
    ) -> None:
        if partitions is None:
            partitions = [None] * len(keys)
        if not len(keys) == len(values) == len(partitions):
            lengths = f"{len(keys)} keys, {len(values)} values, {len(partitions)} partitions"
            raise ValueError(f"rows of unequal lengths: {lengths}")
        self.keys, self.values, self.partitions = keys, values, partitions

    def __iter__(self) -> Iterator[Row]:
        return zip(self.keys, self.values, self.partitions, strict=True)

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(frozen=True)
class Rejection:
    """A record of a batch the handler could not process, for the kernel to dead-letter."""

    record: Record
    reason: str
    kind: str
    """The dead-letter metric's reason label: "rejected" or "handler", as for `handle`."""


@dataclass
class Batch:
    """One state partition's records of one cycle, over the cycle's transaction."""

    partition: int
    records: list[Record]
    transaction: Transaction
    outputs: list[Output] = field(default_factory=list)
    rows: list[tuple[str, Rows]] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)

    @staticmethod
    def source(record: Record) -> str:
        """The changelog source of a record's writes (`topic:partition:offset`)."""
        return source_header(record.topic, record.partition, record.offset)

    def table(self, name: str, record: Record | None) -> Table:
        """A table of the cycle's transaction; writes carry `record` as their changelog source
        (None: no source, like timer work, always applied on restore)."""
        return Table(self.transaction, name, None if record is None else self.source(record))

    def produce(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        self.outputs.append(Output(topic, key, value, partition, headers))

    def produce_rows(self, topic: str, rows: Rows) -> None:
        """Produce many messages to one topic; `rows` is the handler's to fill until the cycle
        completes (one `Rows` per topic and batch is enough)."""
        self.rows.append((topic, rows))

    def reject(self, record: Record, reason: str) -> None:
        """Dead-letter `record` as invalid (`Context.dead_letter`); nothing of it is produced by
        the kernel, and the handler must not have written or produced anything for it."""
        self.rejections.append(Rejection(record, reason, "rejected"))

    def failed(self, record: Record, error: Exception) -> None:
        """Dead-letter `record` for an exception its processing raised (a bug, or data the handler
        cannot handle), as the loop does for an exception out of `handle`."""
        where = (record.topic, record.partition, record.offset)
        log.error("handler failed on %s:%d@%d", *where, exc_info=error)
        reason = f"handler error: {type(error).__name__}: {error}"
        self.rejections.append(Rejection(record, reason, "handler"))


class BatchHandler(BaseHandler):
    """A stateful handler whose records come in batches (see the module docstring).

    It may also keep derived tables: tables whose every entry is a function of the entries of
    other tables (the link graph's anchor entries, one per live reverse record with a text). A
    derived table's writes go into the store's WriteBatch like any other but produce no changelog
    record, so they need no source (None). Restoring a partition rebuilds them from the records
    they derive from (`derive`), and ignores any changelog record of a derived table (an older
    version may have written some). Under compaction this holds because a derived table is a
    function of the latest value of each key, which is what a compacted changelog keeps."""

    derived_tables: frozenset[str] = frozenset()

    def handle(self, record: Record, ctx: Context) -> None:
        raise RuntimeError("a batch handler's records come through handle_batch")

    def handle_batch(self, batch: Batch) -> None:
        raise NotImplementedError

    @staticmethod
    def derive(table: str, key: bytes, old: bytes | None, new: bytes | None) -> Derived:
        """The derived writes that `table`'s `key` going from `old` to `new` (None: absent)
        implies, applied in order while restoring; none unless a handler keeps derived tables."""
        return []


def apply_batch(
    handler: BatchHandler, partition: int, records: list[Record], transaction: Transaction
) -> Batch:
    """Run one partition's batch; the caller sends its `outputs` and `rows` and dead-letters its
    `rejections` (the loop, `ServiceLoop._complete`)."""
    batch = Batch(partition, records, transaction)
    handler.handle_batch(batch)
    return batch
