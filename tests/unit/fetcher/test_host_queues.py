"""Read-ahead host queues on a fake clock: order, fairness, expiry, the buffer bound."""

from __future__ import annotations

import itertools
import math

from fetcher.clock import FakeClock
from fetcher.host_queues import HostQueues
from fetcher.politeness import Politeness, PolitenessSettings
from schemas.fetch import FetchRequest


def _request(
    clock: FakeClock, host: str, path: str, delay_ms: int = 0, ttl_ms: int = 600_000
) -> FetchRequest:
    return FetchRequest(
        crawl_id="crawl",
        url=f"http://{host}{path}",
        host=host,
        depth=0,
        lease_id=f"{host}{path}",
        deadline=clock.now_ms() + ttl_ms,
        politeness_delay_ms=delay_ms,
    )


def _queues(clock: FakeClock) -> tuple[HostQueues[FetchRequest], Politeness]:
    politeness = Politeness(PolitenessSettings(latency_factor=0), clock)
    return HostQueues(politeness, clock, capacity=100), politeness


def test_requests_of_one_host_leave_in_order_one_delay_apart() -> None:
    clock = FakeClock()
    queues, politeness = _queues(clock)
    for path in ("/1", "/2", "/3"):
        queues.push(_request(clock, "a.example", path, delay_ms=2000))
    popped = []
    for _ in range(20):
        next_at = queues.next_ready_at()
        if next_at is None:
            break
        clock.advance(max(next_at - clock.monotonic(), 0.0))
        item = queues.pop_ready()
        assert item is not None
        request, grant = item
        popped.append((request.url, grant.started_at))
        politeness.release(grant, status=200)
    assert [url for url, _ in popped] == [f"http://a.example/{n}" for n in (1, 2, 3)]
    starts = [started for _, started in popped]
    assert starts[0] - 1000.0 >= 2.0, "a new host waits one delay"
    assert all(later - earlier >= 2.0 for earlier, later in itertools.pairwise(starts))


def test_a_host_with_a_long_delay_does_not_hold_back_others() -> None:
    clock = FakeClock()
    queues, politeness = _queues(clock)
    queues.push(_request(clock, "slow.example", "/1", delay_ms=60_000))
    queues.push(_request(clock, "slow.example", "/2", delay_ms=60_000))
    for n in range(5):
        queues.push(_request(clock, "fast.example", f"/{n}", delay_ms=1000))
    order = []
    for _ in range(50):
        next_at = queues.next_ready_at()
        if next_at is None or next_at > clock.monotonic() + 30:
            break
        clock.advance(max(next_at - clock.monotonic(), 0.0))
        item = queues.pop_ready()
        assert item is not None
        order.append(item[0].host)
        politeness.release(item[1], status=200)
    assert order == ["fast.example"] * 5
    assert len(queues) == 2


def test_a_host_busy_with_a_request_does_not_hold_back_others() -> None:
    clock = FakeClock()
    queues, politeness = _queues(clock)
    for host in ("slow.example", "fast.example"):
        for n in range(3):
            queues.push(_request(clock, host, f"/{n}"))
    first = queues.pop_ready()
    assert first is not None and first[0].host == "slow.example"
    hosts: list[str] = []
    while len(hosts) < 10 and (item := queues.pop_ready()) is not None:
        hosts.append(item[0].host)
        politeness.release(item[1], status=200)
    assert hosts == ["fast.example"] * 3
    assert queues.next_ready_at() == math.inf


def test_expired_leases_are_dropped_never_handed_out() -> None:
    clock = FakeClock()
    queues, _ = _queues(clock)
    queues.push(_request(clock, "a.example", "/short", ttl_ms=1000))
    queues.push(_request(clock, "a.example", "/long", ttl_ms=100_000))
    queues.push(_request(clock, "b.example", "/short", ttl_ms=1000))
    clock.advance(1.0)
    item = queues.pop_ready()
    assert item is not None and item[0].url == "http://a.example/long"
    dropped = queues.drop_expired()
    assert sorted(request.url for request in dropped) == [
        "http://a.example/short",
        "http://b.example/short",
    ]
    assert len(queues) == 0
    assert queues.drop_expired() == []
    assert queues.next_ready_at() is None


def test_buffer_bound_and_resume_hysteresis() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(), clock)
    queues: HostQueues[FetchRequest] = HostQueues(politeness, clock, capacity=4, resume_below=2)
    for n in range(4):
        assert not queues.full
        queues.push(_request(clock, f"h{n}.example", "/"))
    assert queues.full and not queues.can_resume
    queues.push(_request(clock, "late.example", "/"))
    assert len(queues) == 5
    for _ in range(3):
        item = queues.pop_ready()
        assert item is not None
        politeness.release(item[1], status=200)
    assert not queues.full and not queues.can_resume
    item = queues.pop_ready()
    assert item is not None
    assert queues.can_resume


def test_remove_where_takes_a_revoked_partition_out() -> None:
    clock = FakeClock()
    queues, _ = _queues(clock)
    for host in ("a.example", "b.example", "c.example"):
        queues.push(_request(clock, host, "/1"))
        queues.push(_request(clock, host, "/2"))
    removed = queues.remove_where(lambda request: request.host != "b.example")
    assert len(removed) == 4
    assert queues.hosts() == ["b.example"]
    assert len(queues) == 2


def test_hosts_ready_together_take_turns() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(per_host_concurrency=5), clock)
    queues: HostQueues[FetchRequest] = HostQueues(politeness, clock)
    for n in range(3):
        for host in ("a.example", "b.example"):
            queues.push(_request(clock, host, f"/{n}"))
    hosts: list[str] = []
    while len(hosts) < 10 and (item := queues.pop_ready()) is not None:
        hosts.append(item[0].host)
    assert hosts == ["a.example", "b.example"] * 3


def test_requeue_puts_a_request_back_at_the_head() -> None:
    clock = FakeClock()
    queues, politeness = _queues(clock)
    queues.push(_request(clock, "a.example", "/1"))
    queues.push(_request(clock, "a.example", "/2"))
    item = queues.pop_ready()
    assert item is not None
    politeness.release(item[1], status=200)
    queues.requeue(item[0])
    assert len(queues) == 2
    again = queues.pop_ready()
    assert again is not None and again[0].url == "http://a.example/1"
