"""Upserting one partition's indexes: PageLinks to forward + nodes, in-links to reverse + anchors.

Re-crawl semantics (DESIGN section 3, step 9):

- An edge seen again keeps its ``discovered_at`` (the earliest ever seen) and moves
  ``last_seen_at`` to the newest fetch that had it; anchor, context, type and position follow the
  newest fetch.
- A fetch may come in parts. The node remembers the newest fetch being assembled (its time, parts
  seen, edges refreshed). When its last part arrives, every live edge the fetch did not refresh
  is marked ``gone`` (kept, with its dates), and the change is re-keyed like any other, so the
  target's instance marks its in-link gone too. The sweep scans the source's forward prefix only
  when something did disappear (live edges > refreshed ones), so a first crawl never scans.
- A part of an older fetch arriving late still records what it saw (dates widen) but never revives
  or sweeps: the newer fetch's view wins.
- Replays (redelivered messages) change nothing and produce nothing.

Every forward change is produced to `links.by-target` (key to TAB from, partition by to_url).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from linkgraph.hosts import host_and_domain, origin_of
from linkgraph.murmur import partition_of_key
from linkgraph.records import (
    ANCHORS,
    FORWARD,
    NODES,
    REVERSE,
    EdgeRecord,
    FetchAssembly,
    NodeRecord,
    PartitionStats,
    StatsDelta,
    anchor_key,
    edge_key,
    prefix_of,
    split_key,
)
from schemas.base import SCHEMA_VERSION
from schemas.links import LinkEdge, PageLinks
from schemas.links_by_target import InLink
from streamcrawl.handler import Context
from streamcrawl.state import Table, Transaction

ReKey = Callable[[str, str, EdgeRecord, bytes], None]
"""Produce one changed edge to `links.by-target`: to_url, from_url, record, encoded record."""


def new_node(url: str, first_seen_at: int) -> NodeRecord:
    host, domain = host_and_domain(origin_of(url))
    return NodeRecord(url=url, host=host, domain=domain, first_seen_at=first_seen_at)


@dataclass
class CachedNode:
    """A node read or written in the current cycle: decoded once, encoded once (at `flush`)."""

    node: NodeRecord
    stored: bytes | None
    """The node's value in the store or the cycle's transaction when it entered the cache."""
    source: str | None = None
    """The last message that changed it (its changelog header); None while unchanged."""


NodeCache = dict[str, CachedNode]
"""One state partition's nodes touched this cycle, by URL (see `flush_nodes`)."""


def snapshot(cached: CachedNode | None) -> CachedNode | None:
    """A copy to put back if the message changing it fails (its transaction is discarded)."""
    if cached is None:
        return None
    node = cached.node
    fetch = dataclasses.replace(node.fetch, parts_seen=list(node.fetch.parts_seen))
    copied = dataclasses.replace(node, crawl_ids=list(node.crawl_ids), fetch=fetch)
    return CachedNode(copied, cached.stored, cached.source)


def flush_nodes(cache: NodeCache, transaction: Transaction, stats: PartitionStats) -> None:
    """Write the cycle's changed nodes into its transaction, each once, with the source of the last
    message that changed it (as if every message had written it), then forget them all."""
    for url, cached in cache.items():
        if cached.source is None:
            continue
        encoded = cached.node.encode()
        if encoded != cached.stored:
            key = url.encode()
            stats.changed(NODES, cached.stored, encoded, key)
            transaction.put(NODES, key, encoded, cached.source)
    cache.clear()


