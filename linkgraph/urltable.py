"""The ranker's URL table: every URL a dense integer id, in arrays instead of Python objects.

A dict of URL strings with an id each costs about 100 bytes a string (at Wikipedia's URL lengths),
50 a dict entry, 28 an int and 8 a list slot; at Wikipedia scale (seed 004: 60 million URLs)
that is 11 GB. Here, per URL:

- its UTF-8 bytes in one blob, and an 8-byte offset;
- its 128-bit MurmurHash3 (the project's dedup fingerprint, `schemas.canonical.url_fingerprint`),
  16 bytes, indexed by id;
- 2 to 4 slots of 4 bytes in an open-addressing table of ids (linear probing, kept at most half
  full), where a slot matches when its id's fingerprint is the URL's.

That is the URL's length plus 32 to 40 bytes. Two URLs would share an id only if their 128-bit
fingerprints were equal (about 1e-23 for 60 million URLs).

URLs are looked up a batch at a time (all the records the ranker's reader hands over), probing
the table with numpy; hashing and numbering new URLs are the only per-URL Python work.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

import mmh3
import numpy as np
import numpy.typing as npt

INITIAL_SLOTS = 1 << 12
MAX_LOAD = 0.5
EMPTY = -1

_digest = mmh3.mmh3_x64_128_digest


def fingerprints(urls: list[str]) -> npt.NDArray[np.uint64]:
    """The 128-bit MurmurHash3 of each URL's UTF-8 bytes as rows of two 64-bit halves."""
    joined = b"".join([_digest(url.encode("utf-8"), 0) for url in urls])
    return np.frombuffer(joined, dtype=np.uint64).reshape(len(urls), 2)


def _array_bytes(values: array[int]) -> int:
    return values.itemsize * len(values)


class UrlTable:
    """Written by one thread (the ranker's); `url` and `urls` may be called from any, since ids
    and offsets only ever grow."""

    def __init__(self) -> None:
        self._blob = bytearray()
        self._offsets = array("q", [0])
        self._fingerprints = array("Q")
        """Two halves per id."""
        self._slots = np.full(INITIAL_SLOTS, EMPTY, dtype=np.int32)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def url(self, node: int) -> str:
        return self._blob[self._offsets[node] : self._offsets[node + 1]].decode("utf-8")

    def urls(self, nodes: Iterable[int]) -> list[str]:
        blob, offsets = self._blob, self._offsets
        return [blob[offsets[n] : offsets[n + 1]].decode("utf-8") for n in nodes]

    def held_bytes(self) -> int:
        return (
            len(self._blob)
            + _array_bytes(self._offsets)
            + _array_bytes(self._fingerprints)
            + self._slots.nbytes
        )

    def find(self, urls: list[str]) -> npt.NDArray[np.int32]:
        """The id of each URL, EMPTY for those not in the table."""
        return self._probe(fingerprints(urls))

    def batch(self, urls: list[str]) -> UrlBatch:
        return UrlBatch(self, urls)

    def _append(self, url: str, fingerprint: bytes) -> int:
        """Number a URL; it is found once `_index` has placed it."""
        self._blob += url.encode("utf-8")
        self._offsets.append(len(self._blob))
        self._fingerprints.frombytes(fingerprint)
        return len(self._offsets) - 2

    def _fingerprints_by_id(self) -> npt.NDArray[np.uint64]:
        """A view: drop it before the table grows (a live view keeps the array from growing)."""
        return np.frombuffer(self._fingerprints, dtype=np.uint64).reshape(-1, 2)

    def _probe(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int32]:
        """Each fingerprint's id, EMPTY for those absent."""
        result = np.full(len(keys), EMPTY, dtype=np.int32)
        if not len(self):
            return result
        known = self._fingerprints_by_id()
        mask = self._slots.size - 1
        slots = (keys[:, 0] & np.uint64(mask)).astype(np.int64)
        pending = np.arange(len(keys))
        while pending.size:
            ids = self._slots[slots]
            empty = ids == EMPTY
            stored = known[np.where(empty, 0, ids)]
            hit = ~empty & (stored == keys[pending]).all(axis=1)
            result[pending[hit]] = ids[hit]
            left = ~(empty | hit)
            pending, slots = pending[left], (slots[left] + 1) & mask
        return result

    def _index(self, ids: npt.NDArray[np.int32]) -> None:
        """Place ids numbered but not yet in the table, growing it first past half full."""
        if len(self) > self._slots.size * MAX_LOAD:
            size = self._slots.size
            while len(self) > size * MAX_LOAD:
                size *= 2
            placed = self._slots[self._slots != EMPTY]
            self._slots = np.full(size, EMPTY, dtype=np.int32)
            ids = np.concatenate([placed, ids])
        mask = self._slots.size - 1
        slots = (self._fingerprints_by_id()[ids, 0] & np.uint64(mask)).astype(np.int64)
        while ids.size:
            free = self._slots[slots] == EMPTY
            self._slots[slots[free]] = ids[free]  # of ids sharing a free slot, one lands there
            landed = free & (self._slots[slots] == ids)
            ids, slots = ids[~landed], (slots[~landed] + 1) & mask


class UrlBatch:
    """URLs looked up in one probe of the table. Those not found get ids when `number` reaches
    them (so a caller may leave some without one), and are indexed at `close`."""

    def __init__(self, table: UrlTable, urls: list[str]) -> None:
        self.urls = urls
        self._table = table
        self._keys = fingerprints(urls)
        self.ids: list[int] = table._probe(self._keys).tolist()
        """Per position, its URL's id; EMPTY until numbered for a URL new to the table."""
        self._new: dict[bytes, int] = {}

    def known(self, position: int) -> int:
        """The id of the URL at `position` if the table or this batch has numbered it, or EMPTY."""
        node = self.ids[position]
        if node == EMPTY and self._new:
            return self._new.get(self._keys[position].tobytes(), EMPTY)
        return node

    def number(self, start: int, end: int) -> list[int]:
        """Give every URL in positions [start, end) an id: new URLs the next free ids in order of
        first appearance. Returns the positions of the URLs that got a new id."""
        ids, keys, new, append = self.ids, self._keys, self._new, self._table._append
        added: list[int] = []
        for position in range(start, end):
            if ids[position] != EMPTY:
                continue
            key = keys[position].tobytes()
            node = new.get(key)
            if node is None:
                node = new[key] = append(self.urls[position], key)
                added.append(position)
            ids[position] = node
        return added

    def close(self) -> None:
        """Index the URLs numbered new, so later lookups find them."""
        if self._new:
            self._table._index(np.fromiter(self._new.values(), dtype=np.int32))
        self._new = {}
