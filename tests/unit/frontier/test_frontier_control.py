"""Crawl control, done detection, persistence across reopen, and memory that tracks hosts."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from frontier.config import FrontierConfig
from frontier.queues import crawl_queue_prefix
from frontier.records import QUEUE
from schemas.seeds import CrawlRequest
from schemas.urls import DiscoveredUrl, DiscoveredUrls, ParseReport
from tests.unit.frontier.simulation import Simulation, Site
from tests.unit.frontier.test_frontier_bfs import SITE, TRACE_5, seed_request

A = "https://a.example"
B = "https://b.example"


def test_pause_stops_releases_resume_restarts_cancel_drops(tmp_path: Path) -> None:
    site = {f"{A}/": [f"/{n}" for n in range(5)]}
    sim = Simulation(tmp_path, site=site, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id="c", seeds=[f"{A}/"]))
    sim.run()
    [seed] = sim.held_fetches
    sim.command("c", "pause")
    sim.run()
    assert sim.status("c") == "paused"
    sim.fetch(seed)
    sim.run()
    sim.clock.advance_ms(60_000)
    sim.tick_all()
    assert len(sim.fetches) == 1
    assert sim.total("c", "queued") == 5
    sim.command("c", "resume")
    sim.run()
    assert len(sim.fetches) == 3  # a lease window of two
    sim.command("c", "cancel")
    sim.run()
    for request in sim.held_fetches[1:]:
        sim.fetch(request)
    sim.run()
    sim.clock.advance_ms(60_000)
    sim.tick_all()
    sim.run()
    assert len(sim.fetches) == 3
    assert sim.status("c") == "cancelled"
    assert sim.total("c", "dropped_cancelled") == 3
    assert sim.total("c", "queued") == 0
    assert sim.total("c", "leased") == 0
    sim.command("c", "resume")  # cancelled is final
    sim.run()
    assert sim.status("c") == "cancelled"
    sim.close()


def test_a_paused_crawl_does_not_stall_another_on_its_hosts(tmp_path: Path) -> None:
    """Live: a crawl paused with URLs queued on a host froze a second crawl of the same site
    for as long as it stayed paused, once the second crawl's URLs sorted behind more of the
    paused one's than a release looks at. Each crawl has its own queue on a host now: the paused
    one's stays in place, through a restart of the partition too, and is leased on resume."""
    site = {
        f"{A}/": [f"/big/{n}" for n in range(12)],
        f"{B}/": ["/1"],
        f"{B}/1": [f"{A}/small/{n}" for n in range(3)],
    }
    config = FrontierConfig(release_scan_limit=4)
    sim = Simulation(tmp_path, site=site, config=config, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id="big", seeds=[f"{A}/"], politeness_delay_ms=0))
    sim.run()
    [seed] = sim.held_fetches
    sim.fetch(seed)
    sim.run()
    sim.command("big", "pause")
    sim.run()
    sim.auto_fetch = True
    for request in sim.held_fetches[1:]:
        sim.fetch(request)  # the two leased before the pause
    sim.settle(rounds=3)
    assert sim.total("big", "queued") == 10
    big_queue = crawl_queue_prefix("a.example", "big")
    assert len(list(sim.stores[0].scan(QUEUE, big_queue))) == 10
    assert sim.handlers[0].memory[0].heap.queued == {"a.example": 10}

    request = CrawlRequest(crawl_id="small", seeds=[f"{B}/"], same_domain="any")
    sim.start(request.model_copy(update={"politeness_delay_ms": 0}))
    sim.settle(until=lambda: sim.status("small") == "done")
    assert sim.status("small") == "done"
    assert sorted(sim.fetched_urls("small")) == sorted(
        [f"{B}/", f"{B}/1", *(f"{A}/small/{n}" for n in range(3))]
    )
    assert sim.status("big") == "paused"
    assert len(sim.fetched_urls("big")) == 3

    sim.restart(0)  # the paused crawl's URLs are found again
    sim.command("big", "resume")
    sim.settle(until=lambda: sim.status("big") == "done")
    assert sim.status("big") == "done"
    assert sorted(sim.fetched_urls("big")) == sorted(
        [f"{A}/", *(f"{A}/big/{n}" for n in range(12))]
    )
    assert list(sim.stores[0].scan(QUEUE)) == []
    sim.close()


