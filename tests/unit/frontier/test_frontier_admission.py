"""Admission through the handler: dedup, lower-depth moves, scope reasons, pending crawls."""

from __future__ import annotations

from pathlib import Path

from frontier.records import PENDING
from frontier.traps import check_traps
from schemas.canonical import canonical_url
from schemas.seeds import CrawlRequest
from schemas.urls import DiscoveredUrl, DiscoveredUrls
from tests.unit.frontier.simulation import Simulation

A = "https://a.example"


def discovered(
    crawl_id: str, host: str, depth: int, urls: list[str], source: str | None = None
) -> DiscoveredUrls:
    return DiscoveredUrls(
        crawl_id=crawl_id,
        host=host,
        depth=depth,
        source_url=source,
        discovered_at=1,
        urls=[DiscoveredUrl(url=url) for url in urls],
    )


def send(sim: Simulation, crawl_id: str, host: str, depth: int, urls: list[str]) -> None:
    sim.inject(sim.topics.urls, host, discovered(crawl_id, host, depth, urls))


def started(sim: Simulation, request: CrawlRequest, *, paused: bool = False) -> None:
    """Start a crawl and deliver everything; optionally pause it before its seeds are leased."""
    sim.start(request)
    sim.run([sim.topics.seeds, sim.topics.crawls])
    if paused:
        sim.command(request.crawl_id, "pause")
        sim.run([sim.topics.seeds, sim.topics.crawls])
    sim.run()


def queued(sim: Simulation, partition: int = 0) -> dict[str, int]:
    """URL -> depth of every queued entry of a partition."""
    return {entry.url: entry.depth for entry in sim.queue(partition)}


def test_duplicates_are_counted_not_queued_and_take_a_lower_depth(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, site={})
    started(sim, CrawlRequest(crawl_id="dups", seeds=[f"{A}/"], max_depth=3), paused=True)
    send(sim, "dups", "a.example", 2, [f"{A}/x", f"{A}/y"])
    send(sim, "dups", "a.example", 3, [f"{A}/x", f"{A}/"])
    send(sim, "dups", "a.example", 1, [f"{A}/y"])
    sim.run()
    assert queued(sim) == {f"{A}/": 0, f"{A}/x": 2, f"{A}/y": 1}
    assert sim.total("dups", "admitted") == 3
    assert sim.total("dups", "duplicate") == 3
    assert sim.total("dups", "lower_depth") == 1
    assert sim.total("dups", "queued") == 3
    assert sim.fetches == []
    sim.command("dups", "resume")
    sim.settle(until=lambda: sim.status("dups") == "done")
    depths = {request.url: request.depth for request in sim.fetches}
    assert depths == {f"{A}/": 0, f"{A}/x": 2, f"{A}/y": 1}
    assert sim.status("dups") == "done"
    sim.close()


def test_a_url_twice_in_one_message_is_one_url_whatever_the_store_held(tmp_path: Path) -> None:
    """A message's visited keys are read in one go before its URLs are handled: a URL listed
    twice counts once, whether new (queued, then a duplicate) or known (moved up once)."""
    sim = Simulation(tmp_path, site={})
    started(sim, CrawlRequest(crawl_id="twice", seeds=[f"{A}/"], max_depth=3), paused=True)
    send(sim, "twice", "a.example", 3, [f"{A}/old"])
    sim.run()
    # New twice (also spelled differently), known twice at a lower depth, a rejection twice.
    urls = [
        f"{A}/new",
        f"{A}/old",
        "HTTPS://A.EXAMPLE:443/new#top",
        f"{A}/old",
        "ftp://x/",
        "ftp://x/",
    ]
    send(sim, "twice", "a.example", 2, urls)
    sim.run()
    assert queued(sim) == {f"{A}/": 0, f"{A}/old": 2, f"{A}/new": 2}
    assert sim.total("twice", "admitted") == 3
    assert sim.total("twice", "duplicate") == 3
    assert sim.total("twice", "lower_depth") == 1
    assert sim.total("twice", "rejected_invalid") == 2
    assert sim.total("twice", "discovered") == 1 + 1 + len(urls)
    sim.close()


def test_scope_rejections_are_counted_by_reason(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, site={})
    request = CrawlRequest(
        crawl_id="scope",
        seeds=[f"{A}/docs/"],
        max_depth=2,
        include_pattern="/docs/",
        exclude_pattern="/docs/private",
    )
    started(sim, request, paused=True)
    urls = [
        f"{A}/docs/ok",
        f"{A}/other",
        f"{A}/docs/private/x",
        f"{A}/docs/a/b/a/b/a/b",
        "mailto:someone@a.example",
        "https://b.example/docs/",
        f"{A}/docs/ok",
    ]
    send(sim, "scope", "a.example", 1, urls)
    send(sim, "scope", "a.example", 3, [f"{A}/docs/deep"])
    send(sim, "scope", "b.example", 1, ["https://b.example/docs/"])
    sim.run()
    expected = {
        "rejected_include": 1,
        "rejected_exclude": 1,
        "rejected_trap_repeated_segments": 1,
        "rejected_invalid": 1,
        "rejected_misrouted": 1,
        "rejected_depth": 1,
        "rejected_domain": 1,
        "duplicate": 1,
        "admitted": 2,
        "discovered": 1 + len(urls) + 2,
    }
    assert {name: sim.total("scope", name) for name in expected} == expected
    assert set(queued(sim)) == {f"{A}/docs/", f"{A}/docs/ok"}
    sim.close()


