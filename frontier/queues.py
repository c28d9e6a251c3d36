"""Per-host URL queues on disk, one per crawl, and the in-memory heap of hosts that decides who is
released next.

Queued URLs live only in RocksDB (the `queue` table of the partition's store), keyed so that key
order is release order within a host's queue of one crawl:

    host NUL crawl_id NUL priority-bytes sequence(8 bytes, big-endian)

`priority-bytes` come from `frontier.priority` (lower sorts first: BFS puts depth first), and the
sequence is the partition's arrival counter, so equal priorities leave in arrival order. A release
merges the heads of the host's crawls in the order of what follows the crawl id
(:func:`release_order`), which is the order one queue for all crawls would have, and passes over a
crawl that may not lease now with one seek, whatever it has queued (`frontier.release`). It reads
each crawl's queue from its floor, a key memory keeps below which the queue holds nothing
(`frontier.session.PartitionMemory.queue_floors`): a lease deletes the head, and the deleted keys
stay as tombstones until RocksDB compacts them, which a seek from the start of the queue would step
over again at every release (tests/bench/RESULTS.md, session 42). Should memory know no crawl of a
host, :func:`crawl_queues` finds them with a seek each. Memory holds one small entry per host with
queued work (its ready time, queued count and its crawls' floors) and a heap of those hosts ordered
by ready time: it grows with the number of hosts, never with the number of URLs (DESIGN section 3,
step 3).

Versions before this one kept one queue per host (``host NUL priority-bytes sequence``); such a
key is told apart by the byte after the host's NUL (a priority's first byte is below 0x20, a crawl
id's is printable) and moved to its crawl's queue when the partition is opened
(`frontier.upgrade`).
"""

from __future__ import annotations

import heapq
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from frontier.fields import ABSENT, pack_field, unpack_fields
from streamcrawl.state import Table

SEPARATOR = b"\x00"
SEQUENCE_BYTES = 8
_PRINTABLE = 0x20


def queue_key(host: str, crawl_id: str, priority: bytes, sequence: int) -> bytes:
    return crawl_queue_prefix(host, crawl_id) + priority + sequence.to_bytes(SEQUENCE_BYTES, "big")


def host_prefix(host: str) -> bytes:
    return host.encode() + SEPARATOR


def crawl_queue_prefix(host: str, crawl_id: str) -> bytes:
    """The keys of one crawl's queue on a host start with this."""
    return host.encode() + SEPARATOR + crawl_id.encode() + SEPARATOR


def host_of(key: bytes) -> str:
    return key.split(SEPARATOR, 1)[0].decode()


def crawl_of(key: bytes) -> str:
    return key.split(SEPARATOR, 2)[1].decode()


def queue_of(key: bytes) -> tuple[str, str] | None:
    """The host and crawl whose queue a key is in; None for an earlier version's key."""
    if is_legacy_key(key):
        return None
    host, crawl_id, _ = key.split(SEPARATOR, 2)
    return host.decode(), crawl_id.decode()


def release_order(key: bytes) -> bytes:
    """What orders a key among the keys of every crawl of its host: its priority and sequence."""
    return key.split(SEPARATOR, 2)[2]


def is_legacy_key(key: bytes) -> bool:
    """A key of the one queue per host of earlier versions (see the module docstring)."""
    host_end = key.index(SEPARATOR)
    return key[host_end + 1] < _PRINTABLE


def upgraded_key(key: bytes, crawl_id: str) -> bytes:
    """A key of either layout in this version's: a legacy key moves to its crawl's queue, keeping
    its priority and sequence."""
    if not is_legacy_key(key):
        return key
    host, order = key.split(SEPARATOR, 1)
    return host + SEPARATOR + crawl_id.encode() + SEPARATOR + order


def crawl_queues(table: Table, host: str) -> Iterator[tuple[str, Iterator[tuple[bytes, bytes]]]]:
    """The crawls with URLs queued on a host, in id order, each with its queue's entries from the
    head (read lazily): one seek per crawl, and one more to find no other."""
    prefix = host_prefix(host)
    start = prefix
    while True:
        entries = table.scan(prefix, start)
        head = next(entries, None)
        if head is None:
            return
        if is_legacy_key(head[0]):  # not moved yet: the partition is being opened
            return
        crawl_id = crawl_of(head[0])
        own = crawl_queue_prefix(host, crawl_id)
        yield crawl_id, _under(own, head, entries)
        start = own[:-1] + b"\x01"  # past every key of the crawl: NUL < 0x01 < its id's bytes