def test_a_depth_blocked_crawl_does_not_stall_another_on_its_hosts(tmp_path: Path) -> None:
    """A depth-ordered crawl (bfs with a max depth, the default) holds its next depth back while
    one URL of this depth is unfinished. Another crawl's URLs of that depth on the same host,
    arrived later, sorted behind every held-back one in a single host queue and waited past the
    release scan limit; each crawl has its own queue now, and the other crawl goes on."""
    site: Site = {
        f"{A}/": [f"/big/{n}" for n in range(6)],
        **{f"{A}/big/{n}": [f"/big/{n}/{m}" for m in range(3)] for n in range(6)},
        f"{B}/": ["/1"],
        f"{B}/1": [f"{A}/small/{n}" for n in range(3)],
    }
    config = FrontierConfig(release_scan_limit=4, lease_timeout_ms=3_600_000)
    sim = Simulation(tmp_path, site=site, config=config, auto_fetch=False)
    big = CrawlRequest(crawl_id="big", seeds=[f"{A}/"], max_depth=2, politeness_delay_ms=0)
    sim.start(big)
    sim.run()
    [seed] = sim.held_fetches
    sim.fetch(seed)
    sim.run()
    kept = sim.held_fetches[1]  # one page of depth 1 stays unfinished
    while others := [r for r in sim.held_fetches[2:] if r.url not in sim.attempts]:
        for request in others:
            sim.fetch(request)
        sim.run()
    assert sim.total("big", "queued") == 15  # depth 2, held back behind the kept page
    assert len({r.url for r in sim.fetches if r.crawl_id == "big"}) == 7

    sim.auto_fetch = True
    small = CrawlRequest(crawl_id="small", seeds=[f"{B}/"], max_depth=2, same_domain="any")
    sim.start(small.model_copy(update={"politeness_delay_ms": 0}))
    sim.settle(until=lambda: sim.status("small") == "done")
    assert sim.status("small") == "done"
    assert sorted(sim.fetched_urls("small")) == sorted(
        [f"{B}/", f"{B}/1", *(f"{A}/small/{n}" for n in range(3))]
    )
    assert sim.total("big", "queued") == 15

    sim.fetch(kept)
    sim.settle(until=lambda: sim.status("big") == "done")
    assert sim.status("big") == "done"
    assert len(set(sim.fetched_urls("big"))) == 1 + 6 + 18
    sim.close()


def test_a_cancelled_crawl_s_queue_is_dropped_after_the_other_crawls_leased(
    tmp_path: Path,
) -> None:
    """A cancelled crawl's queued URLs go a scan limit's worth per release. Dropped before the
    other crawls of the host leased, they took the whole limit, and those crawls waited a release
    per limit's worth of them (a tick each); now they lease first."""
    site = {f"{A}/": [f"/big/{n}" for n in range(12)]}
    config = FrontierConfig(release_scan_limit=4)
    sim = Simulation(tmp_path, site=site, config=config, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id="big", seeds=[f"{A}/"]))
    sim.run()
    [seed] = sim.held_fetches
    sim.fetch(seed)
    sim.run()
    sim.start(CrawlRequest(crawl_id="small", seeds=[f"{A}/small"]))
    sim.run()
    assert len(sim.held_fetches) == 3  # the seed, then two of big's: the window is full
    sim.command("big", "cancel")
    sim.run()
    assert (sim.total("big", "queued"), sim.total("big", "dropped_cancelled")) == (6, 4)
    sim.fetch(sim.held_fetches[1])
    assert sim.step([sim.topics.outcomes])  # frees a slot; the tick after it releases the host
    assert sim.fetched_urls("small") == [f"{A}/small"]
    assert sim.total("big", "dropped_cancelled") == 4 + 3  # the rest of the scan limit
    sim.close()