class PartitionIndexes:
    """The tables of one state partition for one message. `stats` collects this message's size
    changes, which the handler adds to the partition's totals once the message succeeded. Nodes go
    through the partition's per-cycle `NodeCache` instead of the nodes table: a target gets many
    in-links per cycle and each would read, decode, encode and write the whole node record."""

    def __init__(self, ctx: Context, nodes: NodeCache) -> None:
        self._ctx = ctx
        self.source = ctx.source
        self.cache = nodes
        self.forward = ctx.table(FORWARD)
        self.reverse = ctx.table(REVERSE)
        self.anchors = ctx.table(ANCHORS)
        self.stats = StatsDelta()
        self.edges_upserted = 0

    def put(self, table: Table, name: str, key: bytes, old: bytes | None, new: bytes) -> None:
        self.stats.changed(name, old, new, key)
        table.put(key, new)

    def node(self, url: str) -> NodeRecord:
        """The node of `url` as this cycle left it (a new one when unknown); change it in place,
        then `touched` it, and only after everything that can fail (see the handler)."""
        cached = self.cache.get(url)
        if cached is None:
            raw = self._ctx.table(NODES).get(url.encode())
            # A new node's first_seen_at is set by its first `touched`.
            node = NodeRecord.decode(raw) if raw is not None else new_node(url, -1)
            cached = self.cache[url] = CachedNode(node, raw)
        return cached.node

    def touched(self, node: NodeRecord, first_seen_at: int) -> None:
        if node.first_seen_at < 0 or first_seen_at < node.first_seen_at:
            node.first_seen_at = first_seen_at
        self.cache[node.url].source = self.source


def upsert_page_links(indexes: PartitionIndexes, links: PageLinks, rekey: ReKey) -> None:
    """Apply one part of one fetch's out-links (see the module docstring)."""
    fetched_at = links.fetched_at
    node = indexes.node(links.from_url)
    indexes.touched(node, fetched_at)
    node.crawled = True
    node.add_crawl(links.crawl_id)
    if node.fetched_at is None or fetched_at >= node.fetched_at:
        node.fetched_at = fetched_at
        if links.page is not None:
            node.status = links.page.status
            node.title = links.page.title
    if fetched_at > node.fetch.fetched_at:
        node.fetch = FetchAssembly(fetched_at=fetched_at, parts=links.parts)
    current = fetched_at == node.fetch.fetched_at
    # A source with no forward edge stored yet (a first crawl) has none to read back.
    stored = node.out_total > 0
    for edge in links.edges:
        _upsert_forward(indexes, node, links.from_url, edge, fetched_at, current, stored, rekey)
    if current and links.part not in node.fetch.parts_seen:
        node.fetch.parts_seen.append(links.part)
        node.fetch.parts_seen.sort()
        if node.fetch.complete and node.out_live > node.fetch.refreshed:
            _sweep_gone(indexes, node, fetched_at, rekey)


def _upsert_forward(
    indexes: PartitionIndexes,
    node: NodeRecord,
    from_url: str,
    edge: LinkEdge,
    fetched_at: int,
    current: bool,
    stored: bool,
    rekey: ReKey,
) -> None:
    key = edge_key(from_url, edge.to_url)
    old = indexes.forward.get(key) if stored else None
    if old is None:
        record = EdgeRecord(
            anchor_text=edge.anchor_text,
            context_window=edge.context_window,
            link_type=edge.link_type,
            position=edge.position,
            discovered_at=min(edge.discovered_at, fetched_at),
            last_seen_at=fetched_at,
            rel=list(edge.rel),
        )
        node.out_total += 1
        node.out_live += 1
        if current:
            node.fetch.refreshed += 1
    else:
        previous = EdgeRecord.decode(old)
        record = _merged(previous, edge, fetched_at, current)
        if current and previous.last_seen_at < fetched_at:
            node.fetch.refreshed += 1
        if previous.gone and not record.gone:
            node.out_live += 1
        if record == previous:
            return
    encoded = record.encode()
    indexes.put(indexes.forward, FORWARD, key, old, encoded)
    indexes.edges_upserted += 1
    rekey(edge.to_url, from_url, record, encoded)


