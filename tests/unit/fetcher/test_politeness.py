"""Politeness slots on a manual clock: gaps, delays' sources, adaptation, concurrency."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fetcher.politeness import Grant, Politeness, PolitenessSettings
from streamcrawl.clock import FakeClock

HOST = "example.com"
EPSILON = 1e-9
"""Float rounding of ``(start + delay) - start``; a real clock never lands this close."""


def _grant(politeness: Politeness, clock: FakeClock, host: str = HOST) -> Grant:
    """Move the clock to the host's next allowed time and take the grant."""
    at = politeness.next_allowed_at(host)
    assert at < math.inf
    clock.advance(max(at - clock.monotonic(), 0.0))
    grant = politeness.try_acquire(host)
    assert grant is not None
    return grant


@given(
    crawl_delay=st.floats(0, 30),
    robots_delay=st.one_of(st.none(), st.floats(0, 500)),
    latencies=st.lists(st.floats(0, 20), min_size=2, max_size=15),
    statuses=st.lists(st.sampled_from([200, 200, 404, 429, 500, 503, None]), min_size=15),
)
@settings(max_examples=150, deadline=None)
def test_smallest_gap_between_two_grants_is_at_least_the_delay(
    crawl_delay: float,
    robots_delay: float | None,
    latencies: list[float],
    statuses: list[int | None],
) -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(), clock)
    politeness.note_request(HOST, "crawl", crawl_delay)
    politeness.set_robots_delay(HOST, robots_delay)
    floor = max(crawl_delay, min(robots_delay or 0.0, 60.0))
    starts: list[float] = []
    for latency, status in zip(latencies, statuses, strict=False):
        politeness.note_request(HOST, "crawl", crawl_delay)  # every queued request does this
        delay = politeness.delay(HOST)
        assert delay >= floor
        grant = _grant(politeness, clock)
        if starts:
            assert grant.started_at - starts[-1] >= delay - EPSILON
        starts.append(grant.started_at)
        clock.advance(latency)
        politeness.release(grant, status=status)
    assert all(later - earlier >= floor - EPSILON for earlier, later in itertools.pairwise(starts))


def test_a_new_host_waits_one_delay_before_its_first_request() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(), clock)
    politeness.note_request(HOST, "crawl", 5.0)
    assert politeness.try_acquire(HOST) is None
    assert politeness.next_allowed_at(HOST) == clock.monotonic() + 5.0
    clock.advance(5.0)
    assert politeness.try_acquire(HOST) is not None


def test_delay_is_the_largest_source_and_inactive_crawls_stop_counting() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(min_delay_s=0.5, crawl_activity_s=100), clock)
    assert politeness.delay(HOST) == 0.5
    politeness.note_request(HOST, "slow-crawl", 8.0)
    politeness.note_request(HOST, "fast-crawl", 2.0)
    assert politeness.delay(HOST) == 8.0
    politeness.set_robots_delay(HOST, 3600)
    assert politeness.delay(HOST) == 60.0
    politeness.set_robots_delay(HOST, None)
    clock.advance(101)
    politeness.note_request(HOST, "fast-crawl", 2.0)
    assert politeness.delay(HOST) == 2.0


def test_a_stopped_crawl_stops_counting_at_once_and_its_late_requests_count_for_nothing() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(crawl_activity_s=600), clock)
    changed: list[str] = []
    politeness.subscribe(changed.append)
    for host in (HOST, "other.example"):
        politeness.note_request(host, "slow-crawl", 8.0)
        politeness.note_request(host, "fast-crawl", 0.5)
    politeness.note_request("third.example", "fast-crawl", 0.5)
    changed.clear()
    politeness.crawl_stopped("slow-crawl")  # paused, done or cancelled
    assert sorted(changed) == ["example.com", "other.example"]  # their waits are redone
    assert politeness.delay(HOST) == politeness.delay("other.example") == 0.5
    politeness.note_request(HOST, "slow-crawl", 8.0)  # fetched already, or on its way
    assert politeness.delay(HOST) == 0.5
    politeness.crawl_started("slow-crawl")  # resumed
    politeness.note_request(HOST, "slow-crawl", 8.0)
    assert politeness.delay(HOST) == 8.0


