"""A Bloom filter in front of each partition's visited set (DESIGN section 3, step 2).

Most discovered URLs on a large crawl were seen before, but most *lookups* on a growing crawl are
for URLs never seen, and for those the filter answers "definitely not" without touching RocksDB.
Its size is fixed from configuration (expected URLs per partition and a false-positive rate), so
memory does not grow with the crawl; past the expected count the false-positive rate rises and
more lookups fall through to RocksDB, which stays the truth. A false positive costs one RocksDB
read; there are no false negatives. It is rebuilt from the visited table when a partition opens.

Positions come from the key's 128-bit mmh3 hash (as two 64-bit halves) by double hashing (Kirsch
and Mitzenmacher).
"""

from __future__ import annotations

import math

import mmh3


class BloomFilter:
    def __init__(self, bits: int, hashes: int) -> None:
        if bits < 8 or hashes < 1:
            raise ValueError("a Bloom filter needs at least 8 bits and one hash")
        self.bits = bits
        self.hashes = hashes
        self._array = bytearray((bits + 7) // 8)
        self.count = 0
        self._last_key = b""
        self._last_positions: list[int] = []

    @classmethod
    def for_capacity(cls, expected: int, false_positive_rate: float) -> BloomFilter:
        """The smallest filter holding `expected` keys at the given false-positive rate."""
        if not 0 < false_positive_rate < 1:
            raise ValueError("the false-positive rate must be between 0 and 1")
        expected = max(expected, 1)
        bits = math.ceil(-expected * math.log(false_positive_rate) / math.log(2) ** 2)
        hashes = max(1, round(bits / expected * math.log(2)))
        return cls(bits, hashes)

    def _positions(self, key: bytes) -> list[int]:
        if key == self._last_key:
            return self._last_positions
        first, step = mmh3.hash64(key, signed=False)
        step |= 1
        bits = self.bits
        positions = [(first + i * step) % bits for i in range(self.hashes)]
        # A lookup is usually followed by the add of the same key (a URL seen for the first time).
        self._last_key = key
        self._last_positions = positions
        return positions

    def add(self, key: bytes) -> None:
        array = self._array
        for position in self._positions(key):
            array[position >> 3] |= 1 << (position & 7)
        self.count += 1

    def might_contain(self, key: bytes) -> bool:
        array = self._array
        return all(array[p >> 3] & (1 << (p & 7)) for p in self._positions(key))

    @property
    def size_bytes(self) -> int:
        return len(self._array)