def test_a_release_reads_each_crawl_s_queue_from_its_floor_and_memory_forgets_it(
    tmp_path: Path,
) -> None:
    """Leased entries stay as tombstones at the head of a queue until RocksDB compacts them, and a
    seek from the start of the queue steps over each of them again (tests/bench/RESULTS.md,
    session 42): memory keeps per host and crawl the key below which nothing is queued, and drops
    it once the host has nothing queued."""
    site: Site = {f"{A}/": [f"/{n}" for n in range(8)]}
    sim = Simulation(tmp_path, site=site, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id="c", seeds=[f"{A}/"], max_depth=1, politeness_delay_ms=0))
    sim.run()
    [seed] = sim.held_fetches
    sim.fetch(seed)
    sim.run()
    memory = sim.handlers[0].memory[0]
    [first_left, *_] = [key for key, _ in sim.stores[0].scan(QUEUE)]
    assert len(sim.held_fetches) == 3  # the seed, then two leased
    assert memory.queue_floors == {"a.example": {"c": first_left}}

    sim.auto_fetch = True
    for request in sim.held_fetches[1:]:
        sim.fetch(request)
    sim.settle(until=lambda: sim.status("c") == "done")
    assert sim.status("c") == "done"
    assert memory.queue_floors == {}
    assert memory.heap.queued == {}
    sim.close()


def test_a_command_for_an_unknown_crawl_is_dead_lettered(tmp_path: Path) -> None:
    sim = Simulation(tmp_path)
    sim.command("nobody", "pause")
    sim.run()
    assert sim.handler_dead_letters == ["pause for unknown crawl 'nobody'"]
    sim.close()


def web_of_hosts() -> Site:
    hosts = [f"https://{name}.example" for name in "abcdefgh"]
    site: Site = {}
    for index, host in enumerate(hosts):
        neighbours = [hosts[(index + step) % len(hosts)] for step in (1, 3)]
        site[f"{host}/"] = [f"{host}/a", f"{host}/b", *(f"{n}/" for n in neighbours)]
        site[f"{host}/a"] = [f"{host}/a/1", f"{neighbours[0]}/b"]
        site[f"{host}/b"] = [f"{host}/", f"{neighbours[1]}/a/1"]
    return site


def reachable(site: Site, seed: str, max_depth: int) -> set[str]:
    """Every URL within ``max_depth`` links of ``seed`` (the fake fetcher's pages)."""
    seen = {seed}
    frontier = [seed]
    for _ in range(max_depth):
        frontier = [link for page in frontier for link in site.get(page, []) if link not in seen]
        seen.update(frontier)
    return seen


def test_done_only_once_everything_drained_across_partitions(tmp_path: Path) -> None:
    site = web_of_hosts()
    sim = Simulation(tmp_path, partitions=6, site=site, seed=7)
    request = CrawlRequest(
        crawl_id="web", seeds=["https://a.example/"], max_depth=3, same_domain="any"
    )
    sim.start(request)
    steps = 0
    while sim.step():
        steps += 1
        assert sim.status("web") != "done"
    steps += sim.settle(until=lambda: sim.status("web") == "done")
    assert sim.status("web") == "done"
    assert not sim.done_while_busy
    assert [state.status for state in sim.directory.history] == ["active", "done"]
    fetched = sim.fetched_urls("web")
    assert sorted(fetched) == sorted(reachable(site, "https://a.example/", 3))
    assert steps > 100
    sim.close()


def test_state_survives_closing_and_reopening_partitions_mid_crawl(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, partitions=6, site=SITE, seed=3)
    sim.start(seed_request(5))
    while len(sim.fetches) < 2:
        if not sim.step():  # depth 1's budget waits for the progress view (frontier.budget)
            sim.clock.advance_ms(1_000)
            sim.tick_all()
    assert 1 < len(sim.fetches) < 5
    for partition in range(6):
        sim.restart(partition)
    sim.settle(until=lambda: sim.status("docs") == "done")
    assert sorted(sim.fetched_urls("docs")) == sorted(TRACE_5)
    depths = [request.depth for request in sim.fetches]
    assert depths == sorted(depths)
    assert sim.status("docs") == "done"
    sim.close()


def test_memory_holds_hosts_not_urls(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, site={}, auto_fetch=False)
    hosts = [f"h{n}.example" for n in range(10)]
    sim.start(
        CrawlRequest(
            crawl_id="big",
            seeds=[f"https://{h}/" for h in hosts],
            same_domain="any",
            max_depth=-1,  # so depth-1 URLs are leased while the seeds are (no BFS-prefix rule)
        )
    )
    sim.run()
    for host in hosts:
        message = DiscoveredUrls(
            crawl_id="big",
            host=host,
            depth=1,
            source_url=f"https://{host}/",
            discovered_at=1,
            urls=[DiscoveredUrl(url=f"https://{host}/page/{n}") for n in range(2_000)],
        )
        sim.inject(sim.topics.urls, host, message)
    sim.run()
    assert sim.total("big", "admitted") == 20_010
    heap = sim.handlers[0].memory[0].heap
    assert len(heap.queued) == 10
    assert sum(heap.queued.values()) == sim.total("big", "queued") == 20_010 - 20
    assert len(heap) <= 10
    assert len(heap._heap) <= 30
    sim.restart(0)
    rebuilt = sim.handlers[0].memory[0].heap
    assert rebuilt.queued == heap.queued
    sim.close()