def test_retry_after_blocks_the_host_capped_at_an_hour() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=0), clock)
    grant = _grant(politeness, clock)
    politeness.release(grant, status=429, retry_after_s=7200)
    assert politeness.next_allowed_at(HOST) == clock.monotonic() + 3600
    clock.advance(3599)
    assert politeness.try_acquire(HOST) is None
    clock.advance(1)
    assert politeness.try_acquire(HOST) is not None


@pytest.mark.parametrize("status", [429, 503])
def test_overload_doubles_the_adaptive_delay_up_to_its_cap(status: int) -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=0, max_adaptive_delay_s=10), clock)
    seen = []
    for _ in range(6):
        politeness.release(_grant(politeness, clock), status=status)
        seen.append(politeness.delay(HOST))
    assert seen == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    politeness.release(_grant(politeness, clock), status=200)
    assert politeness.delay(HOST) == 5.0


@pytest.mark.parametrize("status", [200, 404, 500, 502, 504, None])
def test_other_answers_do_not_back_off(status: int | None) -> None:
    """Only 429 and 503 say "slow down"; other errors leave the delay to latency alone."""
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=0), clock)
    politeness.release(_grant(politeness, clock), status=status)
    assert politeness.delay(HOST) == 0.0


def test_rising_latency_slows_down_at_once_and_recovers_halfway() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=2.0), clock)
    grant = _grant(politeness, clock)
    clock.advance(3.0)
    politeness.release(grant, status=200)
    assert politeness.delay(HOST) == 6.0
    grant = _grant(politeness, clock)
    clock.advance(1.0)
    politeness.release(grant, status=200)
    assert politeness.delay(HOST) == 4.0
    grant = _grant(politeness, clock)
    clock.advance(0.5)
    politeness.release(grant, status=None)
    assert politeness.delay(HOST) == 4.0, "an error without a response never lowers the delay"


def test_per_host_and_global_concurrency() -> None:
    clock = FakeClock()
    politeness = Politeness(
        PolitenessSettings(per_host_concurrency=2, global_concurrency=3, latency_factor=0), clock
    )
    a1, a2 = _grant(politeness, clock, "a"), _grant(politeness, clock, "a")
    assert politeness.next_allowed_at("a") == math.inf
    b1 = _grant(politeness, clock, "b")
    assert politeness.active == 3
    assert politeness.next_allowed_at("c") == math.inf
    politeness.release(b1, status=200)
    assert politeness.try_acquire("c") is not None
    politeness.release(a1, status=200)
    assert politeness.try_acquire("a") is not None
    politeness.release(a2, status=200)


def test_release_twice_is_a_bug_and_forget_waits_for_in_flight_grants() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(), clock)
    grant = _grant(politeness, clock)
    politeness.forget(HOST)
    assert politeness.active == 1
    politeness.release(grant, status=200)
    assert politeness.active == 0
    with pytest.raises(ValueError, match="already released"):
        politeness.release(grant, status=200)


def test_prune_forgets_idle_slots_only() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(idle_slot_s=100), clock)
    busy = _grant(politeness, clock, "busy")
    politeness.release(_grant(politeness, clock, "idle"), status=200)
    politeness.release(_grant(politeness, clock, "blocked"), status=429, retry_after_s=1000)
    clock.advance(101)
    assert politeness.prune() == 1
    politeness.release(busy, status=200)


def test_a_cancelled_grant_does_not_count_as_a_request() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=0), clock)
    politeness.note_request(HOST, "crawl", 4.0)
    first = _grant(politeness, clock)
    politeness.release(first, status=200)
    unused = _grant(politeness, clock)
    politeness.cancel(unused)
    assert politeness.next_allowed_at(HOST) == first.started_at + 4.0
    assert politeness.try_acquire(HOST) is not None


def test_the_gap_counts_from_the_send_with_a_margin() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=0), clock)
    politeness.note_request(HOST, "crawl", 1.0)
    grant = _grant(politeness, clock)
    clock.advance(0.4)  # robots.txt check, a new connection's handshake
    politeness.mark_sent(grant)
    sent_at = clock.monotonic()
    politeness.release(grant, status=200)
    margin = max(0.005, 0.02 * 1.0)
    assert politeness.next_allowed_at(HOST) >= sent_at + 1.0 + margin
    assert politeness.next_allowed_at(HOST) == pytest.approx(sent_at + 1.0 + margin)


