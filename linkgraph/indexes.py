"""Upserting one partition's indexes: PageLinks to forward + nodes (in-links: `linkgraph.inlinks`).

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

Every forward change is produced to `links.by-target` (key to TAB from, partition by to_url;
value the version and the edge record, `in_link_value`).
The handler applies a cycle's messages as one batch, one `PartitionIndexes` per partition. A
source's first crawl (no forward edge stored, no target twice) takes a bulk path: its edges are
encoded in one pass and written with one `Transaction.put_many`.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from linkgraph.exceptions import CorruptRecordError
from linkgraph.murmur import partitions_of_keys
from linkgraph.nodecache import CachedNode, NodeCache, new_node
from linkgraph.records import (
    ANCHORS,
    FORWARD,
    NODES,
    REVERSE,
    SEPARATOR,
    EdgeRecord,
    FetchAssembly,
    NodeRecord,
    PartitionStats,
    anchor_key,
    prefix_of,
    split_key,
)
from schemas.base import SCHEMA_VERSION
from schemas.links import LinkEdge, PageLinks
from streamcrawl.batch import Rows
from streamcrawl.recovery import Derived
from streamcrawl.state import Transaction

IN_LINK_START = b'{"v":%d,' % SCHEMA_VERSION
"""The start of every `links.by-target` value: the version, then the edge record's fields."""


