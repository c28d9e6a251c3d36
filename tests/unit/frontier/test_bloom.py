"""The visited-set Bloom filter: no false negatives, a bounded false-positive rate, fixed size."""

import pytest

from frontier.bloom import BloomFilter


def test_every_added_key_is_found_and_unseen_keys_mostly_are_not() -> None:
    bloom = BloomFilter.for_capacity(10_000, 0.01)
    added = [f"crawl\x00url-{n}".encode() for n in range(10_000)]
    for key in added:
        bloom.add(key)
    assert all(bloom.might_contain(key) for key in added)
    unseen = [f"crawl\x00other-{n}".encode() for n in range(20_000)]
    false_positives = sum(bloom.might_contain(key) for key in unseen)
    assert false_positives / len(unseen) < 0.02  # 1 % designed, with room for chance


def test_size_is_fixed_by_configuration_not_by_what_is_added() -> None:
    bloom = BloomFilter.for_capacity(1_000_000, 0.01)
    size = bloom.size_bytes
    assert 1_100_000 < size < 1_300_000  # about 9.6 bits per expected key
    for n in range(50_000):
        bloom.add(n.to_bytes(8, "big"))
    assert bloom.size_bytes == size


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError):
        BloomFilter(4, 1)
    with pytest.raises(ValueError):
        BloomFilter.for_capacity(100, 1.5)
