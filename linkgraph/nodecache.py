"""Decoded node records of one state partition, kept across cycles; changed ones written per cycle.

A target gets in-links from many sources (a site's navigation and footer targets from every page
of it), and each in-link would otherwise read, decode, encode and write the whole node record. The
cache keeps the decoded node, and what the store holds for it, for the partition's lifetime: a node
changed during a cycle is encoded and written once, at the cycle's `on_tick` (`flush`), with the
source of the last message that changed it.

The cache may trust what it holds because the handler is the only writer of the nodes table and the
loop either writes a cycle's transaction after its `on_tick`, or closes the partition (a failed
commit: the handler then drops the cache with the partition), or stops. A record that fails while
being applied has its node put back (`snapshot` and `restore`). At most `MAX_NODES` nodes are
kept; beyond that the longest-cached unchanged ones are forgotten at `flush`.

Most targets are new (a page's content links point at pages nobody linked before): a target the
store has no node for is kept as a `NewTarget`, only the counts in-links change, and encoded at
`flush` from a template (`records.new_target_value`), with no `NodeRecord` made or serialised; it
becomes a full cached node only when something else needs it (`get`). Once written it is kept,
its counts being those its stored value was made of, so a later cycle's in-link to it (a site's
navigation, linked by every page) counts on without a read or a decode; a cycle that changes it
first takes those counts aside (`NewTarget.changing`). At most `MAX_TARGETS` are kept, those
changed longest ago forgotten first (a later in-link reads such a one back).

Whether the store has a node at all is asked of a Bloom filter of the nodes table's keys first
(`might_be_stored`, `linkgraph.keyfilter`): a new target is then known new without a RocksDB read,
which costs as much as the rest of its in-link. The filter is filled from the table when the
partition's cache is made (`load`) and with every node written since (`flush`); when it holds as
many keys as it was sized for, it is refilled from the table at twice the size, so it never
answers "absent" for a stored node (a false positive costs one read).

An in-link to a target that has some already needs the stored reverse record of its edge, if
any; most such edges are new (every page of a site links its navigation). The cache has a second
filter, of the reverse records written since its current epoch began, and a node remembers the
epoch in which it got its first in-link (`NodeRecord.in_epoch`). A node of the running epoch
has no reverse record older than the filter, so an edge the filter rules out is new without a
read; the nodes of any other epoch (older ones, or after a restart) are read as before. Epochs
are counted in the partition's stats record (`PartitionStats.epoch`): a cache begins the next
one, and so does a full filter at `flush`. No node of an epoch can be stored without the stats
record that counted it (both go into every cycle's WriteBatch and changelog, the stats record
with no source, so a restore always applies it), so an epoch is never begun twice.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import orjson

from linkgraph.hosts import host_and_domain, origin_of
from linkgraph.keyfilter import KeyFilter
from linkgraph.records import (
    NODES,
    STATS_KEY,
    NodeRecord,
    PartitionStats,
    new_target_value,
)
from streamcrawl.state import Transaction

MAX_NODES = 32_768
"""Nodes kept per state partition (about 1 KiB of Python objects each)."""
MAX_TARGETS = 131_072
"""Written targets kept as counts per state partition by default (`LinkGraphOptions.kept_targets`):
about 0.33 KiB each with a 70-character URL, 42 MiB at the bound. In a wide crawl a site's next
page, and its in-links to the site's navigation, comes after the targets of many other sites'
pages: on the link-graph benchmark (3,000 sites, 25 links a page) 75,000 targets apart. At
32,768, each such in-link read its target's node back and decoded it, and the reverse pass took
1.08 times the CPU (tests/bench/RESULTS.md, session 16)."""
STORED_EXPECTED = 1 << 18
"""Node keys a partition's filter holds at first (512 KiB, 2 bytes a key); it doubles as needed."""
IN_LINKS_EXPECTED = 1 << 20
"""Reverse records an epoch's filter holds (2 MiB); a new epoch begins when it is full."""


def new_node(url: str, first_seen_at: int) -> NodeRecord:
    host, domain = host_and_domain(origin_of(url))
    return NodeRecord.new(url, host, domain, first_seen_at)


