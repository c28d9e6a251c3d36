"""Budget across partitions, recrawl, expiry to dead, sitemaps, scores and the wiring helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from frontier.config import FrontierTopics
from frontier.handler import FrontierHandler
from schemas.exceptions import DecodeError
from schemas.fetch import FetchRequest
from schemas.scores import PageScore
from schemas.seeds import CrawlRequest
from schemas.urls import DiscoveredUrl, DiscoveredUrls
from tests.unit.frontier.simulation import Simulation
from tests.unit.frontier.test_frontier_control import web_of_hosts

A = "https://a.example"


@pytest.mark.parametrize("seed", [0, 5])
def test_max_links_is_a_hard_cap_across_partitions(tmp_path: Path, seed: int) -> None:
    sim = Simulation(tmp_path, partitions=6, site=web_of_hosts(), seed=seed)
    request = CrawlRequest(
        crawl_id="cap", seeds=["https://a.example/"], max_depth=3, max_links=10, same_domain="any"
    )
    sim.start(request)
    sim.settle(until=lambda: sim.status("cap") == "done")
    fetched = sim.fetched_urls("cap")
    assert len(fetched) == len(set(fetched)) == 10
    assert sim.total("cap", "budget_granted") == 10
    assert sim.status("cap") == "done"
    assert not sim.done_while_busy
    sim.close()


def test_a_lost_grant_is_asked_for_again_with_the_same_request(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, partitions=6, site={})
    sim.start(CrawlRequest(crawl_id="docs", seeds=["https://example.com/"], max_links=3))
    sim.run([sim.topics.seeds, sim.topics.crawls, sim.topics.urls])
    assert sim.step([sim.topics.budget])  # the request reaches the owner, which grants
    lost = [q for (topic, _), q in sim.queues.items() if topic == sim.topics.budget and q]
    assert len(lost) == 1
    lost[0].clear()
    sim.clock.advance_ms(31_000)
    sim.tick_all()
    sim.run()
    assert sim.fetched_urls("docs") == ["https://example.com/"]
    assert sim.total("docs", "budget_granted") == 1
    sim.close()


def test_recrawl_comes_back_conditionally_and_the_crawl_keeps_running(tmp_path: Path) -> None:
    def validators(request: FetchRequest, attempt: int) -> dict[str, Any]:
        if attempt == 1:
            return {"etag": '"v1"', "page_sent": True}
        return {"kind": "unchanged", "status": 304, "page_sent": False}

    sim = Simulation(tmp_path, site={}, script=validators)
    sim.start(CrawlRequest(crawl_id="re", seeds=[f"{A}/"], recrawl_interval_hours=1))
    sim.settle(rounds=10)
    assert len(sim.fetches) == 1
    assert sim.status("re") == "active"
    sim.clock.advance_ms(3_600_000)
    sim.tick_all()
    sim.run()
    assert len(sim.fetches) == 2
    assert sim.fetches[1].etag == '"v1"'
    assert sim.total("re", "unchanged") == 1
    assert sim.total("re", "recrawl_scheduled") == 1
    sim.close()


def test_a_lease_that_keeps_expiring_goes_dead(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, site={}, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id="x", seeds=[f"{A}/"], max_retries=1))
    sim.run()
    for _ in range(2):
        sim.clock.advance_ms(sim.config.lease_timeout_ms + 1)
        sim.tick_all()
        sim.run()
    assert len(sim.fetches) == 2
    [letter] = sim.dead_letters
    assert letter.error.startswith("lease_expired")
    assert sim.total("x", "expired") == 2
    assert sim.total("x", "dead") == 1
    sim.settle(until=lambda: sim.status("x") == "done")
    assert sim.status("x") == "done"
    sim.close()


def test_sitemaps_are_seeded_and_followed_when_asked(tmp_path: Path) -> None:
    def robots_sitemaps(request: FetchRequest, attempt: int) -> dict[str, Any] | None:
        if request.url == f"{A}/":
            return {"sitemaps": [f"{A}/maps/one.xml"]}
        return None

    sim = Simulation(tmp_path, site={}, script=robots_sitemaps)
    sim.start(CrawlRequest(crawl_id="s", seeds=[f"{A}/"], use_sitemaps=True))
    sim.settle(until=lambda: sim.status("s") == "done")
    assert sorted(sim.fetched_urls("s")) == [f"{A}/", f"{A}/maps/one.xml", f"{A}/sitemap.xml"]
    sim.close()


def test_pagerank_strategy_orders_by_known_scores(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, site={})
    sim.start(CrawlRequest(crawl_id="pr", seeds=[f"{A}/"], priority="pagerank"))
    sim.run([sim.topics.seeds, sim.topics.crawls])
    sim.command("pr", "pause")
    sim.run([sim.topics.seeds, sim.topics.crawls])
    sim.run()
    for url, rank in ((f"{A}/low", 1e-9), (f"{A}/high", 0.1)):
        score = PageScore(url=url, host="a.example", pagerank=rank, computed_at=1)
        sim.inject(sim.topics.scores, url, score, partition=0)
    sim.run([sim.topics.scores])
    urls = [f"{A}/low", f"{A}/unknown", f"{A}/high"]
    message = DiscoveredUrls(
        crawl_id="pr",
        host="a.example",
        depth=1,
        discovered_at=1,
        urls=[DiscoveredUrl(url=url) for url in urls],
    )
    sim.inject(sim.topics.urls, "a.example", message)
    sim.run()
    order = [entry.url for entry in sim.queue(0)]
    assert order == [f"{A}/high", f"{A}/", f"{A}/unknown", f"{A}/low"]
    sim.close()


def test_inputs_decode_each_topic_and_refuse_garbage(tmp_path: Path) -> None:
    sim = Simulation(tmp_path)
    handler: FrontierHandler = sim.handlers[0]
    topics = FrontierTopics.from_prefix("t.")
    inputs = handler.inputs()
    assert [i.topic for i in inputs] == ["t.seeds", "t.budget", "t.urls", "t.outcomes", "t.scores"]
    assert handler.tables() == tuple(sim.stores[0].tables)
    for spec in inputs:
        with pytest.raises(DecodeError):
            spec.decode(b"{not json")
    seed = next(i for i in inputs if i.topic == topics.seeds)
    request = seed.decode(b'{"seeds": ["https://a.example/"]}')
    assert isinstance(request, CrawlRequest)
    sim.close()


def test_a_crawl_prefers_the_urls_its_pattern_matches_on_each_host(tmp_path: Path) -> None:
    links = ["/about", "/product/1", "/blog", "/product/2"]
    sim = Simulation(tmp_path, site={f"{A}/": links})
    sim.start(CrawlRequest(crawl_id="pf", seeds=[f"{A}/"], prefer_pattern="/product/"))
    sim.settle(until=lambda: sim.status("pf") == "done")
    order = [url.removeprefix(A) for url in sim.fetched_urls("pf")]
    assert order == ["/", "/product/1", "/product/2", "/about", "/blog"]
    sim.close()
