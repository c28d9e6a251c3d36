"""The benchmarks' verdicts: the order-statistic interval for a median, and met / at the line."""

from __future__ import annotations

import random

import pytest

from tests.bench.verdicts import MedianInterval, median_interval, rounds_needed, verdict


@pytest.mark.parametrize(
    ("rounds", "low_rank", "coverage"),
    [
        # k-th smallest and k-th largest; coverage 1 - 2 P(Binomial(n, 1/2) < k).
        (3, 1, 0.75),
        (5, 1, 1 - 2 / 32),
        (6, 1, 1 - 2 / 64),
        (9, 2, 1 - 2 * 10 / 512),
        (12, 3, 1 - 2 * 79 / 4096),
        (20, 6, 1 - 2 * 21700 / 2**20),
    ],
)
def test_the_interval_is_the_widest_pair_of_ranks_that_keeps_95_percent(
    rounds: int, low_rank: int, coverage: float
) -> None:
    values = [float(rank) for rank in range(rounds, 0, -1)]  # unsorted on purpose
    interval = median_interval(values)
    assert (interval.low, interval.high) == (low_rank, rounds + 1 - low_rank)
    assert interval.coverage == pytest.approx(coverage)
    assert interval.rounds == rounds


def test_one_round_is_its_own_interval_with_no_confidence() -> None:
    assert median_interval([0.7]) == MedianInterval(0.7, 0.7, 0.0, 1)


def test_no_rounds_is_an_error() -> None:
    with pytest.raises(ValueError, match="no rounds"):
        median_interval([])


def test_the_stated_coverage_holds_for_a_skewed_distribution() -> None:
    """Draw rounds from a lognormal (median 1): the interval holds 1 as often as it says."""
    rng = random.Random(7)
    trials, rounds = 4000, 12
    held = 0
    for _ in range(trials):
        interval = median_interval([rng.lognormvariate(0.0, 0.25) for _ in range(rounds)])
        held += interval.low <= 1.0 <= interval.high
    assert held / trials == pytest.approx(median_interval([0.0] * rounds).coverage, abs=0.015)


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (0.70, 0.80, "met"),
        (0.71, 0.90, "met"),
        (0.60, 0.69, "NOT met"),
        (0.60, 0.70, "at the line"),
        (0.65, 0.75, "at the line"),
    ],
)
def test_the_verdict_needs_the_whole_interval_on_one_side(
    low: float, high: float, expected: str
) -> None:
    assert verdict(MedianInterval(low, high, 0.96, 12), 0.7) == expected


def test_fewer_rounds_than_the_confidence_needs_give_no_verdict() -> None:
    assert rounds_needed() == 6
    assert rounds_needed(0.75) == 3
    five = median_interval([0.8, 0.9, 0.85, 0.95, 0.99])  # all above, yet only 93.75 %
    assert verdict(five, 0.7) == "too few rounds to tell (5; 6 or more)"
    assert verdict(median_interval([0.8, 0.9, 0.85, 0.95, 0.99, 0.9]), 0.7) == "met"