@functools.lru_cache(maxsize=1 << 14)
def origin_fields(origin: str) -> bytes:
    """A node's host and domain as encoded JSON (`records.new_target_value`), per origin."""
    host, domain = host_and_domain(origin)
    return b"".join((orjson.dumps(host), b',"domain":', orjson.dumps(domain)))


@dataclass(slots=True)
class NewTarget:
    """A target changed by in-links only (see the module docstring); the fields up to `source`
    are those of its `NodeRecord`."""

    url: str
    first_seen_at: int
    in_epoch: int
    in_live: int = 0
    in_total: int = 0
    source: str | None = None
    """The last message that changed it this cycle (its changelog header); None: unchanged."""
    written_size: int = 0
    """The length of its stored value (in the store or the cycle's transaction); 0: none."""
    origin: bytes = b""
    """Its host and domain as encoded JSON (`origin_fields`), set when it is first written: a
    kept target written again (a site's navigation, every cycle) needs neither parsed again."""
    written: tuple[int, int, int, int] | None = None
    """The counts its stored value was made of (first seen at, in-links live, stored, epoch),
    taken before a cycle's first change (`changing`) and dropped once written; None: its counts
    as they are (a kept target holds no tuple: 72 bytes fewer)."""

    def changing(self) -> None:
        """A cycle is about to change this written target: remember what its value holds."""
        self.written = (self.first_seen_at, self.in_live, self.in_total, self.in_epoch)

    def stored(self) -> bytes | None:
        """Its value in the store (or the cycle's transaction), made again from its counts."""
        if not self.written_size:
            return None
        written = self.written or (self.first_seen_at, self.in_live, self.in_total, self.in_epoch)
        return new_target_value(self.url, self.origin, *written)


@dataclass(slots=True)
class CachedNode:
    node: NodeRecord
    stored: bytes | None
    """The node's value in the store (or the cycle's transaction); None when it has none."""
    source: str | None = None
    """The last message that changed it this cycle (its changelog header); None: unchanged."""


