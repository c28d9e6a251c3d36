"""Upserting in-links: `links.by-target` records to the reverse index, anchors and target nodes.

The handler gives each run of consecutive in-links of a batch to `upsert_in_links` (a cycle of
the reverse pass is one run). Per in-link, in arrival order:

- A target with no in-link stored has no reverse entry, so its record is not read; otherwise the
  stored reverse record (or the run's own write of it) is. An in-link older than the stored one
  (``last_seen_at``) is a stale copy and changes nothing; one that encodes to the stored bytes (a
  replay) neither.
- The reverse record keeps the earliest ``discovered_at``; the rest follows the in-link.
- Anchor entries are keys only (``to TAB text TAB from``, see `records`): the previous reverse
  record says which entry to remove, so no count is read or rewritten; queries count them.
- The target's node counts its in-links (live and stored) and its first sighting; it is changed
  last, after everything that can fail, and written at the cycle's tick (`nodecache`).

An in-link that fails (corrupt stored state, or a bug) is dead-lettered by the kernel with nothing
of it written. The run's reverse and anchor writes are collected with their sources and put into
the cycle's transaction at the end of the run in one `Transaction.put_many` per table: the common
case (a new in-link to a new target) makes no call per in-link beyond encoding its record.
"""

from __future__ import annotations

import orjson

from linkgraph.exceptions import CorruptRecordError
from linkgraph.indexes import PartitionIndexes
from linkgraph.nodecache import CachedNode, NewTarget
from linkgraph.records import (
    ANCHORS,
    NODES,
    REVERSE,
    SEPARATOR,
    EdgeRecord,
    NodeRecord,
    PartitionStats,
)
from streamcrawl.batch import Batch
from streamcrawl.handler import Record
from streamcrawl.state import Transaction


class _RunWrites:
    """One table's writes of a run, in order, with their sources and size changes."""

    __slots__ = ("entries", "keys", "size", "sources", "values", "written")

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.values: list[bytes | None] = []
        self.sources: list[str] = []
        self.entries = 0
        self.size = 0
        self.written: dict[bytes, bytes] = {}
        """The run's records by key, for its own reads (reverse records only, see `add`)."""

    def add(self, key: bytes, value: bytes, source: str) -> None:
        """A record the run's later in-links read back (`_previous`)."""
        self.keys.append(key)
        self.values.append(value)
        self.sources.append(source)
        self.written[key] = value

    def write(self, transaction: Transaction, table: str, stats: PartitionStats) -> None:
        """Put the run's writes into the cycle's transaction, their size changes into `stats`."""
        if self.keys:
            transaction.put_many(table, self.keys, self.values, self.sources)
            stats.entries[table] += self.entries
            stats.size[table] += self.size


def upsert_in_links(indexes: PartitionIndexes, batch: Batch, records: list[Record]) -> None:
    """Apply a run of in-links of `batch` (see the module docstring)."""
    transaction, cache, stats = indexes.transaction, indexes.cache, indexes.stats
    entries = cache.entries
    reverse, anchors = _RunWrites(), _RunWrites()
    epoch, might_hold = cache.epoch, cache.in_links.might_contain  # see `nodecache`
    for record in records:
        in_link = record.value
        source = f"{record.topic}:{record.partition}:{record.offset}"  # Batch.source
        try:
            to_url = in_link.to_url
            key = f"{to_url}{SEPARATOR}{in_link.from_url}".encode()  # edge_key
            cached = entries.get(to_url)
            node: NodeRecord | NewTarget
            target: NewTarget | None = None
            if cached is not None:
                node = cached.node
            else:
                node, cached, target = _uncached_node(indexes, to_url, in_link.discovered_at)
            # A target with no in-link stored has no reverse record, nor has a target of this
            # epoch one its filter rules out (see `nodecache`): no read.
            old, previous = _NONE
            if node.in_total and (
                node.in_epoch != epoch or key in reverse.written or might_hold(key)
            ):
                old, previous = _previous(transaction, reverse, key)
            discovered_at, old_text = in_link.discovered_at, ""
            if previous is not None:
                if previous.last_seen_at > in_link.last_seen_at:
                    continue  # a stale copy: the reverse index already reflects a newer fetch
                discovered_at = min(discovered_at, previous.discovered_at)
                old_text = "" if previous.gone else previous.anchor_text
            text, gone = in_link.anchor_text, in_link.gone
            encoded = orjson.dumps(
                {
                    "anchor_text": text,
                    "context_window": in_link.context_window,
                    "link_type": in_link.link_type,
                    "position": in_link.position,
                    "discovered_at": discovered_at,
                    "last_seen_at": in_link.last_seen_at,
                    "rel": in_link.rel,
                    "gone": gone,
                }
            )
        except CorruptRecordError as error:
            batch.reject(record, f"corrupt state: {error}")
            continue
        except Exception as error:  # a bug must not stop the loop: routed by the kernel
            batch.failed(record, error)
            continue
        if encoded == old:
            continue
        # Nothing can fail from here on: the in-link's writes, then its target's node.
        new_text = "" if gone else text
        if old_text != new_text:
            _anchor_change(anchors, to_url, in_link.from_url, old_text, new_text, source)
        reverse.add(key, encoded, source)
        _count(node, reverse, key, encoded, old, previous, gone, in_link.discovered_at, epoch)
        if target is not None:
            target.source = source
        elif cached is not None:
            cache.changed(cached, source)
    reverse.write(transaction, REVERSE, stats)
    cache.in_links_written(reverse.keys)
    anchors.write(transaction, ANCHORS, stats)