def _under(
    prefix: bytes, head: tuple[bytes, bytes], entries: Iterator[tuple[bytes, bytes]]
) -> Iterator[tuple[bytes, bytes]]:
    yield head
    for entry in entries:
        if not entry[0].startswith(prefix):
            return
        yield entry


def crawls_on_host(table: Table, host: str) -> Iterator[str]:
    """The crawls with URLs queued on a host, in id order: one seek per crawl."""
    return (crawl_id for crawl_id, _ in crawl_queues(table, host))


@dataclass(frozen=True)
class QueuedUrl:
    """One URL waiting in its host's queue (the value stored under its queue key)."""

    crawl_id: str
    url: str
    depth: int
    redirect_hops: int = 0
    attempts: int = 0
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None

    def encode(self) -> bytes:
        """The binary entry (see :data:`_ENTRY_HEAD`): one is written per queued URL, in the
        short form (:data:`_FRESH_HEAD`) when it has no attempts and no validators."""
        optional = (self.etag, self.last_modified, self.content_hash)
        if self.attempts == 0 and all(value is None for value in optional):
            fresh = new_entry_head(self.crawl_id, self.depth, self.redirect_hops)
            return encode_new_entries(fresh, [self.url])[0]
        strings = (self.crawl_id.encode(), self.url.encode())
        head = _ENTRY_HEAD.pack(_BINARY, self.depth, self.redirect_hops, self.attempts)
        fields = [*strings, *(None if value is None else value.encode() for value in optional)]
        return head + b"".join(_field(value) for value in fields)

    @classmethod
    def decode(cls, raw: bytes) -> QueuedUrl:
        if raw[:1] == _FRESH_BYTE:
            _, depth, redirect_hops, length = _FRESH_HEAD.unpack_from(raw)
            start = _FRESH_HEAD.size
            crawl = raw[start : start + length].decode()
            return cls(crawl, raw[start + length :].decode(), depth, redirect_hops)
        if raw[:1] != _BINARY_BYTE:
            return cls(**json.loads(raw))  # written as JSON by an earlier version
        _, depth, redirect_hops, attempts = _ENTRY_HEAD.unpack_from(raw)
        fields = unpack_fields(raw, _ENTRY_HEAD.size, 5)
        crawl_id, url, etag, last_modified, content_hash = (
            None if value is None else value.decode() for value in fields
        )
        if crawl_id is None or url is None:
            raise ValueError("a queue entry without crawl id or URL")
        return cls(crawl_id, url, depth, redirect_hops, attempts, etag, last_modified, content_hash)


_BINARY = 1
_BINARY_BYTE = bytes([_BINARY])
_ENTRY_HEAD = struct.Struct(">BIHH")
"""version 1, depth, redirect hops, attempts; then crawl_id, url, etag, last_modified and
content_hash, each a u16 length (0xFFFF: absent) and its UTF-8 bytes. A JSON entry (first byte
``{``) from an earlier version still decodes."""
_FRESH = 2
_FRESH_BYTE = bytes([_FRESH])
_FRESH_HEAD = struct.Struct(">BIHH")
"""The short form, version 2, of an entry without attempts or validators (every URL admission
queues): version, depth, redirect hops, the crawl id's length; the crawl id's UTF-8 bytes, then
the URL's to the end. 10 bytes less than version 1 for the same entry. Versions 1 and 2 and JSON
are read alike, whichever version wrote them."""


def _field(value: bytes | None) -> bytes:
    return pack_field(value, "queue entry")


def new_entry_head(crawl_id: str, depth: int, redirect_hops: int) -> bytes:
    """What the entries of URLs queued for the first time from one message start with:
    ``encode_new_entry(new_entry_head(c, d, h), url) == QueuedUrl(c, url, d, h).encode()``."""
    encoded = crawl_id.encode()
    if len(encoded) >= ABSENT:
        raise ValueError("a queue entry field is too long")
    return _FRESH_HEAD.pack(_FRESH, depth, redirect_hops, len(encoded)) + encoded


def encode_new_entry(head: bytes, url: str) -> bytes:
    """A first-time entry from its message's :func:`new_entry_head`, without a `QueuedUrl`."""
    return encode_new_entries(head, [url])[0]


