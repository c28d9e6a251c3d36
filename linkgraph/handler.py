"""The link graph's pure logic: `links` and `links.by-target` records in, index writes out.

DESIGN.md section 3, step 9. One handler serves both inputs of one co-partitioned group: state
partition p holds the forward index and nodes of sources on `links` partition p, and the reverse
and anchor indexes of targets on `links.by-target` partition p. Both topics are partitioned by the
URL with the same murmur2 and count, so p owns a URL's out-links, in-links and node record.
`linkgraph.indexes` (links) and `linkgraph.inlinks` (in-links) have the upsert rules.

Records come in batches (`streamcrawl.batch`): the kernel hands over each state partition's
records of a cycle together, in arrival order, over the cycle's transaction. One `PartitionIndexes`
holds each record's writes until it succeeded, then puts them into the transaction with the record
as their changelog source; a run of consecutive in-links is applied together in the same way
(`inlinks.upsert_in_links`). A record that fails is reported to the kernel (`Batch.failed`, or
`Batch.reject` for corrupt state), which dead-letters it, with nothing of it written. The cycle's
changed nodes and the partition's stats are written at the cycle's `on_tick`, which the loop calls
after the batches, in the same transaction, before anything is produced or committed.

Queries are answered on the loop thread too: the API thread queues a query for the state
partition that owns its key (`submit`), and `on_tick` answers it from that partition's tables, so
no other thread ever touches a store the loop may close.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from linkgraph import metrics
from linkgraph.exceptions import CorruptRecordError, NotOwnedError, QueryError
from linkgraph.indexes import PartitionIndexes, anchors_of_reverse, upsert_page_links
from linkgraph.inlinks import upsert_in_links
from linkgraph.nodecache import MAX_TARGETS, NodeCache
from linkgraph.queries import Query, TableReader, answer
from linkgraph.records import ANCHORS, FORWARD, NODES, STATS_KEY, TABLES, PartitionStats
from linkgraph.wire import decode_in_link
from schemas.canonical import registered_domain
from schemas.links import PageLinks
from schemas.serde import decode
from streamcrawl.batch import Batch, BatchHandler
from streamcrawl.handler import Context, Record
from streamcrawl.spec import Input

log = logging.getLogger(__name__)

GAUGE_INTERVAL_S = 1.0
ROLE = "linkgraph"


@dataclass(frozen=True)
class LinkGraphTopics:
    links: str
    by_target: str
    partitions: int
    """Partition count of `links.by-target` (equal to that of `links`)."""


def decode_page_links(raw: bytes | None) -> PageLinks:
    value: PageLinks = decode(PageLinks, raw)
    return value


class _ContextReader:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def table(self, name: str) -> TableReader:
        return self._ctx.table(name)


class LinkGraphHandler(BatchHandler):
    derived_tables = frozenset({ANCHORS})
    """Anchor entries follow from the reverse records: no changelog records of their own."""
    derive = staticmethod(anchors_of_reverse)

    def __init__(
        self,
        topics: LinkGraphTopics,
        *,
        in_link_ends: bool = False,
        kept_targets: int = MAX_TARGETS,
    ) -> None:
        self._topics = topics
        self._in_link_ends = in_link_ends
        """Re-keyed values carry the edge's ends too (`LinkGraphOptions.in_link_ends`)."""
        self._kept_targets = kept_targets
        """Written targets each partition's node cache keeps (`LinkGraphOptions.kept_targets`)."""
        self._lock = threading.Lock()
        self._open: set[int] = set()
        self._pending: dict[int, list[tuple[Query, Future[dict[str, Any]]]]] = {}
        self._stats: dict[int, PartitionStats] = {}
        self._nodes: dict[int, NodeCache] = {}
        """Per state partition, its decoded nodes (`linkgraph.nodecache`); those a cycle changed
        are written into its transaction at its `on_tick` (before queries are answered)."""
        self._gauges_at = float("-inf")
        self._stats_dirty: set[int] = set()
        # tldextract builds its suffix trie at the first registered domain asked for (a quarter
        # of a second): at start-up, not inside the first cycle of records.
        registered_domain("www.example.com")

    @staticmethod
    def tables() -> tuple[str, ...]:
        return TABLES

    def inputs(self) -> tuple[Input, ...]:
        return (
            Input(self._topics.links, decode_page_links),
            Input(self._topics.by_target, decode_in_link, keyed=True),
        )

    # ----- indexing -------------------------------------------------------------------------

    def handle_batch(self, batch: Batch) -> None:
        """Apply a cycle's records of one partition in arrival order, each into the cycle's
        transaction only once it succeeded (`PartitionIndexes.commit`); a record that fails is
        dead-lettered by the kernel with nothing of it written, its cached source node put back."""
        partition = batch.partition
        stats = self._stats.get(partition)
        if stats is None:  # a partition not opened through `on_partition_opened`
            stored = batch.transaction.get(NODES, STATS_KEY)
            stats = self._stats[partition] = PartitionStats.decode(stored)
        nodes = self._nodes.get(partition)
        if nodes is None:  # its epoch counted on from the stored stats (`linkgraph.nodecache`)
            nodes = self._nodes[partition] = self._node_cache(stats, batch.transaction.scan(NODES))
        indexes = PartitionIndexes(
            batch.transaction, nodes, stats, self._topics.partitions, self._in_link_ends
        )
        links_topic = self._topics.links
        in_links: list[Record] = []
        """The run of in-links since the last `links` record (applied together, in order)."""
        for record in batch.records:
            if record.topic != links_topic:
                in_links.append(record)
                continue
            if in_links:
                upsert_in_links(indexes, batch, in_links)
                in_links = []
            indexes.begin(f"{record.topic}:{record.partition}:{record.offset}")  # Batch.source
            url = record.value.from_url
            saved = nodes.snapshot(url)
            try:
                upsert_page_links(indexes, record.value)
            except Exception as error:
                nodes.restore(url, saved)
                if isinstance(error, CorruptRecordError):
                    batch.reject(record, f"corrupt state: {error}")
                else:
                    batch.failed(record, error)
                continue
            indexes.commit()
        if in_links:
            upsert_in_links(indexes, batch, in_links)
        rows = indexes.rows()
        if rows:
            batch.produce_rows(self._topics.by_target, rows)
        metrics.EDGES_UPSERTED.inc(indexes.upserted)
        self._stats_dirty.add(partition)

    def _node_cache(
        self, stats: PartitionStats, stored: Iterator[tuple[bytes, bytes]]
    ) -> NodeCache:
        """A partition's node cache, beginning its next in-link epoch (`linkgraph.nodecache`)."""
        stats.epoch += 1
        nodes = NodeCache(epoch=stats.epoch, targets_limit=self._kept_targets)
        nodes.load(stored)
        return nodes

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
        stats = PartitionStats.decode(ctx.table(NODES).get(STATS_KEY))
        self._stats[ctx.partition] = stats
        self._nodes[ctx.partition] = self._node_cache(stats, ctx.table(NODES).scan())
        self._refresh_gauges()
        with self._lock:
            self._open.add(ctx.partition)

    def on_partition_closed(self, partition: int) -> None:
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
