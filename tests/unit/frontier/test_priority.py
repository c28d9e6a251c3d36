"""Queue order per strategy, and byte order of the encoded keys equal to that order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier.priority import (
    NEUTRAL_PRIORITY,
    PRIORITY_BYTES,
    PRIORITY_MAX,
    PrioritySignals,
    QueueKey,
    bfs_key,
    decode_priority,
    encode_priority,
    encode_sort_key,
    in_link_norm,
    novelty,
    novelty_key,
    pagerank_bucket,
    pagerank_key,
    preference_bucket,
    queue_key,
    score_key,
    seed_score,
)
from schemas.seeds import PriorityStrategy


def queue_bytes(key: QueueKey) -> bytes:
    """The on-disk order of `frontier.queues`: priority bytes, then the 8-byte arrival sequence."""
    return encode_priority(key) + key.arrival.to_bytes(8, "big")


def release_order(keys: dict[str, QueueKey]) -> list[str]:
    return sorted(keys, key=lambda name: queue_bytes(keys[name]))


def test_bfs_orders_by_depth_then_arrival() -> None:
    keys = {
        "setup": bfs_key(1, 2),
        "api": bfs_key(1, 3),
        "intro": bfs_key(0, 9),
        "config": bfs_key(2, 4),
        "install": bfs_key(2, 5),
    }
    assert release_order(keys) == ["intro", "setup", "api", "config", "install"]
    assert keys["intro"].priority == NEUTRAL_PRIORITY


def test_seed_score_follows_seed_002_weights_and_inverse_depth() -> None:
    nothing = PrioritySignals()
    assert seed_score(nothing, 0) == pytest.approx(0.2)
    assert seed_score(nothing, 1) == pytest.approx(0.1)
    assert seed_score(nothing, 2) == pytest.approx(0.2 / 3)
    everything = PrioritySignals(in_links=5000, domain_authority=1.0, sitemap_priority=1.0)
    assert seed_score(everything, 0) == pytest.approx(1.0)
    hinted = PrioritySignals(in_links=0, domain_authority=0.5, sitemap_priority=0.8)
    assert seed_score(hinted, 1) == pytest.approx(0.3 * 0.5 + 0.2 * 0.8 + 0.2 * 0.5)
    assert in_link_norm(0) == 0.0
    assert in_link_norm(1000) == pytest.approx(1.0)
    assert 0.0 < in_link_norm(10) < in_link_norm(100) < 1.0
    bad = PrioritySignals(domain_authority=float("nan"), sitemap_priority=7.0)
    assert seed_score(bad, 0) == pytest.approx(0.2 + 0.2)


def test_score_orders_higher_score_first_then_depth_then_arrival() -> None:
    keys = {
        "low": score_key(0.2, 0, 1),
        "high-deep": score_key(0.9, 3, 2),
        "mid-late": score_key(0.5, 1, 9),
        "mid-early": score_key(0.5, 1, 3),
        "mid-shallow": score_key(0.5, 0, 10),
    }
    assert release_order(keys) == ["high-deep", "mid-shallow", "mid-early", "mid-late", "low"]
    assert score_key(1.0, 0, 0).priority == 0
    assert score_key(0.0, 0, 0).priority == PRIORITY_MAX
    assert score_key(-3.0, 0, 0).priority == PRIORITY_MAX


def test_pagerank_orders_higher_rank_first_and_unknown_as_neutral() -> None:
    keys = {
        "hub": pagerank_key(1e-2, 2, 1),
        "unknown": pagerank_key(None, 0, 2),
        "average": pagerank_key(1e-5, 1, 3),
        "obscure": pagerank_key(1e-8, 0, 4),
        "zero": pagerank_key(0.0, 0, 5),
    }
    assert release_order(keys) == ["hub", "unknown", "average", "obscure", "zero"]
    assert keys["unknown"].priority == NEUTRAL_PRIORITY
    # With a neutral rank of 1/N (here N = 1000), unknown pages sort with average ones.
    assert pagerank_bucket(None, neutral_pagerank=1e-3) == pagerank_bucket(1e-3)
    assert pagerank_bucket(1.0) == 0
    assert pagerank_bucket(1e-12) == PRIORITY_MAX
    assert pagerank_bucket(float("nan")) == PRIORITY_MAX


def test_novelty_puts_hubs_last() -> None:
    keys = {
        "hub": novelty_key(5000, 0, 1),
        "popular": novelty_key(50, 0, 2),
        "fresh-deep": novelty_key(0, 4, 3),
        "linked-once": novelty_key(1, 1, 4),
    }
    assert release_order(keys) == ["fresh-deep", "linked-once", "popular", "hub"]
    assert novelty(0) == 1.0
    assert novelty(1) > novelty(10) > novelty(1000) > 0.0


def test_depth_first_keeps_the_strategy_order_within_one_depth() -> None:
    keys = {
        "deep-best": score_key(1.0, 2, 1, depth_first=True),
        "shallow-worst": score_key(0.0, 1, 2, depth_first=True),
        "shallow-best": score_key(0.9, 1, 3, depth_first=True),
    }
    assert release_order(keys) == ["shallow-best", "shallow-worst", "deep-best"]
    assert keys["deep-best"] == QueueKey(NEUTRAL_PRIORITY, 2, 0, 1)


def test_queue_key_dispatches_on_strategy() -> None:
    signals = PrioritySignals(in_links=3, pagerank=1e-4)
    assert queue_key("bfs", signals, 2, 7) == bfs_key(2, 7)
    assert queue_key("score", signals, 2, 7) == score_key(seed_score(signals, 2), 2, 7)
    assert queue_key("pagerank", signals, 2, 7) == pagerank_key(1e-4, 2, 7)
    assert queue_key("novelty", signals, 2, 7) == novelty_key(3, 2, 7)
    deep = queue_key("novelty", signals, 2, 7, depth_first=True)
    assert deep == novelty_key(3, 2, 7, depth_first=True)


def test_encoding_is_fixed_width_round_trips_and_refuses_overflow() -> None:
    key = QueueKey(123, 70_000, 999, 2**40)
    raw = encode_priority(key)
    assert len(raw) == PRIORITY_BYTES
    assert decode_priority(raw + b"rest") == (123, 70_000, 999)
    assert encode_sort_key(key) == queue_bytes(key)
    for bad in (
        QueueKey(-1, 0, 0, 0),
        QueueKey(2**16, 0, 0, 0),
        QueueKey(0, 2**32, 0, 0),
        QueueKey(0, 0, 2**16, 0),
    ):
        with pytest.raises(ValueError):
            encode_priority(bad)
    with pytest.raises(ValueError):
        encode_sort_key(QueueKey(0, 0, 0, 2**64))


queue_keys = st.builds(
    QueueKey,
    st.integers(0, 2**16 - 1),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**16 - 1),
    st.integers(0, 2**64 - 1),
)


@settings(deadline=None, max_examples=300)
@given(st.lists(queue_keys, min_size=2, max_size=50))
def test_byte_order_equals_key_order(keys: list[QueueKey]) -> None:
    assert sorted(keys, key=encode_sort_key) == sorted(keys)
    assert sorted(keys, key=queue_bytes) == sorted(keys)


STRATEGIES: tuple[PriorityStrategy, ...] = ("bfs", "score", "pagerank", "novelty")
unit = st.floats(0.0, 1.0)
signals = st.builds(
    PrioritySignals,
    in_links=st.integers(0, 10**6),
    domain_authority=unit,
    sitemap_priority=st.none() | unit,
    pagerank=st.none() | st.floats(0.0, 1.0),
)


@settings(deadline=None, max_examples=300)
@given(
    st.sampled_from(STRATEGIES),
    st.lists(st.tuples(signals, st.integers(0, 50), st.integers(0, 10**9)), min_size=2),
    st.booleans(),
)
def test_every_strategy_encodes_its_own_order(
    strategy: PriorityStrategy, urls: list[tuple[PrioritySignals, int, int]], depth_first: bool
) -> None:
    keys = [
        queue_key(strategy, s, depth, arrival, depth_first=depth_first)
        for s, depth, arrival in urls
    ]
    assert sorted(keys, key=queue_bytes) == sorted(keys)
    if depth_first:
        depths = [key.depth for key in sorted(keys)]
        assert depths == sorted(depths)


@settings(deadline=None, max_examples=300)
@given(unit, unit, st.integers(0, 50), st.integers(0, 50))
def test_a_clearly_higher_score_always_leaves_first(
    first: float, second: float, depth_a: int, depth_b: int
) -> None:
    high, low = max(first, second), min(first, second)
    ahead = queue_bytes(score_key(high, depth_a, 1))
    behind = queue_bytes(score_key(low, depth_b, 0))
    if high - low > 1 / PRIORITY_MAX:
        assert ahead < behind
    assert encode_priority(score_key(high, 0, 0)) <= encode_priority(score_key(low, 0, 0))


@settings(deadline=None, max_examples=300)
@given(st.integers(0, 10**7), st.integers(0, 10**7), st.floats(1e-12, 1.0), st.floats(1e-12, 1.0))
def test_novelty_and_pagerank_buckets_are_monotonic(a: int, b: int, p: float, q: float) -> None:
    fewer, more = min(a, b), max(a, b)
    assert novelty_key(fewer, 0, 0) <= novelty_key(more, 0, 0)
    higher, lower = max(p, q), min(p, q)
    assert pagerank_key(higher, 0, 0) <= pagerank_key(lower, 0, 0)


def test_a_preference_splits_the_buckets_in_two_halves_in_the_strategy_order() -> None:
    buckets = range(PRIORITY_MAX + 1)
    preferred = [preference_bucket(b, True) for b in buckets]
    others = [preference_bucket(b, False) for b in buckets]
    assert preferred == sorted(preferred) and others == sorted(others)
    assert max(preferred) < min(others) and max(others) == PRIORITY_MAX
    signals = PrioritySignals(preferred=True)
    assert queue_key("score", signals, 3, 7) < queue_key(
        "score", PrioritySignals(in_links=1000, preferred=False), 0, 0
    )
    # bfs and depth first: the rank carries it, so depth still leads.
    assert queue_key("bfs", PrioritySignals(preferred=False), 1, 5) < queue_key(
        "bfs", PrioritySignals(preferred=True), 2, 0, depth_first=True
    )
    assert queue_key("bfs", PrioritySignals(preferred=True), 2, 9, depth_first=True) < queue_key(
        "bfs", PrioritySignals(preferred=False), 2, 0, depth_first=True
    )
    assert queue_key("bfs", PrioritySignals(), 2, 0) == bfs_key(2, 0)  # no pattern: unchanged