def encode_new_entries(head: bytes, urls: list[str]) -> list[bytes]:
    """:func:`encode_new_entry` of each URL of a message, in one pass. A URL too long for version
    1's length field is refused, as the entry must be rewritable in it (a retry's attempts)."""
    encoded = [url.encode() for url in urls]
    if encoded and max(map(len, encoded)) >= ABSENT:
        raise ValueError("a queue entry field is too long")
    return [head + url for url in encoded]


def enqueue(table: Table, host: str, priority: bytes, sequence: int, entry: QueuedUrl) -> bytes:
    key = queue_key(host, entry.crawl_id, priority, sequence)
    table.put(key, entry.encode())
    return key


@dataclass
class QueueCensus:
    """What one pass over the queue table finds, to rebuild memory when a partition is opened:
    queued URLs per host, each crawl's head key per host (its floor, `PartitionMemory`), and the
    hosts with keys in an earlier version's layout."""

    queued: dict[str, int]
    floors: dict[str, dict[str, bytes]]
    legacy_hosts: set[str]

    @classmethod
    def of(cls, table: Table) -> QueueCensus:
        census = cls({}, {}, set())
        queued = census.queued
        for key, _ in table.scan():
            host = host_of(key)
            queued[host] = queued.get(host, 0) + 1
            queue = queue_of(key)
            if queue is None:
                census.legacy_hosts.add(host)
            else:
                census.floors.setdefault(host, {}).setdefault(queue[1], key)  # keys in order
        return census


class HostHeap:
    """Hosts with queued URLs, by the time they may next be released (epoch ms).

    Entries are replaced lazily: a host re-pushed with a new ready time leaves its old heap entry
    behind, which `pop_ready` skips because it no longer matches `ready_at`.

    ``held`` mirrors the holds (`frontier.records.HostState.held_until_ms`) of hosts with queued
    URLs that memory knows of: a held host is scheduled at its hold's end and a wake does not
    release it sooner (`PartitionMemory.wake`). The stored hold stays the rule; a release that
    finds one memory missed (after a restore) parks the host again.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, str]] = []
        self.ready_at: dict[str, int] = {}
        self.queued: dict[str, int] = {}
        self.held: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.ready_at)

    def add_queued(self, host: str, count: int, ready_at_ms: int) -> None:
        """Record `count` more URLs for a host; a new host becomes ready at `ready_at_ms`."""
        self.queued[host] = self.queued.get(host, 0) + count
        if host not in self.ready_at:
            self.schedule(host, ready_at_ms)

    def remove_queued(self, host: str, count: int = 1) -> None:
        left = self.queued.get(host, 0) - count
        if left > 0:
            self.queued[host] = left
        else:
            self.queued.pop(host, None)
            self.ready_at.pop(host, None)
            self.held.pop(host, None)

    def schedule(self, host: str, ready_at_ms: int) -> None:
        """Set when a host with queued URLs may be released next."""
        if self.queued.get(host, 0) <= 0:
            return
        self.ready_at[host] = ready_at_ms
        heapq.heappush(self._heap, (ready_at_ms, host))

    def hold(self, host: str, until_ms: int) -> None:
        """Park a host with queued URLs until ``until_ms``: wakes before then leave it parked."""
        if self.queued.get(host, 0) <= 0:
            return
        self.held[host] = until_ms
        self.schedule(host, until_ms)

    def held_until(self, host: str, now_ms: int) -> int | None:
        """The end of the host's hold, if it is held at ``now_ms``."""
        until = self.held.get(host)
        return until if until is not None and until > now_ms else None

    def due(self, now_ms: int) -> int:
        """How many hosts are ready to be released at ``now_ms`` (one pass over the hosts)."""
        return sum(1 for ready_at in self.ready_at.values() if ready_at <= now_ms)

    def next_ready_at(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_ready(self, now_ms: int) -> str | None:
        """The host whose ready time passed longest ago, removed from the heap until rescheduled."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, host = heapq.heappop(self._heap)
        del self.ready_at[host]
        self.held.pop(host, None)  # a held host is due at its hold's end: the hold is over
        return host

    def _drop_stale(self) -> None:
        while self._heap:
            ready_at, host = self._heap[0]
            if self.ready_at.get(host) == ready_at:
                return
            heapq.heappop(self._heap)