_NONE: tuple[None, None] = (None, None)


def _count(
    node: NodeRecord | NewTarget,
    reverse: _RunWrites,
    key: bytes,
    encoded: bytes,
    old: bytes | None,
    previous: EdgeRecord | None,
    gone: bool,
    discovered_at: int,
    epoch: int,
) -> None:
    """An in-link written: its target's counts and first sighting, the reverse index's size."""
    if old is None or previous is None:  # a new in-link (the common case)
        reverse.entries += 1
        reverse.size += len(key) + len(encoded)
        if not node.in_total:
            node.in_epoch = epoch  # its first in-link: every other one comes after it
        node.in_total += 1
        if not gone:
            node.in_live += 1
    else:
        reverse.size += len(encoded) - len(old)
        if previous.gone != gone:  # gone -> live or live -> gone
            node.in_live += 1 if previous.gone else -1
    if node.first_seen_at < 0 or discovered_at < node.first_seen_at:
        node.first_seen_at = discovered_at


def _previous(
    transaction: Transaction, reverse: _RunWrites, key: bytes
) -> tuple[bytes | None, EdgeRecord | None]:
    """The reverse record of `key` as the run left it, encoded and decoded (None: none)."""
    old = reverse.written.get(key)
    if old is None:
        old = transaction.get(REVERSE, key)
    return old, None if old is None else EdgeRecord.decode(old)


def _anchor_change(
    anchors: _RunWrites, to_url: str, from_url: str, old_text: str, new_text: str, source: str
) -> None:
    """The anchor entry of an in-link whose indexed text goes from `old_text` to `new_text`
    ("": none) moves: removed, added, or both."""
    prefix, suffix = f"{to_url}{SEPARATOR}", f"{SEPARATOR}{from_url}"
    if old_text:
        removed = f"{prefix}{old_text}{suffix}".encode()  # anchor_key
        anchors.keys.append(removed)
        anchors.values.append(None)
        anchors.sources.append(source)
        anchors.entries -= 1
        anchors.size -= len(removed)
    if new_text:
        added = f"{prefix}{new_text}{suffix}".encode()  # anchor_key
        anchors.keys.append(added)
        anchors.values.append(b"")
        anchors.sources.append(source)
        anchors.entries += 1
        anchors.size += len(added)


def _uncached_node(
    indexes: PartitionIndexes, url: str, discovered_at: int
) -> tuple[NodeRecord | NewTarget, CachedNode | None, NewTarget | None]:
    """A target's node when it is not a cached one: this cycle's new target, the stored node
    (decoded, cached from now on), or a new target first seen at `discovered_at` (no read when
    the cache's filter rules a stored one out)."""
    cache = indexes.cache
    target = cache.targets.get(url)
    if target is None:
        key = url.encode()
        raw = indexes.transaction.get(NODES, key) if cache.stored.might_contain(key) else None
        if raw is not None:
            cached = CachedNode(NodeRecord.decode(raw), raw)
            cache.add(url, cached)
            return cached.node, cached, None
        target = cache.targets[url] = NewTarget(discovered_at, cache.epoch)
    return target, None, target