def _merged(previous: EdgeRecord, edge: LinkEdge, fetched_at: int, current: bool) -> EdgeRecord:
    discovered_at = min(previous.discovered_at, edge.discovered_at, fetched_at)
    if not current or fetched_at < previous.last_seen_at:
        # A fetch older than the newest one known: it only widens the dates, never revives.
        last_seen_at = max(previous.last_seen_at, fetched_at)
        return EdgeRecord(
            **{**previous.__dict__, "discovered_at": discovered_at, "last_seen_at": last_seen_at}
        )
    return EdgeRecord(
        anchor_text=edge.anchor_text,
        context_window=edge.context_window,
        link_type=edge.link_type,
        position=edge.position,
        discovered_at=discovered_at,
        last_seen_at=fetched_at,
        rel=list(edge.rel),
        gone=False,
    )


def _sweep_gone(indexes: PartitionIndexes, node: NodeRecord, fetched_at: int, rekey: ReKey) -> None:
    stale = [
        (key, raw, EdgeRecord.decode(raw)) for key, raw in indexes.forward.scan(prefix_of(node.url))
    ]
    for key, raw, record in stale:
        if record.gone or record.last_seen_at >= fetched_at:
            continue
        record.gone = True
        node.out_live -= 1
        encoded = record.encode()
        indexes.put(indexes.forward, FORWARD, key, raw, encoded)
        indexes.edges_upserted += 1
        _, to_url = split_key(key)
        rekey(to_url, node.url, record, encoded)


def upsert_in_link(indexes: PartitionIndexes, in_link: InLink) -> None:
    """Apply one re-keyed edge to the reverse index, the target's anchors and its node.

    Anchor entries are keys only (``to TAB text TAB from``, see `records`): the previous reverse
    record says which entry to remove, so no count is read or rewritten; queries count them."""
    to_url, from_url = in_link.to_url, in_link.from_url
    node = indexes.node(to_url)
    key = edge_key(to_url, from_url)
    # A target with no in-link stored has no reverse entry: skip that read.
    old = indexes.reverse.get(key) if node.in_total > 0 else None
    previous = EdgeRecord.decode(old) if old is not None else None
    if previous is not None and previous.last_seen_at > in_link.last_seen_at:
        return  # a stale copy: the reverse index already reflects a newer fetch
    discovered_at = in_link.discovered_at
    if previous is not None and previous.discovered_at < discovered_at:
        discovered_at = previous.discovered_at
    text, gone = in_link.anchor_text, in_link.gone
    encoded = EdgeRecord(
        anchor_text=text,
        context_window=in_link.context_window,
        link_type=in_link.link_type,
        position=in_link.position,
        discovered_at=discovered_at,
        last_seen_at=in_link.last_seen_at,
        rel=in_link.rel,
        gone=gone,
    ).encode()
    if encoded == old:
        return
    was_live = previous is not None and not previous.gone
    old_text = previous.anchor_text if was_live and previous is not None else ""
    new_text = "" if gone else text
    if old_text != new_text:
        if old_text:
            anchor = anchor_key(to_url, old_text, from_url)
            indexes.stats.changed(ANCHORS, b"", None, anchor)
            indexes.anchors.delete(anchor)
        if new_text:
            indexes.put(indexes.anchors, ANCHORS, anchor_key(to_url, new_text, from_url), None, b"")
    indexes.put(indexes.reverse, REVERSE, key, old, encoded)
    # The node changes last, after everything that can fail: it outlives a failed message.
    if previous is None:
        node.in_total += 1
    if was_live == gone:
        node.in_live += -1 if was_live else 1
    indexes.touched(node, in_link.discovered_at)


def in_link_value(to_url: str, from_url: str, encoded: bytes) -> bytes:
    """The `links.by-target` value: version and ends, then the encoded edge record's fields (one
    per edge, so no pydantic round trip; `tests/unit/linkgraph` checks it is a valid InLink)."""
    ends = orjson.dumps({"v": SCHEMA_VERSION, "from_url": from_url, "to_url": to_url})
    return ends[:-1] + b"," + encoded[1:]


@functools.lru_cache(maxsize=1 << 16)
def by_target_partition(to_url: str, partitions: int) -> int:
    """`links_by_target.partition`, through librdkafka's murmur2 (`linkgraph.murmur`)."""
    return partition_of_key(to_url.encode(), partitions)
