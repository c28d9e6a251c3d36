"""Upserting in-links: `links.by-target` records to the reverse index, anchors and target nodes.

The handler gives each run of consecutive in-links of a batch to `upsert_in_links` (a cycle of
the reverse pass is one run). Per in-link, in arrival order:

- A target with no in-link stored has no reverse entry, so its record is not read, nor is it
  for a target of the running epoch whose filter rules the edge out (`nodecache`); otherwise the
  stored reverse record (or the run's own write of it) is. An in-link older than the stored one
  (``last_seen_at``) is a stale copy and changes nothing; one that encodes to the stored bytes (a
  replay) neither.
- The reverse record keeps the earliest ``discovered_at``; the rest follows the in-link. It is
  the in-link's value as received from its first edge field on (`wire.ReceivedInLink.record`)
  when the value has the handler's own layout and that discovery is the earliest; otherwise it is
  encoded (`reverse_value`).
- Anchor entries are keys only (``to TAB text TAB from``, see `records`): the previous reverse
  record says which entry to remove, so no count is read or rewritten; queries count them.
- The target's node counts its in-links (live and stored) and its first sighting; it is changed
  last, after everything that can fail, and written at the cycle's tick (`nodecache`).

An in-link that fails (corrupt stored state, or a bug) is dead-lettered by the kernel with nothing
of it written. The run's reverse writes (with their sources) and anchor writes (derived: no
sources) are collected and put into the cycle's transaction at the end of the run (`_RunWrites`).
The common case, a new in-link to a target the partition has never had, makes no read and encodes
nothing, and such in-links are applied together, a list at a time (`_to_new_targets`): the rules
above reduce to counting them per target, and `tests/unit/linkgraph/test_new_targets.py` checks
that the state, the sources and the dead letters are those of applying them one by one. That is
7 % less of the reverse pass's handler CPU on the link-graph benchmark (in-process A/B against
the one-by-one loop)."""

from __future__ import annotations

import logging

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
    anchor_key,
)
from linkgraph.wire import ReceivedInLink
from streamcrawl.batch import Batch
from streamcrawl.handler import Record
from streamcrawl.state import Transaction

log = logging.getLogger(__name__)


class _RunWrites:
    """One table's writes of a run with their sources and size changes: first the entries it
    creates (`created`, keys none stored before: a new in-link's), then the others in order.
    A key's creation comes before its every other write in a run (a later in-link of the same
    edge reads the created record back), so that order leaves each key as in-order writes do.

    A derived table's writes (`sourced` False: the anchors, `LinkGraphHandler.derived_tables`)
    have no changelog records, so no sources: none are collected, and none go into the
    transaction (200,000 a pass on the link-graph benchmark)."""

    __slots__ = (
        "created",
        "created_sources",
        "created_values",
        "entries",
        "keys",
        "size",
        "sourced",
        "sources",
        "values",
        "written",
    )

    def __init__(self, *, sourced: bool) -> None:
        self.sourced = sourced
        self.created: list[bytes] = []
        self.created_values: list[bytes] = []
        self.created_sources: list[str] = []
        """Key, value and source of each entry created, appended by `upsert_in_links` itself
        (three lists rather than a tuple each: no object for the collector per in-link); no
        values at all: every value is empty (anchor entries); no sources: not `sourced`."""
        self.keys: list[bytes] = []
        self.values: list[bytes | None] = []
        self.sources: list[str] = []
        self.entries = 0
        self.size = 0
        self.written: dict[bytes, bytes] = {}
        """The run's records by key, for its own reads."""

    def add(self, key: bytes, value: bytes | None, source: str, entries: int, size: int) -> None:
        """A write of the run (None: a delete), changing the table's entries and bytes by these;
        kept for the run's later in-links to read back."""
        self.keys.append(key)
        self.values.append(value)
        if self.sourced:
            self.sources.append(source)
        self.entries += entries
        self.size += size
        if value is not None:
            self.written[key] = value

    def write(self, transaction: Transaction, table: str, stats: PartitionStats) -> list[bytes]:
        """Put the run's writes into the cycle's transaction, their size changes into `stats`;
        returns the keys written."""
        written: list[bytes] = []
        if self.created:
            keys, values = self.created, self.created_values or [b""] * len(self.created)
            transaction.put_many(table, keys, values, self._sources(self.created_sources))
            stats.entries[table] += len(keys)
            stats.size[table] += sum(map(len, keys)) + sum(map(len, values))
            written = list(keys)
        if self.keys:
            transaction.put_many(table, self.keys, self.values, self._sources(self.sources))
            stats.entries[table] += self.entries
            stats.size[table] += self.size
            written.extend(self.keys)
        return written

    def _sources(self, sources: list[str]) -> list[str] | None:
        return sources if self.sourced else None