class PartitionIndexes:
    """The tables of one state partition for the messages of one batch, applied one after another
    (see the handler). A message's forward writes and re-keyed edges are held here until it
    succeeded; `commit` then puts them into the cycle's transaction with the message as their
    source, and their size changes into the partition's, so a message that fails leaves no write
    behind. Nodes go through the partition's `NodeCache` instead of the nodes table: a target
    gets many in-links per cycle and each would read, decode, encode and write the whole node
    record. The re-keyed edges of the batch's committed messages are its `rows`, their
    partitions computed together at the end (`murmur.partitions_of_keys`)."""

    def __init__(
        self,
        transaction: Transaction,
        nodes: NodeCache,
        stats: PartitionStats,
        partitions: int,
        in_link_ends: bool = False,
    ) -> None:
        self.transaction = transaction
        self.in_link_ends = in_link_ends
        """The re-keyed values carry the edge's ends too (`in_link_value_with_ends`)."""
        self.stats = stats
        self.cache = nodes
        self.partitions = partitions
        self._cached: CachedNode | None = None
        self.source: str | None = None
        self.writes: list[tuple[str, bytes, bytes | None, bytes | None]] = []
        """This message's writes: table, key, stored value (None: none), value (None: delete)."""
        self.new_keys: list[bytes] = []
        self.new_values: list[bytes] = []
        """This message's new forward edges (a first crawl's bulk path), none stored before."""
        self.forward_writes: dict[bytes, bytes] = {}
        """This message's forward writes by key, for its own reads (a target twice, the sweep)."""
        self.rekeyed_keys: list[str] = []
        self.rekeyed_values: list[bytes] = []
        self.rekeyed_targets: list[bytes] = []
        """This message's changed edges for `links.by-target`: keys, in-link values, targets."""
        self._rows: tuple[list[str], list[bytes], list[bytes]] = ([], [], [])
        """The same of the batch's committed messages (see `rows`)."""
        self.upserted = 0
        """Forward edges created or changed by the messages committed so far."""

    def begin(self, source: str | None) -> None:
        """Start the next message: its writes and changes are collected afresh."""
        self.source = source
        if self.writes:
            self.writes = []
        if self.new_keys:
            self.new_keys = []
            self.new_values = []
        if self.forward_writes:
            self.forward_writes = {}
        if self.rekeyed_keys:
            self.rekeyed_keys, self.rekeyed_values, self.rekeyed_targets = [], [], []

    def commit(self) -> None:
        """Put the message's writes into the cycle's transaction, with the message as source, its
        re-keyed edges into the batch's rows, and its size changes into the partition's."""
        transaction, source = self.transaction, self.source
        entries, size = self.stats.entries, self.stats.size
        if self.new_keys:
            keys, values = self.new_keys, self.new_values
            transaction.put_many(FORWARD, keys, values, source)
            entries[FORWARD] += len(keys)
            size[FORWARD] += sum(map(len, keys)) + sum(map(len, values))
        for table, key, old, value in self.writes:
            if value is None:
                transaction.delete(table, key, source)
            else:
                transaction.put(table, key, value, source)
            if old is None:
                if value is not None:
                    entries[table] += 1
                    size[table] += len(key) + len(value)
            elif value is None:
                entries[table] -= 1
                size[table] -= len(key) + len(old)
            else:
                size[table] += len(value) - len(old)
        if self.rekeyed_keys:
            self.keep_rekeyed()

    def keep_rekeyed(self) -> None:
        """The message's re-keyed edges join the batch's `rows` (it succeeded)."""
        keys, values, targets = self._rows
        keys.extend(self.rekeyed_keys)
        values.extend(self.rekeyed_values)
        targets.extend(self.rekeyed_targets)
        self.upserted += len(self.rekeyed_keys)

    def rekey(self, to_url: str, from_url: str, value: bytes) -> None:
        """Queue a changed edge for `links.by-target` (sent once the message succeeded)."""
        self.rekeyed_keys.append(f"{to_url}\t{from_url}")
        self.rekeyed_values.append(value)
        self.rekeyed_targets.append(to_url.encode())

    def rows(self) -> Rows:
        """The committed messages' re-keyed edges for `links.by-target`: key, in-link value and
        the target's partition (`links_by_target.partition`, for all of them at once)."""
        keys, values, targets = self._rows
        if self.in_link_ends:
            values = [in_link_value_with_ends(k, v) for k, v in zip(keys, values, strict=True)]
        return Rows(keys, values, partitions_of_keys(targets, self.partitions))

    def get(self, table: str, key: bytes) -> bytes | None:
        """A stored value as the cycle's earlier messages left it (not this message's writes)."""
        return self.transaction.get(table, key)

    def get_forward(self, key: bytes) -> bytes | None:
        written = self.forward_writes.get(key)
        return written if written is not None else self.transaction.get(FORWARD, key)

    def scan_forward(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The stored forward entries under `prefix`, as this message changed them so far."""
        written = self.forward_writes
        for key, raw in self.transaction.scan(FORWARD, prefix):
            yield key, written.get(key, raw)

    def put_forward(self, key: bytes, old: bytes | None, new: bytes) -> None:
        """A forward write of this message, held until it succeeded (`commit`)."""
        self.writes.append((FORWARD, key, old, new))
        self.forward_writes[key] = new

    def node(self, url: str) -> NodeRecord:
        """The node of `url` as this cycle left it (a new one when unknown); change it in place,
        then `touched` it, and only after everything that can fail (see the handler)."""
        cached = self.cache.get(url)
        if cached is None:
            key = url.encode()
            raw = self.transaction.get(NODES, key) if self.cache.might_be_stored(key) else None
            # A new node's first_seen_at is set by its first `touched`.
            node = NodeRecord.decode(raw) if raw is not None else new_node(url, -1)
            cached = CachedNode(node, raw)
            self.cache.add(url, cached)
        self._cached = cached
        return cached.node

    def touched(self, node: NodeRecord, first_seen_at: int) -> None:
        """`node` changed: the one the last `node` call returned, or another one cached."""
        if node.first_seen_at < 0 or first_seen_at < node.first_seen_at:
            node.first_seen_at = first_seen_at
        cached = self._cached
        if cached is None or cached.node is not node:
            cached = self.cache.get(node.url)
            assert cached is not None and cached.node is node, "touched a node not cached"
        self.cache.changed(cached, self.source)


def upsert_page_links(indexes: PartitionIndexes, links: PageLinks) -> None:
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
    prefix = f"{links.from_url}{SEPARATOR}"
    if not stored and _first_crawl(indexes, links, prefix):
        new_edges = len(links.edges)
    else:
        new_edges = _each_edge(indexes, links, node, stored, prefix, current)
    node.out_total += new_edges
    node.out_live += new_edges
    if current:
        node.fetch.refreshed += new_edges
    if current and links.part not in node.fetch.parts_seen:
        node.fetch.parts_seen.append(links.part)
        node.fetch.parts_seen.sort()
        if node.fetch.complete and node.out_live > node.fetch.refreshed:
            _sweep_gone(indexes, node, fetched_at)


def _first_crawl(indexes: PartitionIndexes, links: PageLinks, prefix: str) -> bool:
    """Every edge of a source with none stored, each target once: encoded straight from the
    message's fields, in one pass, for one bulk write. False (nothing done) when a target is
    listed twice: `_each_edge` then merges the duplicates."""
    fetched_at, from_url, edges = links.fetched_at, links.from_url, links.edges
    keys = [(prefix + edge.to_url).encode() for edge in edges]
    if len(set(keys)) != len(keys):
        return False
    values = [new_edge_value(edge, fetched_at) for edge in edges]
    # The re-keyed edges: key (to TAB from), value (`in_link_value`) and target, as `rekey`'s.
    indexes.rekeyed_keys.extend([f"{edge.to_url}\t{from_url}" for edge in edges])
    indexes.rekeyed_values.extend([value.replace(b"{", IN_LINK_START, 1) for value in values])
    indexes.rekeyed_targets.extend([edge.to_url.encode() for edge in edges])
    indexes.new_keys, indexes.new_values = keys, values
    return True


def _each_edge(
    indexes: PartitionIndexes,
    links: PageLinks,
    node: NodeRecord,
    stored: bool,
    prefix: str,
    current: bool,
) -> int:
    """Every edge one by one, merged with the stored one; returns how many edges are new."""
    fetched_at, from_url = links.fetched_at, links.from_url
    forward_writes, writes = indexes.forward_writes, indexes.writes
    new_edges = 0
    for edge in links.edges:
        to_url = edge.to_url
        key = (prefix + to_url).encode()
        # A first crawl reads only what this message wrote (a target listed twice).
        old = indexes.get_forward(key) if stored else forward_writes.get(key)
        if old is None:
            # A new edge (every edge of a first crawl): encoded straight from the message's fields.
            encoded = new_edge_value(edge, fetched_at)
            new_edges += 1
        else:
            changed = _seen_again(node, edge, old, fetched_at, current)
            if changed is None:
                continue
            encoded = changed
        writes.append((FORWARD, key, old, encoded))
        forward_writes[key] = encoded
        indexes.rekey(to_url, from_url, in_link_value(encoded))
    return new_edges


def new_edge_value(edge: LinkEdge, fetched_at: int) -> bytes:
    """A new edge's forward record, encoded straight from the message's fields."""
    discovered_at = edge.discovered_at
    return orjson.dumps(
        {
            "anchor_text": edge.anchor_text,
            "context_window": edge.context_window,
            "link_type": edge.link_type,
            "position": edge.position,
            "discovered_at": discovered_at if discovered_at < fetched_at else fetched_at,
            "last_seen_at": fetched_at,
            "rel": edge.rel,
            "gone": False,
        }
    )


def _seen_again(
    node: NodeRecord, edge: LinkEdge, old: bytes, fetched_at: int, current: bool
) -> bytes | None:
    """An edge stored before: its merged record encoded, None when the merge changes nothing."""
    previous = EdgeRecord.decode(old)
    record = _merged(previous, edge, fetched_at, current)
    if current and previous.last_seen_at < fetched_at:
        node.fetch.refreshed += 1
    if previous.gone and not record.gone:
        node.out_live += 1
    if record == previous:
        return None
    return record.encode()


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


def _sweep_gone(indexes: PartitionIndexes, node: NodeRecord, fetched_at: int) -> None:
    stored = indexes.scan_forward(prefix_of(node.url))
    stale = [(key, raw, EdgeRecord.decode(raw)) for key, raw in stored]
    for key, raw, record in stale:
        if record.gone or record.last_seen_at >= fetched_at:
            continue
        record.gone = True
        node.out_live -= 1
        encoded = record.encode()
        indexes.put_forward(key, raw, encoded)
        _, to_url = split_key(key)
        indexes.rekey(to_url, node.url, in_link_value(encoded))


def anchors_of_reverse(table: str, key: bytes, old: bytes | None, new: bytes | None) -> Derived:
    """The anchor writes a reverse record going from `old` to `new` implies: the anchors table is
    derived (`streamcrawl.batch.BatchHandler`), one entry per live reverse record with a text, so
    a restore rebuilds it from the reverse records instead of its own changelog records. The
    same rule as `inlinks.upsert_in_links`', which writes them while indexing."""
    if table != REVERSE:
        return []
    before, after = _live_text(old), _live_text(new)
    if before == after:
        return []
    to_url, from_url = split_key(key)
    writes: Derived = []
    if before:
        writes.append((ANCHORS, anchor_key(to_url, before, from_url), None))
    if after:
        writes.append((ANCHORS, anchor_key(to_url, after, from_url), b""))
    return writes


def _live_text(raw: bytes | None) -> str:
    """The anchor text a reverse record indexes ("" for none: absent, gone, no text, corrupt)."""
    if raw is None:
        return ""
    try:
        record = EdgeRecord.decode(raw)
    except CorruptRecordError:
        return ""  # indexing would have dead-lettered its in-link: it indexes no anchor
    return "" if record.gone else record.anchor_text


def in_link_value_with_ends(key: str, value: bytes) -> bytes:
    """An `in_link_value` as link graphs before it read it: the version, both ends (`key`'s),
    then the edge record's fields (`schemas.links_by_target.InLink`, the fields in `wire`'s
    `ENDS_LAYOUT` order)."""
    to_url, _, from_url = key.partition("\t")
    head = orjson.dumps({"v": SCHEMA_VERSION, "from_url": from_url, "to_url": to_url})
    return b"".join((head[:-1], b",", value[len(IN_LINK_START) :]))


def in_link_value(encoded: bytes) -> bytes:
    """The `links.by-target` value of an edge whose forward record is `encoded`: its version and
    that record's fields (the key holds its ends; no pydantic round trip, and the record is
    copied once; `tests/unit/linkgraph` checks it is a valid `InLinkValue`)."""
    return encoded.replace(b"{", IN_LINK_START, 1)
