"""Backoff schedule, Retry-After, outcome classification and the host lease window."""

from __future__ import annotations

import random
from typing import Any

import pytest

from frontier.retry import (
    DEFAULT_CAP_MS,
    DEFAULT_RECOVERY_SUCCESSES,
    RETRY_AFTER_CAP_MS,
    LeaseWindow,
    OutcomeVerdict,
    RetryPolicy,
    backoff_ceiling_ms,
    classify,
    is_success,
    is_throttle,
    normal_window,
    retry_delay_ms,
    window_after,
)
from schemas.outcomes import FetchOutcome
from streamcrawl.clock import FakeClock

DRAWS = 300


def outcome(kind: str, **fields: Any) -> FetchOutcome:
    return FetchOutcome.model_validate(
        {
            "crawl_id": "c",
            "url": "https://example.com/a",
            "host": "example.com",
            "lease_id": "l1",
            "kind": kind,
            "fetched_at": 1_700_000_000_000,
            **fields,
        }
    )


@pytest.mark.parametrize("attempt", range(1, 12))
def test_full_jitter_stays_within_the_exponential_ceiling(attempt: int) -> None:
    rng = random.Random(attempt)
    ceiling = min(DEFAULT_CAP_MS, 1000 * 2 ** (attempt - 1))
    assert backoff_ceiling_ms(attempt) == ceiling
    delays = [retry_delay_ms(attempt, rng=rng) for _ in range(DRAWS)]
    assert all(0 <= delay <= ceiling for delay in delays)
    # Jitter spreads over the whole range: 300 draws all in one half would be a 2^-300 fluke.
    assert max(delays) >= ceiling // 2
    assert min(delays) <= ceiling // 2


def test_the_cap_bounds_every_attempt() -> None:
    rng = random.Random(1)
    for attempt in (20, 50, 100, 10_000):
        assert backoff_ceiling_ms(attempt, cap_ms=60_000) == 60_000
        assert retry_delay_ms(attempt, rng=rng, cap_ms=60_000) <= 60_000
    with pytest.raises(ValueError):
        retry_delay_ms(0, rng=rng)


def test_decorrelated_jitter_never_retries_sooner_than_base() -> None:
    rng = random.Random(7)
    previous = None
    for attempt in range(1, 40):
        delay = retry_delay_ms(
            attempt, rng=rng, jitter="decorrelated", previous_delay_ms=previous, cap_ms=30_000
        )
        upper = min(30_000, 3 * max(previous or 1000, 1000))
        assert 1000 <= delay <= upper
        previous = delay


def test_retry_after_is_a_floor_capped_at_one_hour() -> None:
    rng = random.Random(3)
    retry_after_s = 120  # "Retry-After: 120" arrives as seconds; the outcome carries ms
    for attempt in range(1, 6):
        delay = retry_delay_ms(attempt, rng=rng, retry_after_ms=retry_after_s * 1000)
        assert delay >= retry_after_s * 1000
    two_hours = 7_200_000
    assert retry_delay_ms(1, rng=rng, retry_after_ms=two_hours) == RETRY_AFTER_CAP_MS
    # The server's word beats our own cap, up to an hour.
    assert retry_delay_ms(1, rng=rng, cap_ms=5_000, retry_after_ms=60_000) == 60_000
    delay = retry_delay_ms(1, rng=rng, jitter="decorrelated", retry_after_ms=30_000)
    assert delay >= 30_000


def test_seeded_rng_makes_the_schedule_reproducible() -> None:
    first = [retry_delay_ms(n, rng=random.Random(42)) for n in range(1, 8)]
    again = [retry_delay_ms(n, rng=random.Random(42)) for n in range(1, 8)]
    assert first == again


def test_policy_due_time_is_at_least_now_plus_retry_after() -> None:
    clock = FakeClock()
    policy = RetryPolicy(clock=clock, rng=random.Random(5))
    clock.advance(3.5)
    now = clock.now_ms()
    due = policy.due_ms(2, retry_after_ms=90_000)
    assert due >= now + 90_000
    assert now <= policy.due_ms(1) <= now + 1000
    clock.advance_ms(10)
    assert policy.due_ms(1) >= now + 10


