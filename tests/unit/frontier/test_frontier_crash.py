"""A frontier partition that dies between delivery and commit, restored like the kernel restores it.

`Simulation.crash_after_delivery` handles one input and the tick in one cycle, delivers their
outputs, then rebuilds the partition keeping the tick's writes and dropping the input's, and hands
the input over again. Before the gauges were recounted on opening and inputs' counters kept apart
(`frontier.reconcile`, `frontier.session`), such a crash left a URL counted as queued that was not,
and the crawl never became done (the intermittent `after_delivery` fault test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from frontier.records import CRAWL, HOSTS, LEASES, CrawlRecord, HostState
from schemas.seeds import CrawlRequest
from streamcrawl.state import Transaction
from tests.unit.frontier.simulation import Simulation

A = "https://a.example"
B = "https://b.example"
C = "https://c.example"
SITE = {
    f"{A}/": [f"{A}/1", f"{A}/2", f"{B}/x", f"{C}/"],
    f"{A}/1": [f"{A}/3", f"{B}/y"],
    f"{A}/2": [f"{A}/4"],
    f"{B}/x": [f"{B}/z", f"{A}/5"],
    f"{B}/y": [f"{A}/6"],
    f"{C}/": [f"{C}/a", f"{A}/1"],
    f"{C}/a": [f"{B}/q"],
}
INPUTS = ("outcomes", "urls", "budget", "seeds")


def crawl(
    root: Path, *, partitions: int, seed: int, crash_at: set[int], max_links: int = -1
) -> Simulation:
    """Crawl SITE to the end, the partition of the next input crashing before steps `crash_at`."""
    sim = Simulation(root, partitions=partitions, site=SITE, seed=seed)
    request = CrawlRequest(
        crawl_id="c",
        seeds=[f"{A}/"],
        max_depth=3,
        politeness_delay_ms=0,
        same_domain="any",
        max_links=max_links,
    )
    sim.start(request)
    step = 0
    while True:
        if step in crash_at:
            sim.crash_after_delivery([getattr(sim.topics, name) for name in INPUTS])
        if not sim.step():
            break
        step += 1
    sim.settle(until=lambda: sim.status("c") == "done")
    return sim


def test_the_seed_crawl_that_stranded_a_queued_count_now_finishes(tmp_path: Path) -> None:
    """The crash replays DiscoveredUrls whose URL the same cycle's tick leased: the URL counted
    queued twice, leased once, and one queued count stayed for ever."""
    sim = crawl(tmp_path, partitions=2, seed=0, crash_at={5})
    assert sim.status("c") == "done"
    assert sim.total("c", "queued") == 0
    assert sim.total("c", "leased") == 0
    assert set(sim.fetched_urls("c")) == set(SITE) | {f"{A}/{n}" for n in (3, 4, 5, 6)} | {
        f"{B}/z",
        f"{B}/q",
    }
    sim.close()


@pytest.mark.parametrize(("partitions", "seed"), [(2, 0), (3, 1)])
def test_crashes_at_every_step_lose_nothing_and_the_crawl_ends(
    tmp_path: Path, partitions: int, seed: int
) -> None:
    reference = crawl(tmp_path / "reference", partitions=partitions, seed=seed, crash_at=set())
    expected = set(reference.fetched_urls("c"))
    steps = len(reference.fetches) * 3  # about the crawl's length in deliveries
    reference.close()
    for step in range(1, steps, steps // 10):
        sim = crawl(tmp_path / f"crash-{step}", partitions=partitions, seed=seed, crash_at={step})
        assert sim.status("c") == "done", f"crash before step {step}"
        fetched = sim.fetched_urls("c")
        assert set(fetched) == expected, f"crash before step {step}"
        # A lease the crashed cycle made may be fetched again, nothing else.
        assert len(fetched) - len(expected) <= 2, f"crash before step {step}"
        # Fetched twice or not, each URL counts once by its last outcome.
        assert sim.total("c", "outcome_200") == len(expected), f"crash before step {step}"
        for partition in range(partitions):
            record = sim.record("c", partition)
            if record is not None:
                assert record.unfinished == {}, (step, partition)
        sim.close()


def test_a_finite_budget_stays_a_hard_cap_through_crashes(tmp_path: Path) -> None:
    for step in range(0, 30, 5):
        sim = crawl(tmp_path / f"crash-{step}", partitions=2, seed=2, crash_at={step}, max_links=5)
        assert sim.status("c") == "done", f"crash before step {step}"
        assert len(set(sim.fetched_urls("c"))) == 5, f"crash before step {step}"
        sim.close()


def test_opening_a_partition_recounts_its_gauges_from_the_tables(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, site=SITE, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id="c", seeds=[f"{A}/", f"{A}/1", f"{B}/x"]))
    sim.run()
    before = sim.record("c", 0)
    assert before is not None
    leases = sim.stores[0].count(LEASES)
    assert before.counters["leased"] == leases
    # Gauges as a crash could leave them: counted twice, a host slot held by no lease.
    skewed = CrawlRecord.decode(before.encode())
    skewed.counters["queued"] += 3
    skewed.counters["leased"] += 2
    skewed.unfinished["0"] += 5
    skewed.unfinished["7"] = 1
    transaction = Transaction(sim.stores[0])
    transaction.put(CRAWL, b"c", skewed.encode(), None)
    transaction.put(HOSTS, b"c.example", HostState(in_flight=1).encode(), None)
    sim.stores[0].write(transaction.writes, "changelog", None)
    sim.restart(0)
    after = sim.record("c", 0)
    assert after is not None
    assert after.counters["queued"] == before.counters["queued"]
    assert after.counters["leased"] == leases
    assert after.unfinished == before.unfinished
    assert sim.stores[0].get(HOSTS, b"c.example") is None  # idle hosts have no record
    sim.close()
