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

import functools
from collections.abc import Callable

import orjson

from linkgraph.records import (
    ANCHORS,
    FORWARD,
    NODES,
    REVERSE,
    EdgeRecord,
    FetchAssembly,
    NodeRecord,
    PartitionStats,
    edge_key,
    prefix_of,
    split_key,
)
from schemas import links_by_target
from schemas.base import SCHEMA_VERSION
from schemas.canonical import host_key, registered_domain
from schemas.links import LinkEdge, PageLinks
from schemas.links_by_target import InLink
from streamcrawl.handler import Context
from streamcrawl.state import Table

ReKey = Callable[[str, str, EdgeRecord, bytes], None]
"""Produce one changed edge to `links.by-target`: to_url, from_url, record, encoded record."""


@functools.lru_cache(maxsize=1 << 14)
def host_and_domain(origin: str) -> tuple[str, str]:
    """Host key and registered domain of a URL's ``scheme://authority`` (cached: hosts repeat)."""
    host = host_key(origin + "/")
    return host, registered_domain(host) if host else ""


def origin_of(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0].split('?', 1)[0]}"


def new_node(url: str, first_seen_at: int) -> NodeRecord:
    host, domain = host_and_domain(origin_of(url))
    return NodeRecord(url=url, host=host, domain=domain, first_seen_at=first_seen_at)


class PartitionIndexes:
    """The four tables of one state partition; `stats` collects this message's size changes, which
    the handler adds to the partition's totals once the message succeeded."""

    def __init__(self, ctx: Context) -> None:
        self.forward = ctx.table(FORWARD)
        self.reverse = ctx.table(REVERSE)
        self.anchors = ctx.table(ANCHORS)
        self.nodes = ctx.table(NODES)
        self.stats = PartitionStats()
        self.edges_upserted = 0

    def put(self, table: Table, name: str, key: bytes, old: bytes | None, new: bytes) -> None:
        self.stats.changed(name, old, new, key)
        table.put(key, new)

    def node(self, url: str, first_seen_at: int) -> tuple[NodeRecord, bytes | None]:
        key = url.encode()
        raw = self.nodes.get(key)
        if raw is None:
            return new_node(url, first_seen_at), None
        node = NodeRecord.decode(raw)
        node.first_seen_at = min(node.first_seen_at, first_seen_at)
        return node, raw

    def save_node(self, node: NodeRecord, old: bytes | None) -> None:
        encoded = node.encode()
        if encoded != old:
            self.put(self.nodes, NODES, node.url.encode(), old, encoded)


def upsert_page_links(indexes: PartitionIndexes, links: PageLinks, rekey: ReKey) -> None:
    """Apply one part of one fetch's out-links (see the module docstring)."""
    fetched_at = links.fetched_at
    node, old_node = indexes.node(links.from_url, fetched_at)
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
    indexes.save_node(node, old_node)


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
    """Apply one re-keyed edge to the reverse index, the target's anchors and its node."""
    node, old_node = indexes.node(in_link.to_url, in_link.discovered_at)
    key = edge_key(in_link.to_url, in_link.from_url)
    # A target with no in-link stored has no reverse entry and no anchor: skip those reads.
    had_in_links = node.in_total > 0
    old = indexes.reverse.get(key) if had_in_links else None
    previous = EdgeRecord.decode(old) if old is not None else None
    if previous is not None and previous.last_seen_at > in_link.last_seen_at:
        return  # a stale copy: the reverse index already reflects a newer fetch
    record = EdgeRecord(
        anchor_text=in_link.anchor_text,
        context_window=in_link.context_window,
        link_type=in_link.link_type,
        position=in_link.position,
        discovered_at=in_link.discovered_at,
        last_seen_at=in_link.last_seen_at,
        rel=list(in_link.rel),
        gone=in_link.gone,
    )
    if previous is not None:
        record.discovered_at = min(record.discovered_at, previous.discovered_at)
        if record == previous:
            return
    was_live = previous is not None and not previous.gone
    if previous is None:
        node.in_total += 1
    if was_live != (not record.gone):
        node.in_live += -1 if was_live else 1
    if was_live and previous is not None and previous.anchor_text:
        _count_anchor(indexes, in_link.to_url, previous.anchor_text, -1, known=True)
    if not record.gone and record.anchor_text:
        _count_anchor(indexes, in_link.to_url, record.anchor_text, 1, known=had_in_links)
    indexes.put(indexes.reverse, REVERSE, key, old, record.encode())
    indexes.save_node(node, old_node)


def _count_anchor(
    indexes: PartitionIndexes, to_url: str, text: str, delta: int, known: bool
) -> None:
    key = edge_key(to_url, text)
    old = indexes.anchors.get(key) if known else None
    count = (int(old) if old is not None else 0) + delta
    if count <= 0:
        if old is not None:
            indexes.stats.changed(ANCHORS, old, None, key)
            indexes.anchors.delete(key)
        return
    encoded = str(count).encode()
    indexes.put(indexes.anchors, ANCHORS, key, old, encoded)


def in_link_value(to_url: str, from_url: str, encoded: bytes) -> bytes:
    """The `links.by-target` value: version and ends, then the encoded edge record's fields (one
    per edge, so no pydantic round trip; `tests/unit/linkgraph` checks it is a valid InLink)."""
    ends = orjson.dumps({"v": SCHEMA_VERSION, "from_url": from_url, "to_url": to_url})
    return ends[:-1] + b"," + encoded[1:]


@functools.lru_cache(maxsize=1 << 16)
def by_target_partition(to_url: str, partitions: int) -> int:
    return links_by_target.partition(to_url, partitions)
