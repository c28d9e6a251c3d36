"""The contiguous watermark of out-of-order completion."""

import random

import pytest

from streamcrawl.offsets import PartitionOffsets


def test_watermark_waits_for_the_lowest_running_offset() -> None:
    offsets = PartitionOffsets(max_uncommitted=100)
    for offset in (10, 11, 12, 13):
        offsets.start(offset)
    offsets.finish(12)
    offsets.finish(13)
    assert offsets.committable is None
    assert offsets.uncommitted_done == 2
    offsets.finish(10)
    assert offsets.committable == 11
    offsets.finish(11)
    assert offsets.committable == 14
    assert offsets.uncommitted_done == 0


def test_gaps_in_offsets_do_not_block_the_watermark() -> None:
    offsets = PartitionOffsets(max_uncommitted=100)
    offsets.start(5)
    offsets.start(9)  # 6..8 were compaction gaps or transaction markers
    offsets.finish(9)
    assert offsets.committable is None
    offsets.finish(5)
    assert offsets.committable == 10


def test_random_completion_order_always_commits_the_contiguous_prefix() -> None:
    rng = random.Random(7)
    offsets = PartitionOffsets(max_uncommitted=10_000)
    started = list(range(1000))
    for offset in started:
        offsets.start(offset)
    order = started[:]
    rng.shuffle(order)
    finished: set[int] = set()
    for offset in order:
        offsets.finish(offset)
        finished.add(offset)
        prefix = 0
        while prefix in finished:
            prefix += 1
        assert offsets.committable == (prefix if prefix else None)


def test_full_when_done_and_running_reach_the_bound() -> None:
    offsets = PartitionOffsets(max_uncommitted=3)
    offsets.start(0)
    offsets.start(1)
    assert not offsets.full
    offsets.start(2)
    assert offsets.full
    offsets.finish(0)
    assert not offsets.full


def test_misuse_is_an_error() -> None:
    offsets = PartitionOffsets(max_uncommitted=3)
    offsets.start(4)
    with pytest.raises(ValueError):
        offsets.start(4)
    with pytest.raises(ValueError):
        offsets.finish(5)
