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
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from linkgraph.records import NODES, NodeRecord, PartitionStats
from streamcrawl.state import Transaction

MAX_NODES = 32_768
"""Nodes kept per state partition (about 1 KiB of Python objects each)."""


@dataclass(slots=True)
class CachedNode:
    node: NodeRecord
    stored: bytes | None
    """The node's value in the store (or the cycle's transaction); None when it has none."""
    source: str | None = None
    """The last message that changed it this cycle (its changelog header); None: unchanged."""


class NodeCache:
    def __init__(self, limit: int = MAX_NODES) -> None:
        self._limit = limit
        self.entries: dict[str, CachedNode] = {}
        self._changed: list[CachedNode] = []

    def get(self, url: str) -> CachedNode | None:
        return self.entries.get(url)

    def add(self, url: str, cached: CachedNode) -> None:
        self.entries[url] = cached

    def changed(self, cached: CachedNode, source: str | None) -> None:
        """Mark a node changed by the message `source` (written at the next `flush`)."""
        if cached.source is None:
            self._changed.append(cached)
        cached.source = source

    def snapshot(self, url: str) -> CachedNode | None:
        """A copy to put back if the message changing the node fails (see `restore`)."""
        cached = self.entries.get(url)
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
        for cached in self._changed:
            source, cached.source = cached.source, None
            encoded = cached.node.encode()
            if encoded != cached.stored:
                key = cached.node.url.encode()
                stats.changed(NODES, cached.stored, encoded, key)
                transaction.put(NODES, key, encoded, source)
                cached.stored = encoded
        self._changed = []
        if len(self.entries) > self._limit:
            entries = self.entries
            for url in list(entries)[: len(entries) - self._limit * 3 // 4]:
                del entries[url]

    def __len__(self) -> int:
        return len(self.entries)
