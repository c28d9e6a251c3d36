"""The link graph's pure logic: `links` and `links.by-target` records in, index writes out.

DESIGN.md section 3, step 9. One handler serves both inputs of one co-partitioned group: state
partition p holds the forward index and nodes of sources on `links` partition p, and the reverse
and anchor indexes of targets on `links.by-target` partition p. Both topics are partitioned by the
URL with the same murmur2 and count, so p owns a URL's out-links, in-links and node record.
`linkgraph.indexes` has the upsert rules.

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

from linkgraph import metrics
from linkgraph.exceptions import CorruptRecordError, NotOwnedError, QueryError
from linkgraph.indexes import (
    PartitionIndexes,
    by_target_partition,
    in_link_value,
    upsert_in_link,
    upsert_page_links,
)
from linkgraph.queries import Query, TableReader, answer
from linkgraph.records import FORWARD, NODES, STATS_KEY, TABLES, EdgeRecord, PartitionStats
from schemas import links_by_target
from schemas.links import PageLinks
from schemas.links_by_target import InLink
from schemas.serde import decode
from streamcrawl.handler import BaseHandler, Context, Record
from streamcrawl.spec import Input

log = logging.getLogger(__name__)

GAUGE_INTERVAL_S = 1.0


@dataclass(frozen=True)
class LinkGraphTopics:
    links: str
    by_target: str
    partitions: int
    """Partition count of `links.by-target` (equal to that of `links`)."""


def decode_page_links(raw: bytes | None) -> PageLinks:
    value: PageLinks = decode(PageLinks, raw)
    return value


def decode_in_link(raw: bytes | None) -> InLink:
    value: InLink = decode(InLink, raw)
    return value


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
        if ctx.partition is None:
            raise RuntimeError("the link graph is stateful: records come with their partition")
        indexes = PartitionIndexes(ctx)
        try:
            if record.topic == self._topics.links:
                upsert_page_links(indexes, record.value, self._rekeyer(ctx))
            else:
                upsert_in_link(indexes, record.value)
        except CorruptRecordError as error:
            ctx.dead_letter(f"corrupt state: {error}")
            return
        metrics.EDGES_UPSERTED.inc(indexes.edges_upserted)
        self._stats.setdefault(ctx.partition, PartitionStats()).add(indexes.stats)
        self._stats_dirty.add(ctx.partition)

    def _rekeyer(self, ctx: Context) -> Any:
        topic, partitions = self._topics.by_target, self._topics.partitions

        def rekey(to_url: str, from_url: str, record: EdgeRecord, encoded: bytes) -> None:
            ctx.produce(
                topic,
                links_by_target.key(to_url, from_url),
                in_link_value(to_url, from_url, encoded),
                partition=by_target_partition(to_url, partitions),
            )

        return rekey

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
        self._refresh_gauges()
        with self._lock:
            self._open.add(ctx.partition)

    def on_partition_closed(self, partition: int) -> None:
        self._stats.pop(partition, None)
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
        if ctx.partition is None:
            return
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
