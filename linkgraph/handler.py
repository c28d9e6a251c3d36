"""The link graph's pure logic: `links` and `links.by-target` records in, index writes out.

DESIGN.md section 3, step 9. One handler serves both inputs of one co-partitioned group: state
partition p holds the forward index and nodes of sources on `links` partition p, and the reverse
and anchor indexes of targets on `links.by-target` partition p. Both topics are partitioned by the
URL with the same murmur2 and count, so p owns a URL's out-links, in-links and node record.
`linkgraph.indexes` has the upsert rules.

Records are applied in batches: `handle` only queues a record for its partition, and the cycle's
`on_tick` (which the loop calls for every open partition after the cycle's records, in the same
transaction, before anything is produced or committed) applies the queue in arrival order. So the
loop's per-record child transaction stays empty, and one `PartitionIndexes` holds each record's
writes until it succeeded, then puts them into the cycle's transaction with the record as their
changelog source. A record that fails there is dead-lettered by the handler itself, as the loop
would (same reasons, same metric), with nothing of it written. The loop's per-topic processing
histogram therefore times the queueing; the cycle histogram holds the work.

Queries are answered on the loop thread too: the API thread queues a query for the state
partition that owns its key (`submit`), and `on_tick` answers it from that partition's tables, so
no other thread ever touches a store the loop may close.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from linkgraph import metrics
from linkgraph.exceptions import CorruptRecordError, NotOwnedError, QueryError
from linkgraph.indexes import (
    PartitionIndexes,
    by_target_partition,
    upsert_in_link,
    upsert_page_links,
)
from linkgraph.nodecache import NodeCache
from linkgraph.queries import Query, TableReader, answer
from linkgraph.records import FORWARD, NODES, STATS_KEY, TABLES, PartitionStats
from schemas import links_by_target
from schemas.deadletter import dead_letter
from schemas.links import PageLinks
from schemas.links_by_target import InLink
from schemas.serde import decode, encode
from streamcrawl.handler import BaseHandler, Context, Record
from streamcrawl.metrics import LoopMetrics
from streamcrawl.spec import Input
from streamcrawl.state import Transaction

log = logging.getLogger(__name__)

GAUGE_INTERVAL_S = 1.0
ROLE = "linkgraph"


@dataclass(frozen=True)
class LinkGraphTopics:
    links: str
    by_target: str
    partitions: int
    """Partition count of `links.by-target` (equal to that of `links`)."""
    dead_letters: str = "deadletter"
    """Where records that fail while applied at `on_tick` go (the loop's dead-letter topic)."""


def decode_page_links(raw: bytes | None) -> PageLinks:
    value: PageLinks = decode(PageLinks, raw)
    return value


def decode_in_link(raw: bytes | None) -> InLink:
    value: InLink = decode(InLink, raw)
    return value


def _payload(value: object) -> bytes:
    """A dead letter's payload: the decoded record re-encoded (the loop keeps the raw bytes, the
    handler only the decoded record), or its repr when even that fails (a bug's record)."""
    try:
        if isinstance(value, BaseModel):
            return encode(value)
    except Exception:  # the letter must go out whatever the record holds
        log.exception("could not re-encode a dead-lettered record")
    return repr(value).encode()


class _ContextReader:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def table(self, name: str) -> TableReader:
        return self._ctx.table(name)


class LinkGraphHandler(BaseHandler):
    def __init__(self, topics: LinkGraphTopics) -> None:
        self._topics = topics
        self._lock = threading.Lock()
        self._open: set[int] = set()
        self._pending: dict[int, list[tuple[Query, Future[dict[str, Any]]]]] = {}
        self._stats: dict[int, PartitionStats] = {}
        self._nodes: dict[int, NodeCache] = {}
        """Per state partition, its decoded nodes (`linkgraph.nodecache`); those a cycle changed
        are written into its transaction at its `on_tick` (before queries are answered)."""
        self._queued: dict[int, list[tuple[Record, str | None]]] = {}
        """Per state partition, this cycle's records (and their changelog sources) in arrival
        order, applied at the cycle's `on_tick`."""
        self._loop_metrics = LoopMetrics.for_role(ROLE)
        self._gauges_at = float("-inf")
        self._stats_dirty: set[int] = set()

    @staticmethod
    def tables() -> tuple[str, ...]:
        return TABLES

    def inputs(self) -> tuple[Input, ...]:
        return (
            Input(self._topics.links, decode_page_links),
            Input(self._topics.by_target, decode_in_link),
        )

    # ----- indexing -------------------------------------------------------------------------

    def handle(self, record: Record, ctx: Context) -> None:
        """Queue the record for its partition; the cycle's `on_tick` applies the queue (see the
        module docstring). Nothing is written here, so the loop's child transaction stays empty."""
        if ctx.partition is None:
            raise RuntimeError("the link graph is stateful: records come with their partition")
        queued = self._queued.get(ctx.partition)
        if queued is None:
            queued = self._queued[ctx.partition] = []
        queued.append((record, ctx.source))

    def _apply_queued(self, ctx: Context, transaction: Transaction) -> None:
        """Apply this cycle's records of one partition in arrival order, each into the cycle's
        transaction only once it succeeded (`PartitionIndexes.commit`); a record that fails is
        dead-lettered with nothing of it written, its cached source node put back as it was."""
        assert ctx.partition is not None
        queued = self._queued.pop(ctx.partition, None)
        if not queued:
            return
        nodes = self._nodes.get(ctx.partition)
        if nodes is None:
            nodes = self._nodes[ctx.partition] = NodeCache()
        stats = self._stats.get(ctx.partition)
        if stats is None:
            stats = self._stats[ctx.partition] = PartitionStats()
        indexes = PartitionIndexes(transaction, nodes, stats)
        links_topic, by_target = self._topics.links, self._topics.by_target
        partitions = self._topics.partitions
        produce = ctx.produce
        upserted = 0
        for record, source in queued:
            indexes.begin(source)
            if record.topic != links_topic:
                # Changes its node only once nothing can fail any more (see `upsert_in_link`).
                try:
                    upsert_in_link(indexes, record.value)
                except Exception as error:
                    self._reject(ctx, record, error)
                    continue
            else:
                url = record.value.from_url
                saved = nodes.snapshot(url)
                try:
                    upsert_page_links(indexes, record.value)
                except Exception as error:
                    nodes.restore(url, saved)
                    self._reject(ctx, record, error)
                    continue
            indexes.commit()
            for to_url, from_url, value in indexes.rekeyed:
                produce(
                    by_target,
                    links_by_target.key(to_url, from_url),
                    value,
                    partition=by_target_partition(to_url, partitions),
                )
            upserted += indexes.edges_upserted
        metrics.EDGES_UPSERTED.inc(upserted)
        self._stats_dirty.add(ctx.partition)

    def _reject(self, ctx: Context, record: Record, error: Exception) -> None:
        """Route a record that failed to the dead-letter topic, as the loop routes a handler's
        failure (same reasons, same kernel metric); its payload is the decoded record re-encoded."""
        if isinstance(error, CorruptRecordError):
            reason, kind = f"corrupt state: {error}", "rejected"
        else:  # a bug must not stop the loop: routed like the loop routes a handler's exception
            where = (record.topic, record.partition, record.offset)
            log.exception("handler failed on %s:%d@%d", *where)
            self._loop_metrics.errors.labels("handler").inc()
            reason, kind = f"handler error: {type(error).__name__}: {error}", "handler"
        log.warning(
            "dead-lettered %s:%d@%d: %s", record.topic, record.partition, record.offset, reason
        )
        self._loop_metrics.dead_letters.labels(record.topic, kind).inc()
        payload = _payload(record.value)
        letter = dead_letter(ROLE, record.topic, record.partition, record.offset, reason, payload)
        ctx.produce(self._topics.dead_letters, record.key, encode(letter))

    def _refresh_gauges(self) -> None:
        """Sum the partitions' stats into the gauges; at most once a second (on ticks)."""
        self._gauges_at = time.monotonic()
        stats = list(self._stats.values())
        metrics.EDGES.set(sum(s.entries[FORWARD] for s in stats))
        metrics.NODES.set(sum(s.entries[NODES] for s in stats))
        for table in TABLES:
            metrics.INDEX_BYTES.labels(table).set(sum(s.size[table] for s in stats))

    # ----- partitions -----------------------------------------------------------------------

    def on_partition_opened(self, ctx: Context) -> None:
        if ctx.partition is None:
            return
        self._stats[ctx.partition] = PartitionStats.decode(ctx.table(NODES).get(STATS_KEY))
        self._nodes[ctx.partition] = NodeCache()
        self._refresh_gauges()
        with self._lock:
            self._open.add(ctx.partition)

    def on_partition_closed(self, partition: int) -> None:
        self._queued.pop(partition, None)  # never applied: their offsets were not committed
        self._stats.pop(partition, None)
        self._nodes.pop(partition, None)
        self._stats_dirty.discard(partition)
        self._refresh_gauges()
        with self._lock:
            self._open.discard(partition)
            orphaned = self._pending.pop(partition, [])
        for _, future in orphaned:
            future.set_exception(NotOwnedError(partition))

    def open_partitions(self) -> set[int]:
        with self._lock:
            return set(self._open)

    # ----- queries --------------------------------------------------------------------------

    def submit(self, partition: int, query: Query) -> Future[dict[str, Any]]:
        """Queue a query for the loop thread; fails at once when the partition is not open here."""
        future: Future[dict[str, Any]] = Future()
        with self._lock:
            if partition not in self._open:
                future.set_exception(NotOwnedError(partition))
                return future
            self._pending.setdefault(partition, []).append((query, future))
        return future

    def on_tick(self, ctx: Context) -> None:
        if ctx.partition is None or ctx.transaction is None:
            return
        self._apply_queued(ctx, ctx.transaction)
        nodes = self._nodes.get(ctx.partition)
        if nodes:
            stats = self._stats.setdefault(ctx.partition, PartitionStats())
            nodes.flush(ctx.transaction, stats)
            self._stats_dirty.add(ctx.partition)
        if ctx.partition in self._stats_dirty:
            # Once per cycle, in the cycle's transaction. Without a source offset, so a crash
            # between changelog and commit can leave the sizes a cycle ahead: they are gauges.
            self._stats_dirty.discard(ctx.partition)
            ctx.table(NODES).put(STATS_KEY, self._stats[ctx.partition].encode())
        if time.monotonic() - self._gauges_at >= GAUGE_INTERVAL_S:
            self._refresh_gauges()
        with self._lock:
            queued = self._pending.pop(ctx.partition, [])
        reader = _ContextReader(ctx)
        for query, future in queued:
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(answer(reader, query))
            except (QueryError, CorruptRecordError) as error:
                future.set_exception(error)
            except Exception as error:  # a query must never stop the loop: answered as a 500
                log.exception("query %r failed", query)
                future.set_exception(error)
