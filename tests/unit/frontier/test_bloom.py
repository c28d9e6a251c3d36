"""The visited-set Bloom filter: no false negatives, a bounded false-positive rate, fixed size."""

import pytest

from frontier.bloom import MASKS, BloomFilter, _mask_table, expected_false_positive_rate


def test_every_added_key_is_found_and_unseen_keys_mostly_are_not() -> None:
    bloom = BloomFilter.for_capacity(10_000, 0.01)
    added = [f"crawl\x00url-{n}".encode() for n in range(10_000)]
    for key in added:
        bloom.add(key)
    assert all(bloom.might_contain(key) for key in added)
    assert bloom.absent(added[:100]) == [False] * 100
    unseen = [f"crawl\x00other-{n}".encode() for n in range(20_000)]
    false_positives = sum(bloom.might_contain(key) for key in unseen)
    assert bloom.absent(unseen) == [not bloom.might_contain(key) for key in unseen]
    assert false_positives / len(unseen) < 0.02  # 1 % designed, with room for chance


def test_adding_by_the_digest_absent_gave_sets_the_same_bits_as_adding_the_key() -> None:
    by_key, by_digest = BloomFilter.for_capacity(5_000, 0.01), BloomFilter.for_capacity(5_000, 0.01)
    keys = [f"crawl\x00url-{n}".encode() for n in range(5_000)]
    digests: list[int] = []
    assert by_digest.absent(keys, digests) == [True] * len(keys)  # nothing added yet
    assert len(digests) == len(keys)
    for key in keys:
        by_key.add(key)
    by_digest.add_digests(digests)
    assert by_digest._array == by_key._array
    assert by_digest.count == by_key.count == len(keys)
    assert by_digest.absent(keys) == [False] * len(keys)


def test_size_is_fixed_by_configuration_not_by_what_is_added() -> None:
    bloom = BloomFilter.for_capacity(1_000_000, 0.01)
    size = bloom.size_bytes
    assert 1_500_000 < size < 1_650_000  # about 12.5 bits per expected key (blocked layout)
    for n in range(50_000):
        bloom.add(n.to_bytes(8, "big"))
    assert bloom.size_bytes == size


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError):
        BloomFilter(4, 1)
    with pytest.raises(ValueError):
        BloomFilter.for_capacity(100, 1.5)


def test_the_measured_rate_at_capacity_is_the_configured_one() -> None:
    bloom = BloomFilter.for_capacity(200_000, 0.01)
    for n in range(200_000):
        bloom.add(b"crawl\x00" + n.to_bytes(16, "big"))
    unseen = 100_000
    false_positives = sum(
        bloom.might_contain(b"crawl\x00" + (n + 10**9).to_bytes(16, "big")) for n in range(unseen)
    )
    assert 0.005 < false_positives / unseen < 0.013  # 1 % configured; not far better either
    assert 0.009 < expected_false_positive_rate(12.5, 5) <= 0.01


def test_each_mask_sets_exactly_its_number_of_bits_and_is_fixed() -> None:
    masks = _mask_table(5)
    assert len(masks) == MASKS
    assert all(bin(mask).count("1") == 5 for mask in masks)
    assert len(set(masks)) > MASKS * 0.99
    assert _mask_table.__wrapped__(5) == masks  # the same in every process: a fixed seed
