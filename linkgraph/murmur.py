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
