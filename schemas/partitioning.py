"""Kafka's murmur2 key partitioner, bit for bit as the Java client and librdkafka compute it.

Producers use librdkafka's ``murmur2_random`` partitioner (DESIGN.md section 2), so a keyed record
lands where a Java producer would put it. Where the kernel picks a partition itself, because the
partition follows only part of the key (``links.by-target`` by its target URL, ``scores`` by the
URL's host), it calls :func:`partition_for_key`, and that must agree with librdkafka exactly or
co-partitioned state splits across instances. An integration test produces through librdkafka and
compares; the unit tests pin the vectors of Kafka's ``UtilsTest.testMurmur2`` and librdkafka's
``unittest_murmur2``.

``murmur2_random`` sends a NULL key to a random partition. We never produce a null key (every
topic has a key function), so that branch is not modelled; an empty key is not null and hashes
like any other.
"""

from __future__ import annotations

import struct

_SEED = 0x9747B28C
_MULTIPLIER = 0x5BD1E995
_MASK32 = 0xFFFFFFFF
_WORDS = struct.Struct("<I")


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: MurmurHash2, seed 0x9747b28c, signed 32-bit as Java returns."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    for (word,) in _WORDS.iter_unpack(memoryview(data)[:whole]):
        k = (word * _MULTIPLIER) & _MASK32
        k ^= k >> 24
        k = (k * _MULTIPLIER) & _MASK32
        h = ((h * _MULTIPLIER) & _MASK32) ^ k
    tail = data[whole:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * _MULTIPLIER) & _MASK32
    h ^= h >> 13
    h = (h * _MULTIPLIER) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition librdkafka's murmur2 partitioners and Java's default partitioner give ``key``.

    ``(murmur2(key) & 0x7fffffff) % partitions``: Java's ``toPositive`` clears the sign bit rather
    than taking an absolute value, and librdkafka does the same on its unsigned hash.
    """
    if partitions < 1:
        raise ValueError(f"partition count must be positive, got {partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % partitions