def test_the_margin_is_two_percent_of_a_long_delay_and_none_without_a_delay() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=0), clock)
    politeness.note_request("slow.example", "crawl", 10.0)
    politeness.note_request("fast.example", "crawl", 0.0)
    slow, fast = (
        _grant(politeness, clock, "slow.example"),
        _grant(politeness, clock, "fast.example"),
    )
    politeness.mark_sent(slow)
    politeness.mark_sent(fast)
    now = clock.monotonic()
    politeness.release(slow, status=200)
    politeness.release(fast, status=200)
    assert politeness.next_allowed_at("slow.example") == pytest.approx(now + 10.0 + 0.2)
    assert politeness.next_allowed_at("fast.example") == now


def test_the_gap_counts_from_the_answer_when_it_came_later_than_the_send_and_margin() -> None:
    """The server noted the request before it answered: a slow intake cannot shorten the gap."""
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=0), clock)
    politeness.note_request(HOST, "crawl", 1.0)
    grant = _grant(politeness, clock)
    politeness.mark_sent(grant)
    clock.advance(0.3)
    answered_at = clock.monotonic()
    clock.advance(0.2)  # the body streams
    politeness.release(grant, status=301, answered_at=answered_at)
    assert politeness.next_allowed_at(HOST) == pytest.approx(answered_at + 1.0)


def test_without_an_answer_the_gap_counts_from_the_release() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=0), clock)
    politeness.note_request(HOST, "crawl", 1.0)
    grant = _grant(politeness, clock)
    politeness.mark_sent(grant)
    clock.advance(0.7)  # a reset after the server may have taken the request in
    politeness.release(grant, status=None)
    assert politeness.next_allowed_at(HOST) == pytest.approx(clock.monotonic() + 1.0)


def test_a_grant_sending_again_waits_a_delay_from_the_previous_answer() -> None:
    """robots.txt's redirect hops are requests to the host like any other."""
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=0), clock)
    politeness.note_request(HOST, "crawl", 1.0)
    grant = _grant(politeness, clock)
    politeness.mark_sent(grant)
    clock.advance(0.1)
    assert politeness.hop_wait_s(grant) == pytest.approx(1.0)
    clock.advance(1.0)
    politeness.mark_sent(grant)  # the hop
    politeness.release(grant, status=404, answered_at=clock.monotonic())
    assert politeness.next_allowed_at(HOST) == pytest.approx(clock.monotonic() + 1.0 + 0.02)
    politeness.forget(HOST)
    assert not politeness.known(HOST)
    assert politeness.hop_wait_s(grant) == 0.0, "a forgotten host's grant has nothing to wait for"


def test_latency_counts_from_the_send_and_a_late_send_report_is_ignored() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=2.0), clock)
    grant = _grant(politeness, clock)
    clock.advance(5.0)  # waiting for robots.txt is not the server's latency
    politeness.mark_sent(grant)
    clock.advance(1.0)
    politeness.release(grant, status=200)
    assert politeness.delay(HOST) == 2.0
    politeness.mark_sent(grant)  # already given back: nothing happens
    assert politeness.active == 0 and not politeness.is_outstanding(grant)


def test_listeners_hear_of_every_change_that_can_make_a_host_ready_sooner() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=0), clock)
    heard: list[str] = []
    politeness.subscribe(heard.append)
    politeness.note_request(HOST, "crawl", 1.0)
    politeness.note_request(HOST, "crawl", 1.0)  # no change, nothing to hear
    politeness.note_request(HOST, "crawl", 0.5)
    politeness.set_robots_delay(HOST, None)
    politeness.release(_grant(politeness, clock), status=200)
    politeness.cancel(_grant(politeness, clock))
    assert heard == [HOST] * 5


def test_saturated_and_the_hosts_own_ready_time() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(global_concurrency=1, latency_factor=0), clock)
    grant = _grant(politeness, clock, "a")
    assert politeness.saturated
    assert politeness.next_allowed_at("b") == math.inf
    assert politeness.host_ready_at("b") == clock.monotonic()
    assert politeness.host_ready_at("a") == math.inf, "a's own slot is busy"
    politeness.release(grant, status=200)
    assert not politeness.saturated
