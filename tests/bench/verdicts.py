"""A benchmark target's verdict from rounds that scatter: met, NOT met, or at the line.

A round's ratio (the candidate against a baseline measured beside it) moves with the shared
machine's phase by 15-25 % from round to round (tests/bench/RESULTS.md). The median of a few rounds
then cannot say "met" when it lands a few per cent from its target, and a verdict read off it
flips from run to run. So the verdict comes from an interval for the median of the rounds' ratios
instead.

The interval is distribution-free: for n rounds sorted, the k-th smallest and the k-th largest
enclose the median of the distribution they come from with probability
``1 - 2 P(B < k)``, B binomial(n, 1/2), whatever that distribution is (the order-statistic
interval for a quantile). k is the largest that keeps that coverage at or above the confidence
asked for. Fewer than 6 rounds cannot reach 95 %: the interval is then the smallest and the largest
round, and its coverage (75 % for 3 rounds, 93.75 % for 5) is reported with it.

- met: the whole interval is at or above the target;
- NOT met: the whole interval is below it;
- at the line: the interval contains the target, so these rounds cannot tell;
- too few rounds: the interval's coverage is below the confidence asked for (fewer than 6
  rounds for 95 %), so it cannot tell either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

CONFIDENCE = 0.95


@dataclass(frozen=True)
class MedianInterval:
    low: float
    high: float
    coverage: float
    """The probability that the interval holds the median of the rounds' distribution."""
    rounds: int

    def describe(self) -> str:
        return (
            f"{self.low:.2f}-{self.high:.2f} holds the median with {self.coverage:.1%} "
            f"confidence ({self.rounds} rounds)"
        )


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> MedianInterval:
    """The order-statistic interval of the module docstring for the median of `values`."""
    rounds = len(values)
    if rounds == 0:
        raise ValueError("no rounds to judge")
    ordered = sorted(values)
    k = 1
    while k < (rounds + 1) // 2 and _coverage(rounds, k + 1) >= confidence:
        k += 1
    return MedianInterval(ordered[k - 1], ordered[rounds - k], _coverage(rounds, k), rounds)


def _coverage(rounds: int, k: int) -> float:
    """P(the k-th smallest <= median <= the k-th largest) for `rounds` independent rounds."""
    below = sum(comb(rounds, i) for i in range(k))
    return 1 - 2 * below / (1 << rounds)


def rounds_needed(confidence: float = CONFIDENCE) -> int:
    """The fewest rounds whose smallest and largest hold the median with `confidence`."""
    rounds = 1
    while _coverage(rounds, 1) < confidence:
        rounds += 1
    return rounds


def verdict(interval: MedianInterval, target: float, confidence: float = CONFIDENCE) -> str:
    """The verdict of the module docstring on ratios that should be at least `target`."""
    if interval.coverage < confidence:
        return f"too few rounds to tell ({interval.rounds}; {rounds_needed(confidence)} or more)"
    if interval.low >= target:
        return "met"
    if interval.high < target:
        return "NOT met"
    return "at the line"