def test_requisites_pass_the_domain_rule_only_in_a_crawl_that_fetches_them(
    tmp_path: Path,
) -> None:
    sim = Simulation(tmp_path, site={})
    for crawl_id, fetches in (("with", True), ("without", False)):
        request = CrawlRequest(crawl_id=crawl_id, seeds=[f"{A}/"], fetch_page_requisites=fetches)
        started(sim, request, paused=True)
        message = discovered(crawl_id, "b.example", 0, ["https://b.example/site.css"], f"{A}/")
        sim.inject(sim.topics.urls, "b.example", message.model_copy(update={"requisites": True}))
    sim.run()
    assert (sim.total("with", "admitted"), sim.total("with", "rejected_domain")) == (2, 0)
    assert (sim.total("without", "admitted"), sim.total("without", "rejected_domain")) == (1, 1)
    sim.close()


def test_a_host_only_traps_can_refuse_gets_the_same_answers_as_the_full_rules(
    tmp_path: Path,
) -> None:
    """No include, exclude, depth, score or per-host limit: admission checks the traps alone,
    from where the path starts (after ``http://host`` or ``https://host``): the answers of
    `check_traps` on the whole URL."""
    sim = Simulation(tmp_path, site={})
    request = CrawlRequest(crawl_id="traps", seeds=[f"{A}/"], max_depth=-1, same_domain="any")
    started(sim, request, paused=True)
    params = "&".join(f"p{n}=1" for n in range(40))
    urls = [
        f"{A}/a/b/c/d/e",
        "http://a.example/x/y/x/y/x/y",  # http: the path starts one character earlier
        f"{A}/x/y/x/y/x/y",
        f"{A}/s/s/s/s/s",
        f"{A}/q/r/s/t/?next=/a/a/a/a/a",  # the query's slashes are not segments
        f"{A}/many?{params}",
        f"{A}/" + "/".join(f"d{n}" for n in range(40)),
        f"{A}/" + "l" * 3000,
        f"{A}/a/b/c/d/e",  # again, in the same message: a duplicate
        f"{A}/t/",
    ]
    send(sim, "traps", "a.example", 1, urls)
    sim.run()
    expected = {
        "rejected_trap_repeated_segments": 3,
        "rejected_trap_query_params": 1,
        "rejected_trap_path_segments": 1,
        "rejected_trap_url_length": 1,
        "duplicate": 1,
        "admitted": 3 + 1,  # the seed and three
    }
    assert {name: sim.total("traps", name) for name in expected} == expected
    admitted = {url for url in urls if check_traps(canonical_url(url) or "") is None}
    assert set(queued(sim)) == {f"{A}/", *(canonical_url(url) for url in admitted)}


def test_max_pages_per_host_rejects_beyond_the_cap(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, site={})
    request = CrawlRequest(crawl_id="cap", seeds=[f"{A}/"], max_pages_per_host=2)
    started(sim, request, paused=True)
    send(sim, "cap", "a.example", 1, [f"{A}/1", f"{A}/2"])
    sim.run()
    assert sim.total("cap", "admitted") == 2
    assert sim.total("cap", "rejected_host_budget") == 1
    sim.close()


def test_urls_of_an_unknown_crawl_wait_until_it_appears(tmp_path: Path) -> None:
    site = {f"{A}/": [f"{A}/next"]}
    sim = Simulation(tmp_path, partitions=3, site=site)
    sim.start(CrawlRequest(crawl_id="late", seeds=[f"{A}/"]))
    sim.run([sim.topics.seeds])
    sim.run([sim.topics.urls])  # the seeds arrive before the crawl is in the directory
    host_partition = sim.partition_of("a.example")
    assert sim.directory.get("late") is None
    assert sim.stores[host_partition].count(PENDING) == 1
    assert sim.fetches == []
    sim.clock.advance_ms(10_000)
    sim.tick_all()
    assert sim.fetches == []  # still unknown: still waiting
    sim.run([sim.topics.crawls])
    assert [request.url for request in sim.fetches] == [f"{A}/"]
    assert sim.stores[host_partition].count(PENDING) == 0
    sim.settle(until=lambda: sim.status("late") == "done")
    assert sorted(sim.fetched_urls("late")) == [f"{A}/", f"{A}/next"]
    assert sim.status("late") == "done"
    sim.close()
