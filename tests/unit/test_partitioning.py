"""Kafka's murmur2 partitioner: published vectors of the Java client and librdkafka, and ranges."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.partitioning import murmur2, partition_for_key

# Apache Kafka, clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2.
KAFKA_UTILS_TEST_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

# librdkafka, src/rdmurmur2.c, unittest_murmur2 ("java_murmur2_results", as int32 hex). The
# suffixes of "1234" and of the long key cover every tail length, 0 to 3 bytes.
_UNALIGNED = b"PreAmbleWillBeRemoved,ThePrePartThatIs"
LIBRDKAFKA_VECTORS = [
    (b"kafka", 0xD067CF64),
    (b"giberish123456789", 0x8F552B0C),
    (b"1234", 0x9FC97B14),
    (b"234", 0xE7C009CA),
    (b"34", 0x873930DA),
    (b"4", 0x5A4B5CA1),
    (_UNALIGNED, 0x78424F1C),
    (_UNALIGNED[1:], 0x4A62B377),
    (_UNALIGNED[2:], 0xE0E4E09E),
    (_UNALIGNED[3:], 0x62B8B43F),
    (b"", 0x106E08D9),
]


def _as_int32(unsigned: int) -> int:
    return unsigned - (1 << 32) if unsigned & 0x80000000 else unsigned


@pytest.mark.parametrize(("key", "expected"), KAFKA_UTILS_TEST_VECTORS)
def test_murmur2_matches_kafka_java_client(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "expected"), LIBRDKAFKA_VECTORS)
def test_murmur2_matches_librdkafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == _as_int32(expected)


@pytest.mark.parametrize(("key", "expected"), KAFKA_UTILS_TEST_VECTORS)
@pytest.mark.parametrize("partitions", [1, 2, 3, 12, 64, 1000])
def test_partition_clears_the_sign_bit_like_java_to_positive(
    key: bytes, expected: int, partitions: int
) -> None:
    assert partition_for_key(key, partitions) == (expected & 0x7FFFFFFF) % partitions


def test_known_partitions() -> None:
    # 0xd067cf64 & 0x7fffffff == 1348980580, the positive value librdkafka's older test printed.
    assert partition_for_key(b"kafka", 2**31 - 1) == 1348980580
    assert partition_for_key(b"kafka", 6) == 1348980580 % 6


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        partition_for_key(b"example.com", 0)


@settings(deadline=None, max_examples=300)
@given(key=st.binary(max_size=300))
def test_murmur2_is_a_signed_32_bit_int(key: bytes) -> None:
    assert -(2**31) <= murmur2(key) < 2**31


@settings(deadline=None, max_examples=300)
@given(key=st.binary(max_size=300), partitions=st.integers(min_value=1, max_value=10_000))
def test_partition_is_in_range(key: bytes, partitions: int) -> None:
    assert 0 <= partition_for_key(key, partitions) < partitions


def test_hosts_spread_evenly_over_partitions() -> None:
    counts = [0] * 12
    for i in range(12_000):
        counts[partition_for_key(f"host-{i}.example".encode(), 12)] += 1
    assert min(counts) > 800
    assert max(counts) < 1200