def upsert_in_links(indexes: PartitionIndexes, batch: Batch, records: list[Record]) -> None:
    """Apply a run of in-links of `batch` (see the module docstring): those to new targets
    together (`_to_new_targets`), the others one by one (`_one_by_one`)."""
    reverse, anchors = _RunWrites(sourced=True), _RunWrites(sourced=False)
    try:
        others = _to_new_targets(indexes, records, reverse, anchors)
    except UnicodeError:  # a URL with no UTF-8 form: its in-link fails on its own, one by one
        others = records
    except Exception:  # a bug: logged, and one by one, where each failure is routed
        log.exception("in-links to new targets could not be applied together")
        others = records
    if others:
        _one_by_one(indexes, batch, others, reverse, anchors)
    _write_run(indexes, reverse, anchors)


def _to_new_targets(
    indexes: PartitionIndexes, records: list[Record], reverse: _RunWrites, anchors: _RunWrites
) -> list[Record]:
    """Apply the run's in-links to targets the partition has never had (`_new_targets`) together,
    and return the others in order. Such in-links need no read, as in `_uncached_node`, and none
    of them can fail. A target with an in-link whose value has another layout (no record as
    received), or with an edge twice in the run, goes one by one. Nothing of the run is written
    before everything is computed, so an error on the way leaves the run to `_one_by_one`, where
    a failure is the in-link's own."""
    new = _new_targets(indexes, records)
    fresh = [record for record in records if record.value.to_url in new]
    keys = [f"{r.value.to_url}{SEPARATOR}{r.value.from_url}".encode() for r in fresh]  # edge_key
    unfit = {record.value.to_url for record in fresh if record.value.record is None}
    if len(set(keys)) != len(keys):
        seen: set[bytes] = set()
        for key, record in zip(keys, fresh, strict=True):
            if key in seen:
                unfit.add(record.value.to_url)
            seen.add(key)
    if unfit:
        new -= unfit
        kept = [index for index, record in enumerate(fresh) if record.value.to_url in new]
        fresh, keys = [fresh[index] for index in kept], [keys[index] for index in kept]
    if not fresh:
        return records
    links: list[ReceivedInLink] = [record.value for record in fresh]
    sources = [f"{r.topic}:{r.partition}:{r.offset}" for r in fresh]  # Batch.source
    made: dict[str, NewTarget] = {}
    epoch = indexes.cache.epoch
    for link, source in zip(links, sources, strict=True):
        target = made.get(link.to_url)
        if target is None:  # its first in-link: every other one comes after it
            target = made[link.to_url] = NewTarget(link.to_url, link.discovered_at, epoch)
        elif link.discovered_at < target.first_seen_at:
            target.first_seen_at = link.discovered_at
        target.in_total += 1
        target.in_live += 0 if link.gone else 1
        target.source = source
    anchor_keys = [
        f"{link.to_url}{SEPARATOR}{link.anchor_text}{SEPARATOR}{link.from_url}".encode()
        for link in links
        if link.anchor_text and not link.gone
    ]  # anchor_key, the entries' values empty
    # Nothing can fail from here on.
    reverse.created.extend(keys)
    reverse.created_values.extend([link.record for link in links])  # type: ignore[misc]
    reverse.created_sources.extend(sources)
    anchors.created.extend(anchor_keys)
    indexes.cache.targets_changed.extend(made.values())
    indexes.cache.targets.update(made)
    return [record for record in records if record.value.to_url not in new]


def _new_targets(indexes: PartitionIndexes, records: list[Record]) -> set[str]:
    """The run's targets the partition has never had: neither cached nor kept, and the cache's
    filter rules a stored node out (one numpy call for them all, `KeyFilter.might_contain_many`)."""
    cache = indexes.cache
    urls = {record.value.to_url for record in records}
    # A set less a dict looks each URL up in C with the hash the set holds.
    candidates = list(urls.difference(cache.entries).difference(cache.targets))
    stored = cache.stored.might_contain_many([url.encode() for url in candidates])
    return {url for url, maybe in zip(candidates, stored, strict=True) if not maybe}


