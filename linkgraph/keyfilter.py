"""A Bloom filter of byte keys that lives in one process only: the node cache's (`nodecache`).

The same register-blocked layout as `frontier.bloom` (a key sets the bits of one of `MASKS`
precomputed masks in one 64-bit word), hashed with Python's own ``hash`` of the key instead of
mmh3: a filter that is never written down nor shared with another process may use the
interpreter's seeded hash, which bytes compute once and in C, and its word and mask come from a
machine-sized integer. Keys are added a list at a time (every reverse record and new node of a
cycle: a cost per in-link), the words and masks computed with numpy over the list. 16 bits per
key and 6 bits per mask: 0.45 % false positives at capacity
(`frontier.bloom.expected_false_positive_rate`).
"""

from __future__ import annotations

import random
from array import array

import numpy as np

WORD_BITS = 64
BITS_PER_KEY = 16
MASK_BITS = 14
MASKS = 1 << MASK_BITS
HASHES = 6
_MASK_SHIFT = 40
"""The mask is chosen by bits 40..53 of the hash, the word by the hash modulo the word count."""


def _mask_table() -> tuple[int, ...]:
    rng = random.Random(HASHES)
    return tuple(
        sum(1 << bit for bit in rng.sample(range(WORD_BITS), HASHES)) for _ in range(MASKS)
    )


_MASKS = _mask_table()
_MASK_ARRAY = np.array(_MASKS, dtype=np.uint64)


class KeyFilter:
    """Holds up to `capacity` keys at the rate above; more only raise it (never a false
    negative)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(capacity, 1)
        self._words = -(-self.capacity * BITS_PER_KEY // WORD_BITS)
        self._array = array("Q", bytes(8 * self._words))
        self._table = np.frombuffer(self._array, dtype=np.uint64)
        """The same words, for `add_all`."""
        self.count = 0

    def add_all(self, keys: list[bytes]) -> None:
        if not keys:
            return
        # numpy's // and >> on int64 round as Python's do, so these are `might_contain`'s.
        digests = np.fromiter(map(hash, keys), dtype=np.int64, count=len(keys))
        masks = _MASK_ARRAY[(digests >> _MASK_SHIFT) & (MASKS - 1)]
        np.bitwise_or.at(self._table, digests % self._words, masks)
        self.count += len(keys)

    def might_contain(self, key: bytes) -> bool:
        digest = hash(key)
        mask = _MASKS[(digest >> _MASK_SHIFT) & (MASKS - 1)]
        return self._array[digest % self._words] & mask == mask

    def might_contain_many(self, keys: list[bytes]) -> list[bool]:
        """`might_contain` of each key, computed for the whole list with numpy (a run's new
        targets: one call instead of one each)."""
        if not keys:
            return []
        digests = np.fromiter(map(hash, keys), dtype=np.int64, count=len(keys))
        masks = _MASK_ARRAY[(digests >> _MASK_SHIFT) & (MASKS - 1)]
        found: list[bool] = ((self._table[digests % self._words] & masks) == masks).tolist()
        return found

    @property
    def full(self) -> bool:
        return self.count >= self.capacity
