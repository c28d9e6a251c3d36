"""librdkafka's murmur2 partitioner, called directly, gives exactly the kernel's partitions."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from linkgraph.murmur import (
    LIBRDKAFKA,
    VECTOR_FROM,
    partition_of_key,
    partitions_of_keys,
    vectorised_partitions,
)
from schemas.partitioning import partition_for_key

pytestmark = pytest.mark.skipif(LIBRDKAFKA is None, reason="librdkafka's murmur2 not reachable")

COUNTS = (1, 2, 3, 6, 7, 12, 64, 1000, 2**31 - 1)


def test_is_librdkafkas() -> None:
    assert partition_of_key is LIBRDKAFKA


def test_same_partitions_as_the_kernel_on_urls_and_random_bytes() -> None:
    rng = random.Random(7)
    urls = [
        f"https://h{rng.randrange(5000)}.example/{'p/' * rng.randrange(6)}{n}?q={n * 31}".encode()
        for n in range(20_000)
    ]
    raw = [rng.randbytes(rng.randrange(0, 260)) for _ in range(20_000)]
    for key in [b"", "https://ünïcode.example/ß".encode(), *urls, *raw]:
        for count in COUNTS:
            assert partition_of_key(key, count) == partition_for_key(key, count), (key, count)


@given(key=st.binary(max_size=300), partitions=st.integers(min_value=1, max_value=2**31 - 1))
def test_same_partition_as_the_kernel_for_any_key(key: bytes, partitions: int) -> None:
    assert partition_of_key(key, partitions) == partition_for_key(key, partitions)


def test_known_partitions() -> None:
    assert partition_of_key(b"kafka", 2**31 - 1) == 1348980580
    assert partition_of_key(b"kafka", 6) == 1348980580 % 6


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError):
        partition_of_key(b"example.com", 0)


def test_partitions_of_a_list_are_the_kernels() -> None:
    """Every length's tail (0 to 3 bytes past whole words), keys of any alignment in the joined
    buffer, long and empty keys, in any order."""
    rng = random.Random(11)
    keys = [rng.randbytes(rng.randrange(0, 70)) for _ in range(3000)]
    keys += [b"", b"a", b"ab", b"abc", b"abcd", rng.randbytes(2000), "https://ü.example/ß".encode()]
    rng.shuffle(keys)
    for count in COUNTS:
        expected = [partition_for_key(k, count) for k in keys]
        assert vectorised_partitions(keys, count) == expected
        assert partitions_of_keys(keys, count) == expected
        short = keys[: VECTOR_FROM - 1]  # key by key in librdkafka, where it is reachable
        assert partitions_of_keys(short, count) == expected[: VECTOR_FROM - 1]
    for key in keys[:50]:  # alone, at the buffer's end
        assert vectorised_partitions([key], 7) == [partition_for_key(key, 7)]
        assert partitions_of_keys([key], 7) == [partition_for_key(key, 7)]
    assert vectorised_partitions([], 3) == partitions_of_keys([], 3) == []
    for partitioned in (vectorised_partitions, partitions_of_keys):
        with pytest.raises(ValueError, match="positive"):
            partitioned([b"a"], 0)
