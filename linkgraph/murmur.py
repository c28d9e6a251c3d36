"""The murmur2 partition of a target URL, computed by librdkafka itself (five times faster).

`links.by-target` is partitioned by its target URL with the kernel's murmur2
(`schemas.partitioning.partition_for_key`, pure Python, about 4 us for a URL). The producers'
partitioner is librdkafka's, and librdkafka exports it: ``rd_kafka_msg_partitioner_murmur2`` (public
API in rdkafka.h, ``(murmur2(key) & 0x7fffffff) % partition_cnt``, the topic handle unused). It is
reached through confluent-kafka's extension module, whose symbol lookup covers the librdkafka it
links (the wheel's bundled one or the system's). `tests/unit/linkgraph/test_murmur.py` checks it
against the pure-Python function and the published vectors. Where the symbol cannot be found, the
pure-Python function is used.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable

import confluent_kafka.cimpl
import numpy as np

from schemas.partitioning import partition_for_key

log = logging.getLogger(__name__)

Partitioner = Callable[[bytes, int], int]


def _librdkafka_partitioner() -> Partitioner | None:
    try:
        library = ctypes.CDLL(confluent_kafka.cimpl.__file__)
        function = library.rd_kafka_msg_partitioner_murmur2
    except (OSError, AttributeError) as error:
        log.warning("librdkafka's murmur2 not reachable (%s): using the Python one", error)
        return None
    function.restype = ctypes.c_int32
    function.argtypes = [
        ctypes.c_void_p,  # the topic handle: not read by the murmur2 partitioner
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_int32,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]

    def partition(key: bytes, partitions: int) -> int:
        if partitions < 1:
            raise ValueError(f"partition count must be positive, got {partitions}")
        result: int = function(None, key, len(key), partitions, None, None)
        return result

    return partition


LIBRDKAFKA: Partitioner | None = _librdkafka_partitioner()
partition_of_key: Partitioner = LIBRDKAFKA or partition_for_key
"""`schemas.partitioning.partition_for_key`, in C when librdkafka's is reachable."""


VECTOR_FROM = 256
"""Lists at least this long take the numpy path; shorter ones librdkafka's function per key. The
vectorised path costs about 130 us however few the keys (a dozen numpy calls per 4-byte word of
the longest key), librdkafka's about 1.1 us a key: they cross at about 250 URLs. A link-graph cycle
of a live crawl has tens of re-keyed edges per partition, a bulk ingest thousands."""

_SEED = np.uint32(0x9747B28C)
_MULTIPLIER = np.uint32(0x5BD1E995)
_TAIL_MASKS = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF], dtype=np.uint32)


def partitions_of_keys(keys: list[bytes], partitions: int) -> list[int]:
    """`partition_of_key` of each key (the re-keyed edges of a batch): a short list key by key in
    librdkafka, a long one all at once with numpy (`VECTOR_FROM`)."""
    if partitions < 1:
        raise ValueError(f"partition count must be positive, got {partitions}")
    if LIBRDKAFKA is not None and len(keys) < VECTOR_FROM:
        return [LIBRDKAFKA(key, partitions) for key in keys]
    return vectorised_partitions(keys, partitions)


def vectorised_partitions(keys: list[bytes], partitions: int) -> list[int]:
    """`partition_of_key` of each key, computed for the whole list at once with numpy: Kafka's
    murmur2 of every key advanced one 4-byte word per step, the keys with that many words still
    going, so the cost is the keys' words, not a call each. `tests/unit/linkgraph/test_murmur.py`
    checks it against the kernel's function."""
    if partitions < 1:
        raise ValueError(f"partition count must be positive, got {partitions}")
    count = len(keys)
    if count == 0:
        return []
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=count)
    starts = np.cumsum(lengths) - lengths
    # The joined keys read as 4-byte little-endian words from each of the 4 byte alignments: a
    # key's words are those of its start's alignment, consecutive from its start.
    joined = b"".join(keys) + bytes(7)
    size = (len(joined) - 3) // 4
    aligned = np.stack([np.frombuffer(joined, "<u4", size, offset) for offset in range(4)])
    words = aligned.ravel()
    first = (starts % 4) * size + starts // 4
    whole = lengths // 4
    order = np.argsort(-whole, kind="stable")  # the keys with the most words first
    first, whole, tail_length = first[order], whole[order], (lengths % 4)[order]
    h = _SEED ^ lengths[order].astype(np.uint32)
    # going[j]: how many keys (a prefix of `order`) have more than j whole words.
    going = np.searchsorted(-whole, -np.arange(1, int(whole[0]) + 1), side="right")
    for step, active in enumerate(going.tolist()):
        k = words[first[:active] + step] * _MULTIPLIER
        k ^= k >> np.uint32(24)
        k *= _MULTIPLIER
        h[:active] = (h[:active] * _MULTIPLIER) ^ k
    # The tail word holds the next key's bytes (or the padding) past the key's own: masked off.
    tail = words[first + whole] & _TAIL_MASKS[tail_length]
    h = np.where(tail_length > 0, (h ^ tail) * _MULTIPLIER, h)
    h ^= h >> np.uint32(13)
    h *= _MULTIPLIER
    h ^= h >> np.uint32(15)
    result = np.empty(count, dtype=np.int64)
    result[order] = (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % partitions
    return result.tolist()