def test_a_crawl_past_its_max_duration_is_done_and_releases_nothing_more(tmp_path: Path) -> None:
    site = {f"{A}/": [f"/{n}" for n in range(5)]}
    sim = Simulation(tmp_path, site=site, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id="t", seeds=[f"{A}/"], max_duration_ms=30_000))
    sim.run()
    [seed] = sim.held_fetches
    sim.fetch(seed)
    sim.run()
    assert sim.status("t") == "active"
    leased_before = len(sim.fetches)
    sim.clock.advance_ms(31_000)
    sim.tick_all()
    sim.run()
    assert sim.status("t") == "done"
    assert sim.directory.get("t").ended_by == "max_duration"  # type: ignore[union-attr]
    for request in sim.held_fetches[1:]:
        sim.fetch(request)
    sim.run()
    sim.clock.advance_ms(60_000)
    sim.tick_all()
    sim.run()
    assert len(sim.fetches) == leased_before  # nothing released after the time limit


def test_a_page_delivered_twice_counts_once(tmp_path: Path) -> None:
    """A fetcher that restarts may send a page's outcome again; the parser then sends its links and
    report again: each counts once, and nothing is leased twice."""
    registry = CollectorRegistry()
    site = {f"{A}/": ["/1", "/2"]}
    sim = Simulation(tmp_path, site=site, auto_fetch=False, registry=registry)
    sim.start(CrawlRequest(crawl_id="twice", seeds=[f"{A}/"], politeness_delay_ms=0))
    sim.run()
    [seed] = sim.held_fetches
    sim.fetch(seed)
    sim.fetch(seed)  # the same lease again: outcome, links and report all repeated
    sim.run()
    assert sim.total("twice", "reports_expected") == 1
    assert sim.total("twice", "reports_admitted") == 1
    assert sim.total("twice", "reports_repeated") == 1
    assert sim.total("twice", "discovered_messages_admitted") == 2  # the seeds' and the page's
    assert sim.total("twice", "discovered_messages_repeated") == 1
    for kind in ("parse_report", "discovered_urls"):
        repeated = registry.get_sample_value(
            "streamcrawl_frontier_messages_repeated_total", {"kind": kind}
        )
        assert repeated == 1
    assert sorted(request.url for request in sim.held_fetches[1:]) == [f"{A}/1", f"{A}/2"]
    sim.close()


def test_a_repeated_report_does_not_stand_for_one_still_travelling(tmp_path: Path) -> None:
    """b.example/y's report is held on its way when a parser that restarted sends a.example/x's
    report again. Counted twice, that report would balance the sums and end the crawl early."""
    site = {f"{A}/": ["/x", f"{B}/y"]}
    sim = Simulation(tmp_path, partitions=2, site=site, auto_fetch=False)
    assert sim.partition_of("a.example") != sim.partition_of("b.example")
    sim.start(CrawlRequest(crawl_id="held", seeds=[f"{A}/"], same_domain="any"))
    sim.run()
    [seed] = sim.held_fetches
    sim.fetch(seed)
    sim.settle(until=lambda: len(sim.held_fetches) == 3)  # depth 1 opens with the progress view
    by_url = {request.url: request for request in sim.held_fetches}
    sim.blocked.add((sim.topics.urls, sim.partition_of("b.example")))
    sim.fetch(by_url[f"{B}/y"])  # its outcome arrives; its report waits in the blocked queue
    page = by_url[f"{A}/x"]
    sim.fetch(page)
    again = ParseReport(
        crawl_id="held", page_url=page.url, lease_id=page.lease_id, discovered_messages=0
    )
    sim.inject(sim.topics.urls, "a.example", again)
    sim.settle(rounds=10)
    assert sim.status("held") == "active"
    assert sim.total("held", "reports_repeated") == 1
    sim.blocked.clear()
    sim.settle(until=lambda: sim.status("held") == "done")
    assert sim.status("held") == "done"
    assert not sim.done_while_busy
    sim.close()
