"""Read-ahead host queues on a fake clock: order, fairness, expiry, the buffer bound."""

from __future__ import annotations

import itertools
import math

from fetcher.host_queues import HostQueues
from fetcher.politeness import Politeness, PolitenessSettings
from schemas.fetch import FetchRequest
from streamcrawl.clock import FakeClock


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


class CountingPoliteness(Politeness):
    """Counts how often the queues ask a host's ready time (what a pop costs)."""

    def __init__(self, settings: PolitenessSettings, clock: FakeClock) -> None:
        super().__init__(settings, clock)
        self.asked = 0

    def host_ready_at(self, host: str) -> float:
        self.asked += 1
        return super().host_ready_at(host)

    def next_allowed_at(self, host: str) -> float:
        self.asked += 1
        return super().next_allowed_at(host)


class CountingRequest:
    """A request that counts reads of its deadline."""

    reads = 0

    def __init__(self, host: str, deadline: int) -> None:
        self.crawl_id = "crawl"
        self.host = host
        self.politeness_delay_ms = 0
        self._deadline = deadline

    @property
    def deadline(self) -> int:
        CountingRequest.reads += 1
        return self._deadline


def test_a_pop_asks_about_a_few_hosts_not_every_queued_one() -> None:
    clock = FakeClock()
    politeness = CountingPoliteness(PolitenessSettings(latency_factor=0), clock)
    queues: HostQueues[FetchRequest] = HostQueues(politeness, clock, capacity=100_000)
    hosts = [f"h{n}.example" for n in range(2000)]
    for host in hosts:
        queues.push(_request(clock, host, "/1", delay_ms=1000))
        queues.push(_request(clock, host, "/2", delay_ms=1000))
    clock.advance(1.0)
    politeness.asked = 0
    served = []
    while (item := queues.pop_ready()) is not None:
        served.append(item[0].host)
        politeness.release(item[1], status=200)
    assert served == hosts, "every host once, in the order they arrived; the rest wait 1 s"
    assert politeness.asked <= 8 * len(hosts), "a few questions per pop, not one per host"
    assert queues.next_ready_at() == clock.monotonic() + 1.0
    clock.advance(1.0)
    assert [queues.pop_ready() is not None for _ in range(3)] == [True] * 3


def test_expiry_reads_only_the_deadlines_that_passed() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=0, per_host_concurrency=5), clock)
    queues: HostQueues[CountingRequest] = HostQueues(politeness, clock, capacity=100_000)
    for n in range(2000):
        queues.push(CountingRequest(f"h{n % 50}.example", clock.now_ms() + 600_000))
    queues.push(CountingRequest("h0.example", clock.now_ms() + 10))
    clock.advance(0.01)
    CountingRequest.reads = 0
    dropped = queues.drop_expired()
    for _ in range(100):
        item = queues.pop_ready()
        assert item is not None
        politeness.release(item[1], status=200)
    assert len(dropped) == 1 and len(queues) == 1900
    assert CountingRequest.reads <= 2


def test_a_release_makes_a_busy_host_ready_again_at_once() -> None:
    clock = FakeClock()
    queues, politeness = _queues(clock)
    queues.push(_request(clock, "a.example", "/1"))
    queues.push(_request(clock, "a.example", "/2"))
    first = queues.pop_ready()
    assert first is not None
    assert queues.pop_ready() is None and queues.next_ready_at() == math.inf
    politeness.release(first[1], status=200)
    assert queues.next_ready_at() == clock.monotonic()
    second = queues.pop_ready()
    assert second is not None and second[0].url == "http://a.example/2"


def test_a_shorter_robots_delay_moves_the_host_forward() -> None:
    clock = FakeClock()
    queues, politeness = _queues(clock)
    politeness.set_robots_delay("a.example", 30.0)
    queues.push(_request(clock, "a.example", "/1"))
    assert queues.next_ready_at() == clock.monotonic() + 30.0
    politeness.set_robots_delay("a.example", 2.0)
    assert queues.next_ready_at() == clock.monotonic() + 2.0


def test_a_longer_delay_found_at_the_top_is_waited_for() -> None:
    clock = FakeClock()
    queues, politeness = _queues(clock)
    queues.push(_request(clock, "a.example", "/1"))
    grant = politeness.try_acquire("a.example")  # someone else takes the host's turn
    assert grant is not None
    assert queues.pop_ready() is None
    politeness.cancel(grant)
    assert queues.pop_ready() is not None


def test_hosts_ready_together_take_turns_at_scale() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(per_host_concurrency=100), clock)
    queues: HostQueues[FetchRequest] = HostQueues(politeness, clock)
    hosts = [f"h{n}.example" for n in range(7)]
    for n in range(4):
        for host in hosts:
            queues.push(_request(clock, host, f"/{n}"))
    served: list[str] = []
    while (item := queues.pop_ready()) is not None:
        served.append(item[0].host)
    assert served == hosts * 4


def test_handed_out_and_expired_entries_do_not_pile_up() -> None:
    clock = FakeClock()
    politeness = Politeness(PolitenessSettings(latency_factor=0), clock)
    queues: HostQueues[FetchRequest] = HostQueues(politeness, clock, capacity=100_000)
    for round_ in range(50):
        for n in range(100):
            queues.push(_request(clock, f"h{n}.example", f"/{round_}", ttl_ms=10_000))
        while (item := queues.pop_ready()) is not None:
            politeness.release(item[1], status=200)
    assert len(queues) == 0
    assert len(queues._by_deadline) <= 2 * 100 + 64
    assert len(queues._ready) <= 2 * 100 + 64


def test_an_expired_request_behind_others_is_skipped_in_order() -> None:
    clock = FakeClock()
    queues, politeness = _queues(clock)
    queues.push(_request(clock, "a.example", "/1"))
    queues.push(_request(clock, "a.example", "/short", ttl_ms=500))
    queues.push(_request(clock, "a.example", "/3"))
    clock.advance(1.0)
    urls = []
    while (item := queues.pop_ready()) is not None:
        urls.append(item[0].url)
        politeness.release(item[1], status=200)
    assert urls == ["http://a.example/1", "http://a.example/3"]
    assert [request.url for request in queues.drop_expired()] == ["http://a.example/short"]