class NodeCache:
    def __init__(
        self,
        limit: int = MAX_NODES,
        epoch: int = 1,
        in_links_expected: int | None = None,
        targets_limit: int | None = None,
    ) -> None:
        self._limit = limit
        self._targets_limit = targets_limit or MAX_TARGETS
        self.stored = KeyFilter(STORED_EXPECTED)
        """The nodes table's keys (`might_be_stored`)."""
        self._in_links_capacity = in_links_expected or IN_LINKS_EXPECTED
        self._new_epoch(epoch)
        self.entries: dict[str, CachedNode] = {}
        self.targets: dict[str, NewTarget] = {}
        """Targets kept as counts, in the order they were first met."""
        self.targets_changed: list[NewTarget] = []
        """The targets this cycle changed (written at `flush`): an in-link that first sets a
        target's `source` appends it here and puts it into `targets` (a new one only then, so
        one whose in-link failed is never kept)."""
        self._changed: list[CachedNode] = []

    def load(self, stored: Iterator[tuple[bytes, bytes]]) -> None:
        """Know the keys of the partition's nodes table (`stored`: a scan of it) for
        `might_be_stored`; the cache's first call, or the filter answers "absent" for them."""
        keys = [key for key, _ in stored if key != STATS_KEY]
        capacity = self.stored.capacity
        while len(keys) * 2 > capacity:
            capacity *= 2
        if capacity != self.stored.capacity:
            self.stored = KeyFilter(capacity)
        self.stored.add_all(keys)

    def _new_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.in_links = KeyFilter(self._in_links_capacity)
        """The keys of the reverse records written in the running epoch (`in_links_written`)."""

    def in_links_written(self, keys: list[bytes]) -> None:
        """Reverse records written into the cycle's transaction (see the module docstring)."""
        self.in_links.add_all(keys)

    def might_be_stored(self, key: bytes) -> bool:
        """False when the nodes table certainly has no node under `key` (see `load`)."""
        return self.stored.might_contain(key)

    def get(self, url: str) -> CachedNode | None:
        """The cached node of `url`; a new target becomes a full node from here on."""
        cached = self.entries.get(url)
        if cached is None and url in self.targets:
            target = self.targets.pop(url)
            node = new_node(url, target.first_seen_at)
            node.in_live, node.in_total = target.in_live, target.in_total
            node.in_epoch = target.in_epoch
            cached = self.entries[url] = CachedNode(node, target.stored())
            if target.source is not None:
                self.targets_changed.remove(target)
                self.changed(cached, target.source)
        return cached

    def add(self, url: str, cached: CachedNode) -> None:
        self.entries[url] = cached

    def changed(self, cached: CachedNode, source: str | None) -> None:
        """Mark a node changed by the message `source` (written at the next `flush`)."""
        if cached.source is None:
            self._changed.append(cached)
        cached.source = source

    def snapshot(self, url: str) -> CachedNode | None:
        """A copy to put back if the message changing the node fails (see `restore`)."""
        cached = self.get(url)
        if cached is None:
            return None
        node = cached.node
        fetch = dataclasses.replace(node.fetch, parts_seen=list(node.fetch.parts_seen))
        copied = dataclasses.replace(node, crawl_ids=list(node.crawl_ids), fetch=fetch)
        return CachedNode(copied, cached.stored, cached.source)

    def restore(self, url: str, saved: CachedNode | None) -> None:
        """Put back what `snapshot` saved (None: the node was not cached before the message)."""
        failed = self.entries.pop(url, None)
        if failed is not None and failed.source is not None:
            self._changed.remove(failed)
        if saved is not None:
            self.entries[url] = saved
            if saved.source is not None:
                self._changed.append(saved)

    def flush(self, transaction: Transaction, stats: PartitionStats) -> None:
        """Write the cycle's changed nodes into its transaction, each once, with the source of the
        last message that changed it (as if every message had written it)."""
        stored: list[bytes] = []
        """The keys of the nodes stored for the first time."""
        for cached in self._changed:
            source, cached.source = cached.source, None
            encoded = cached.node.encode()
            if encoded != cached.stored:
                key = cached.node.url.encode()
                if cached.stored is None:
                    stored.append(key)
                stats.changed(NODES, cached.stored, encoded, key)
                transaction.put(NODES, key, encoded, source)
                cached.stored = encoded
        self._changed = []
        stored.extend(self._write_targets(transaction, stats))
        self.stored.add_all(stored)
        if self.in_links.full:
            stats.epoch += 1
            self._new_epoch(stats.epoch)
        if self.stored.full:
            self.stored = KeyFilter(self.stored.capacity * 2)
            self.load(transaction.scan(NODES))
        if len(self.entries) > self._limit:
            entries = self.entries
            for url in list(entries)[: len(entries) - self._limit * 3 // 4]:
                del entries[url]

    def _write_targets(self, transaction: Transaction, stats: PartitionStats) -> list[bytes]:
        """Write the cycle's changed targets (one `put_many`, each with its last source); returns
        the keys of those stored for the first time. Keeps at most `MAX_TARGETS`: the changed
        ones move to the end of `targets`, and the front (changed longest ago) is forgotten."""
        keys: list[bytes] = []
        values: list[bytes] = []
        sources: list[str] = []
        first: list[bytes] = []
        size = 0
        targets = self.targets
        for target in self.targets_changed:
            source, target.source = target.source, None
            url, written_size = target.url, target.written_size
            counts = (target.first_seen_at, target.in_live, target.in_total, target.in_epoch)
            if written_size:  # kept: to the end of `targets` (a new one went in there already)
                del targets[url]
                targets[url] = target
                written, target.written = target.written, None
                if counts == written or source is None:  # unchanged (its changes undone)
                    continue
                value = new_target_value(url, target.origin, *counts)
                key = url.encode()
                size += len(value) - written_size
            else:
                if source is None:
                    continue
                target.origin = origin_fields(origin_of(url))
                value = new_target_value(url, target.origin, *counts)
                key = url.encode()
                first.append(key)
                size += len(key) + len(value)
            target.written_size = len(value)
            keys.append(key)
            values.append(value)
            sources.append(source)
        self.targets_changed = []
        if keys:
            transaction.put_many(NODES, keys, values, sources)
            stats.entries[NODES] += len(first)
            stats.size[NODES] += size
        if len(targets) > self._targets_limit:
            for url in list(targets)[: len(targets) - self._targets_limit * 3 // 4]:
                del targets[url]
        return first

    def __len__(self) -> int:
        return len(self.entries) + len(self.targets)
