"""Finished crawls purged after the retention: every key goes, other crawls' keys stay."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from frontier.config import FrontierConfig
from frontier.purge import Budget, PrefixWalk
from frontier.queues import host_of
from frontier.records import (
    CRAWL,
    DEADLINES,
    DELAYED,
    HOST_PAGES,
    HOSTS,
    LEASES,
    LEDGER,
    OWNED,
    QUEUE,
    TABLES,
    VISITED,
    CrawlRecord,
)
from schemas.seeds import CrawlRequest
from schemas.urls import DiscoveredUrl, DiscoveredUrls
from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Table, Transaction
from tests.unit.frontier.simulation import Simulation
from tests.unit.frontier.test_frontier_bfs import SITE, seed_request
from tests.unit.frontier.test_frontier_control import reachable, web_of_hosts

RETENTION_MS = FrontierConfig().finished_crawl_retention_ms
A = "https://a.example"
B = "https://b.example"
OLD = "old-crawl"
LIVE = "live-crawl"
GONE = "gone-crawl"

StoredKeys = dict[tuple[int, str, bytes], bytes]


def crawl_keys(sim: Simulation, crawl_id: str) -> StoredKeys:
    """Every stored key of a crawl, in every table of every partition: keys or values naming it,
    and `deadlines` entries of its leases (or of no lease at all)."""
    marker = crawl_id.encode()
    found: StoredKeys = {}
    for partition, store in enumerate(sim.stores):
        leases = dict(store.scan(LEASES))
        for table in TABLES:
            for key, value in store.scan(table):
                related = value
                if table == DEADLINES:
                    related = leases.get(key[8:], marker)
                if marker in key or marker in related:
                    found[(partition, table, key)] = value
    return found


def comparable(keys: StoredKeys) -> StoredKeys:
    """Stored keys with crawl records cut to their counts (progress publication moves the rest)."""
    view = dict(keys)
    for (partition, table, key), value in keys.items():
        if table == CRAWL:
            record = CrawlRecord.decode(value)
            counts = (record.counters, record.unfinished, record.waiting_budget, record.account)
            view[(partition, table, key)] = repr(counts).encode()
    return view


def hosts_tables(sim: Simulation) -> list[dict[bytes, bytes]]:
    return [dict(store.scan(HOSTS)) for store in sim.stores]


def assert_heaps_match_queues(sim: Simulation) -> None:
    for partition, store in enumerate(sim.stores):
        heap = sim.handlers[partition].memory[partition].heap
        assert heap.queued == dict(Counter(host_of(key) for key, _ in store.scan(QUEUE)))
        assert set(heap.ready_at) <= set(heap.queued)


def tick_until_purged(sim: Simulation, crawl_id: str, max_ticks: int = 2_000) -> int:
    ticks = 0
    while crawl_keys(sim, crawl_id):
        assert ticks < max_ticks, "the purge did not finish"
        sim.tick_all()
        ticks += 1
    return ticks


def test_a_done_crawl_is_purged_and_an_active_one_is_untouched(tmp_path: Path) -> None:
    config = FrontierConfig(purge_batch=7, lease_timeout_ms=4 * RETENTION_MS)
    site = web_of_hosts()
    sim = Simulation(tmp_path, partitions=3, site=site, config=config, seed=2)
    old = CrawlRequest(
        crawl_id=OLD,
        seeds=[f"{A}/"],
        max_depth=3,
        max_links=10,
        max_pages_per_host=50,
        same_domain="any",
    )
    sim.start(old)
    sim.settle(until=lambda: sim.status(OLD) == "done")
    assert sim.status(OLD) == "done"
    # The budget ran out with URLs still queued: dropped from their host queues since, so as not
    # to stand in front of other crawls' URLs there (`frontier.release`).
    assert sim.total(OLD, "dropped_done") > 0
    assert sim.total(OLD, "queued") == 0
    before = crawl_keys(sim, OLD)
    assert {table for _, table, _ in before} >= {VISITED, HOST_PAGES, CRAWL, OWNED, LEDGER}

    sim.auto_fetch = False
    seeds = [f"{A}/", "https://e.example/"]
    live = CrawlRequest(
        crawl_id=LIVE, seeds=seeds, max_depth=2, max_pages_per_host=50, same_domain="any"
    )
    sim.start(live)
    sim.run()
    assert sim.held_fetches
    live_before = comparable(crawl_keys(sim, LIVE))
    assert {table for _, table, _ in live_before} >= {VISITED, LEASES, DEADLINES, HOST_PAGES}
    hosts_before = hosts_tables(sim)

    sim.clock.advance_ms(RETENTION_MS)  # LIVE too started longer ago, but it is active
    ticks = tick_until_purged(sim, OLD)
    assert ticks > 3, "the purge should take several bounded ticks"
    assert sum(handler.purged for handler in sim.handlers) == len({p for p, _, _ in before})
    assert comparable(crawl_keys(sim, LIVE)) == live_before
    assert hosts_tables(sim) == hosts_before
    assert_heaps_match_queues(sim)
    assert sim.status(OLD) == "done"  # the `crawls` table keeps its history

    sim.auto_fetch = True
    held, sim.held_fetches = sim.held_fetches, []
    for request in held:
        sim.fetch(request)
    sim.settle(until=lambda: sim.status(LIVE) == "done")
    assert sim.status(LIVE) == "done"
    expected = reachable(site, seeds[0], 2) | reachable(site, seeds[1], 2)
    assert sorted(sim.fetched_urls(LIVE)) == sorted(expected)
    assert not crawl_keys(sim, OLD)
    sim.close()


def test_a_cancelled_crawl_s_queued_urls_go_and_host_counts_stay_true(tmp_path: Path) -> None:
    config = FrontierConfig(purge_batch=5, release_scan_limit=2, lease_timeout_ms=4 * RETENTION_MS)
    sim = Simulation(tmp_path, auto_fetch=False, config=config)
    sim.start(CrawlRequest(crawl_id="blocker", seeds=[f"{A}/{n}" for n in range(4)]))
    sim.run()
    assert len(sim.held_fetches) == 2
    sim.command("blocker", "pause")
    sim.run()
    sim.start(CrawlRequest(crawl_id=GONE, seeds=[f"{B}/"], same_domain="any"))
    sim.run()
    # Depth 1 sorts behind the paused crawl's seeds, more than the release scan looks at; in a
    # queue of their own they are reached, and dropped, all the same.
    deeper = DiscoveredUrls(
        crawl_id=GONE,
        host="a.example",
        depth=1,
        source_url=f"{B}/",
        discovered_at=1,
        urls=[DiscoveredUrl(url=f"{A}/gone/{n}") for n in range(3)],
    )
    sim.inject(sim.topics.urls, "a.example", deeper)
    sim.run()
    sim.command(GONE, "cancel")
    sim.run()
    sim.clock.advance_ms(60_000)
    sim.tick_all()
    assert sim.status(GONE) == "cancelled"
    heap = sim.handlers[0].memory[0].heap
    assert heap.queued == {"a.example": 2}  # the paused crawl's 2; the cancelled crawl's 3 dropped
    assert sim.counters(GONE, 0)["queued"] == 0
    assert sim.counters(GONE, 0)["dropped_cancelled"] == 3
    assert sim.counters(GONE, 0)["leased"] == 1
    assert sim.counters("blocker", 0)["queued"] == 2
    assert_heaps_match_queues(sim)
    blocker_before = comparable(crawl_keys(sim, "blocker"))

    sim.clock.advance_ms(RETENTION_MS)
    tick_until_purged(sim, GONE)
    assert heap.queued == {"a.example": 2}
    assert_heaps_match_queues(sim)
    [hosts] = hosts_tables(sim)
    assert set(hosts) == {b"a.example"}  # b.example's lease went with the crawl
    assert comparable(crawl_keys(sim, "blocker")) == blocker_before

    # A very late outcome brings a crawl record back; the next search purges it again.
    [late] = [request for request in sim.held_fetches if request.crawl_id == GONE]
    sim.fetch(late)
    sim.run()
    assert sim.counters(GONE, 0)["outcomes_ignored"] == 1
    sim.clock.advance_ms(config.purge_interval_ms)
    tick_until_purged(sim, GONE, max_ticks=3)

    sim.auto_fetch = True
    sim.command("blocker", "resume")
    sim.run()
    held, sim.held_fetches = sim.held_fetches, []
    for request in held:
        if request.crawl_id == "blocker":
            sim.fetch(request)
    sim.settle(until=lambda: sim.status("blocker") == "done")
    assert sorted(sim.fetched_urls("blocker")) == sorted(f"{A}/{n}" for n in range(4))
    assert_heaps_match_queues(sim)
    sim.close()


def test_a_cancelled_crawl_s_waiting_recrawls_are_purged(tmp_path: Path) -> None:
    month_hours = 30 * 24
    config = FrontierConfig(purge_batch=3)
    sim = Simulation(tmp_path, site={f"{A}/": [f"/{n}" for n in range(6)]}, config=config)
    sim.start(
        CrawlRequest(
            crawl_id="keep",
            seeds=[f"{B}/{n}" for n in range(4)],
            recrawl_interval_hours=month_hours,
        )
    )
    sim.start(CrawlRequest(crawl_id=GONE, seeds=[f"{A}/"], recrawl_interval_hours=month_hours))
    sim.settle(rounds=5)
    assert sim.total(GONE, "recrawl_scheduled") == 7
    assert sim.total("keep", "recrawl_scheduled") == 4
    sim.command(GONE, "cancel")
    sim.run()
    keep_before = comparable(crawl_keys(sim, "keep"))
    assert len([key for _, table, key in crawl_keys(sim, GONE) if table == DELAYED]) == 7

    sim.clock.advance_ms(RETENTION_MS + 1)
    tick_until_purged(sim, GONE)
    assert comparable(crawl_keys(sim, "keep")) == keep_before
    assert len(list(sim.stores[0].scan(DELAYED))) == 4

    sim.clock.advance_ms(month_hours * 3_600_000)
    sim.tick_all()
    sim.run()
    assert len(sim.fetched_urls("keep")) == 8  # its recrawls came due and were fetched
    assert len(sim.fetched_urls(GONE)) == 7
    sim.close()


def test_a_done_crawl_is_kept_until_its_retention_has_passed(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, site=SITE)
    sim.start(seed_request(5))
    sim.settle(until=lambda: sim.status("docs") == "done")
    sim.settle(rounds=3)  # the URLs its budget left queued are dropped, and that is published
    state = sim.directory.get("docs")
    assert state is not None
    kept = crawl_keys(sim, "docs")
    assert kept

    sim.clock.advance_ms(state.updated_at + RETENTION_MS - sim.clock.now_ms())
    for _ in range(3):
        sim.tick_all()
    assert crawl_keys(sim, "docs") == kept
    sim.clock.advance_ms(1)  # past the retention, but the last search was a millisecond ago
    sim.tick_all()
    assert crawl_keys(sim, "docs") == kept
    sim.clock.advance_ms(sim.config.purge_interval_ms)
    tick_until_purged(sim, "docs", max_ticks=3)
    assert sim.handlers[0].purged == 1
    sim.close()


def test_a_paused_crawl_and_an_unknown_one_are_never_purged(tmp_path: Path) -> None:
    config = FrontierConfig(lease_timeout_ms=20 * RETENTION_MS)
    sim = Simulation(tmp_path, site={}, auto_fetch=False, config=config)
    sim.start(CrawlRequest(crawl_id="paused", seeds=[f"{A}/"]))
    sim.run()
    sim.command("paused", "pause")
    sim.run()
    waiting = DiscoveredUrls(
        crawl_id="unknown",
        host="a.example",
        depth=1,
        discovered_at=1,
        urls=[DiscoveredUrl(url=f"{A}/later")],
    )
    sim.inject(sim.topics.urls, "a.example", waiting)
    sim.run()
    kept = {crawl_id: crawl_keys(sim, crawl_id) for crawl_id in ("paused", "unknown")}
    assert all(kept.values())
    sim.clock.advance_ms(10 * RETENTION_MS)
    for _ in range(5):
        sim.tick_all()
    for crawl_id, keys in kept.items():
        assert comparable(crawl_keys(sim, crawl_id)) == comparable(keys)
    sim.close()


@pytest.mark.parametrize("budget", [1, 2, 3, 10])
def test_a_prefix_walk_visits_every_key_in_order_on_any_budget(tmp_path: Path, budget: int) -> None:
    rng = random.Random(budget)
    keys = sorted(
        {bytes(rng.choice(b"\x00\x01\xff") for _ in range(rng.randint(1, 4))) for _ in range(60)}
    )
    store = PartitionStore(tmp_path / "p0", (DELAYED,), StoreOptions(StateSettings()))
    store.write({DELAYED: {key: b"v" for key in keys}}, "changelog", None)
    walk = PrefixWalk.under(b"")
    visits: list[bytes] = []
    calls = 0
    while not walk.done:
        transaction = Transaction(store)
        table = Table(transaction, DELAYED, None)

        def visit(key: bytes, _: bytes, table: Table = table) -> None:
            if key not in visits:
                visits.append(key)
            if key[-1] == 0xFF:
                table.delete(key)

        walk.step(table, Budget(budget), visit)
        store.write(transaction.writes, "changelog", None)
        calls += 1
        assert calls <= 1_000 * len(keys), "the walk does not end"  # each empty seek costs 1
    assert visits == keys
    assert [key for key, _ in store.scan(DELAYED)] == [key for key in keys if key[-1] != 0xFF]
    store.close()