@pytest.mark.parametrize(
    ("kind", "fields", "attempts", "expected"),
    [
        ("done", {"status": 200}, 1, OutcomeVerdict("done")),
        ("unchanged", {"status": 304}, 1, OutcomeVerdict("unchanged")),
        ("redirect", {"redirect_to": "https://example.com/b"}, 1, OutcomeVerdict("redirect")),
        ("redirect", {}, 1, OutcomeVerdict("dead", "redirect_no_target")),
        ("redirect", {"redirect_to": "https://e.com/", "redirect_hops": 2}, 1, ("redirect", None)),
        (
            "redirect",
            {"redirect_to": "https://e.com/", "redirect_hops": 3},
            1,
            OutcomeVerdict("dead", "too_many_redirects"),
        ),
        ("retryable", {"status": 503}, 1, OutcomeVerdict("retry")),
        ("retryable", {"error": "timeout"}, 3, OutcomeVerdict("retry")),
        ("retryable", {"status": 500}, 4, OutcomeVerdict("dead", "retries_exhausted")),
        ("permanent", {"status": 404}, 1, OutcomeVerdict("dead", "permanent")),
        ("robots_denied", {}, 1, OutcomeVerdict("dead", "robots_denied")),
    ],
)
def test_classification_table(
    kind: str, fields: dict[str, Any], attempts: int, expected: tuple[str, str | None]
) -> None:
    verdict = classify(outcome(kind, **fields), attempts, max_retries=3, max_redirects=3)
    assert verdict == expected


def test_zero_retries_means_the_first_failure_is_dead_and_redirect_cap_is_optional() -> None:
    assert classify(outcome("retryable"), 1, 0) == ("dead", "retries_exhausted")
    far = outcome("redirect", redirect_to="https://e.com/", redirect_hops=40)
    assert classify(far, 1, 3) == ("redirect", None)
    assert classify(far, 1, 3, max_redirects=0) == ("dead", "too_many_redirects")


def test_normal_window() -> None:
    assert normal_window(1000, 8) == 2
    assert normal_window(10_000, 8) == 1
    assert normal_window(0, 1) == 2
    assert normal_window(0, 6) == 6


def test_throttle_shrinks_the_window_and_successes_grow_it_back() -> None:
    n = DEFAULT_RECOVERY_SUCCESSES
    normal = 4
    window = LeaseWindow()
    assert window.limit(normal) == 4
    window = window_after(window, outcome("retryable", status=429), normal)
    assert window.limit(normal) == 1
    assert window.may_lease(0, normal)
    assert not window.may_lease(1, normal)
    for expected_limit in (2, 3):
        for _ in range(n - 1):
            window = window_after(window, outcome("done", status=200), normal)
        assert window.limit(normal) == expected_limit - 1
        window = window_after(window, outcome("done", status=200), normal)
        assert window.limit(normal) == expected_limit
    # Failures that are not throttles neither shrink nor count toward recovery.
    for _ in range(3 * n):
        window = window_after(window, outcome("retryable", status=500), normal)
    assert window.limit(normal) == 3
    for _ in range(n):
        window = window_after(window, outcome("unchanged", status=304), normal)
    assert window == LeaseWindow()
    assert window.limit(normal) == 4


def test_a_new_throttle_during_recovery_starts_over() -> None:
    window = LeaseWindow().after_outcome(throttled=True, success=False, normal=2)
    for _ in range(DEFAULT_RECOVERY_SUCCESSES - 1):
        window = window.after_outcome(throttled=False, success=True, normal=2)
    window = window.after_outcome(throttled=True, success=False, normal=2)
    assert window == LeaseWindow(reduced=1, successes=0)
    for _ in range(DEFAULT_RECOVERY_SUCCESSES):
        window = window.after_outcome(throttled=False, success=True, normal=2)
    assert window == LeaseWindow()


def test_the_window_follows_a_changed_normal_and_custom_recovery() -> None:
    window = LeaseWindow(reduced=3)
    assert window.limit(2) == 2  # the normal window shrank below the recovering limit
    window = LeaseWindow(reduced=1).after_outcome(
        throttled=False, success=True, normal=1, recovery_successes=1
    )
    assert window == LeaseWindow()


def test_throttle_and_success_read_from_outcomes() -> None:
    assert is_throttle(outcome("retryable", status=429))
    assert is_throttle(outcome("retryable", status=503))
    assert not is_throttle(outcome("retryable", status=500))
    assert is_success(outcome("redirect", redirect_to="https://e.com/"))
    assert not is_success(outcome("permanent", status=404))
    assert not is_success(outcome("retryable", error="timeout"))