def _one_by_one(
    indexes: PartitionIndexes,
    batch: Batch,
    records: list[Record],
    reverse: _RunWrites,
    anchors: _RunWrites,
) -> None:
    """Apply in-links in order, each on its own: a new in-link inline, one whose edge has a
    reverse record already through `_seen_again`."""
    transaction, cache = indexes.transaction, indexes.cache
    entries, targets, targets_changed = cache.entries, cache.targets, cache.targets_changed
    epoch, might_hold = cache.epoch, cache.in_links.might_contain  # see `nodecache`
    written, created, created_values, created_sources, anchors_created = (
        reverse.written,
        reverse.created,
        reverse.created_values,
        reverse.created_sources,
        anchors.created,
    )
    for record in records:
        in_link: ReceivedInLink = record.value
        source = f"{record.topic}:{record.partition}:{record.offset}"  # Batch.source
        try:
            to_url, from_url = in_link.to_url, in_link.from_url
            key = f"{to_url}{SEPARATOR}{from_url}".encode()  # edge_key
            cached = entries.get(to_url)
            target = None if cached is not None else targets.get(to_url)
            node, cached, target = (
                (cached.node, cached, None)
                if cached is not None
                else (target, None, target)
                if target is not None
                else _uncached_node(indexes, to_url, in_link.discovered_at)
            )
            if target is not None and target.source is None and target.written_size:
                target.changing()  # a kept target, before this cycle's first change
            # A target with no in-link stored has no reverse record, nor has a target of this
            # epoch one its filter rules out (see `nodecache`): no read.
            old = (
                written.get(key) or transaction.get(REVERSE, key)
                if node.in_total and (node.in_epoch != epoch or key in written or might_hold(key))
                else None
            )
            if old is not None:
                if not _seen_again(in_link, key, old, node, reverse, anchors, source):
                    continue
            else:
                encoded = in_link.record or reverse_value(in_link, in_link.discovered_at)
        except CorruptRecordError as error:
            batch.reject(record, f"corrupt state: {error}")
            continue
        except Exception as error:  # a bug must not stop the loop: routed by the kernel
            batch.failed(record, error)
            continue
        # Nothing can fail from here on: a new in-link's writes, then its target's node.
        if old is None:
            if in_link.anchor_text and not in_link.gone:
                anchor = f"{to_url}{SEPARATOR}{in_link.anchor_text}{SEPARATOR}{from_url}"
                anchors_created.append(anchor.encode())  # anchor_key, its value empty
            created.append(key)
            created_values.append(encoded)
            created_sources.append(source)
            written[key] = encoded
            if not node.in_total:
                node.in_epoch = epoch  # its first in-link: every other one comes after it
            node.in_total += 1
            node.in_live += 0 if in_link.gone else 1
        if node.first_seen_at < 0 or in_link.discovered_at < node.first_seen_at:
            node.first_seen_at = in_link.discovered_at
        if target is not None:
            if target.source is None:  # its first change this cycle (see `nodecache`)
                targets_changed.append(target)
                targets[to_url] = target
            target.source = source
        elif cached is not None:
            cache.changed(cached, source)


def _write_run(indexes: PartitionIndexes, reverse: _RunWrites, anchors: _RunWrites) -> None:
    """A run's writes into the cycle's transaction; its reverse records into the epoch's filter."""
    indexes.cache.in_links_written(reverse.write(indexes.transaction, REVERSE, indexes.stats))
    anchors.write(indexes.transaction, ANCHORS, indexes.stats)


def _seen_again(
    in_link: ReceivedInLink,
    key: bytes,
    old: bytes,
    node: NodeRecord | NewTarget,
    reverse: _RunWrites,
    anchors: _RunWrites,
    source: str,
) -> bool:
    """An in-link whose edge has reverse record `old`: merged into it (the earliest discovery,
    the rest the in-link's), its anchor entry moved and its target's live count changed; False
    when it changes nothing (a stale copy or a replay)."""
    previous = EdgeRecord.decode(old)
    if previous.last_seen_at > in_link.last_seen_at:
        return False  # a stale copy: the reverse index already reflects a newer fetch
    gone = in_link.gone
    if in_link.record is not None and in_link.discovered_at <= previous.discovered_at:
        encoded = in_link.record
    else:
        encoded = reverse_value(in_link, min(in_link.discovered_at, previous.discovered_at))
    if encoded == old:
        return False
    # Nothing can fail from here on.
    old_text = "" if previous.gone else previous.anchor_text
    new_text = "" if gone else in_link.anchor_text
    if old_text != new_text:
        to_url, from_url = in_link.to_url, in_link.from_url
        if old_text:
            removed = anchor_key(to_url, old_text, from_url)
            anchors.add(removed, None, source, -1, -len(removed))
        if new_text:
            added = anchor_key(to_url, new_text, from_url)
            anchors.add(added, b"", source, 1, len(added))
    reverse.add(key, encoded, source, 0, len(encoded) - len(old))
    if previous.gone != gone:  # gone -> live or live -> gone
        node.in_live += 1 if previous.gone else -1
    return True


def reverse_value(in_link: ReceivedInLink, discovered_at: int) -> bytes:
    """The reverse record of `in_link`'s edge (`EdgeRecord`'s fields in order), discovered at
    `discovered_at` (the earliest sighting: the in-link's, or the stored record's)."""
    return orjson.dumps(
        {
            "anchor_text": in_link.anchor_text,
            "context_window": in_link.context_window,
            "link_type": in_link.link_type,
            "position": in_link.position,
            "discovered_at": discovered_at,
            "last_seen_at": in_link.last_seen_at,
            "rel": in_link.rel,
            "gone": in_link.gone,
        }
    )


def _uncached_node(
    indexes: PartitionIndexes, url: str, discovered_at: int
) -> tuple[NodeRecord | NewTarget, CachedNode | None, NewTarget | None]:
    """A target's node when it is neither cached nor kept as counts: the stored node (decoded,
    cached from now on), or a new target first seen at `discovered_at` (no read when the cache's
    filter rules a stored one out)."""
    cache = indexes.cache
    key = url.encode()
    raw = indexes.transaction.get(NODES, key) if cache.stored.might_contain(key) else None
    if raw is not None:
        cached = CachedNode(NodeRecord.decode(raw), raw)
        cache.add(url, cached)
        return cached.node, cached, None
    target = NewTarget(url, discovered_at, cache.epoch)  # kept once changed
    return target, None, target
