"""Recrawl scheduling: a fixed interval, and an adaptive one that follows how often a page changes
(`frontier.recrawl`), on its own and through the frontier's handlers."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from frontier.config import FrontierConfig
from frontier.recrawl import HOUR_MS, adaptive_bounds_ms, recrawl_interval_ms
from schemas.fetch import FetchRequest
from schemas.seeds import CrawlRequest
from schemas.urls import DiscoveredUrl, DiscoveredUrls
from tests.unit.frontier.simulation import Simulation

A = "https://a.example"
MINUTE_MS = 60_000
RECRAWLS_METRIC = "streamcrawl_frontier_recrawls_total"


def _request(**fields: Any) -> CrawlRequest:
    return CrawlRequest(seeds=[f"{A}/"], **fields)


def test_without_an_interval_nothing_is_recrawled() -> None:
    assert recrawl_interval_ms(_request(), None, changed=True) is None


def test_a_fixed_interval_stays_whatever_the_page_did() -> None:
    request = _request(recrawl_interval_hours=2)
    assert recrawl_interval_ms(request, None, changed=True) == 2 * HOUR_MS
    assert recrawl_interval_ms(request, 2 * HOUR_MS, changed=False) == 2 * HOUR_MS
    assert recrawl_interval_ms(request, 2 * HOUR_MS, changed=True) == 2 * HOUR_MS


def test_an_adaptive_interval_shrinks_after_a_change_and_grows_after_none() -> None:
    request = _request(recrawl_interval_hours=2, recrawl_adaptive=True)
    assert recrawl_interval_ms(request, None, changed=True) == 2 * HOUR_MS  # a first fetch
    assert recrawl_interval_ms(request, 3 * HOUR_MS, changed=True) == 2 * HOUR_MS  # / 1.5
    assert recrawl_interval_ms(request, 2 * HOUR_MS, changed=False) == 2.5 * HOUR_MS  # x 1.25


@pytest.mark.parametrize(
    ("fields", "bounds_h"),
    [
        ({}, (0.5, 8)),
        ({"recrawl_min_hours": 1.5}, (1.5, 8)),
        ({"recrawl_max_hours": 5}, (0.5, 5)),
    ],
)
def test_an_adaptive_interval_stays_within_its_bounds(
    fields: dict[str, float], bounds_h: tuple[float, float]
) -> None:
    request = _request(recrawl_interval_hours=2, recrawl_adaptive=True, **fields)
    shortest, longest = (round(hours * HOUR_MS) for hours in bounds_h)
    assert adaptive_bounds_ms(request) == (shortest, longest)
    interval = 2 * HOUR_MS
    for _ in range(20):
        interval = recrawl_interval_ms(request, interval, changed=True) or 0
    assert interval == shortest
    for _ in range(40):
        interval = recrawl_interval_ms(request, interval, changed=False) or 0
    assert interval == longest


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"recrawl_adaptive": True}, "needs a recrawl interval to adapt"),
        ({"recrawl_interval_hours": 2, "recrawl_min_hours": 1}, "and this crawl's is fixed"),
        (
            {"recrawl_interval_hours": 2, "recrawl_adaptive": True, "recrawl_min_hours": 3},
            "3.0 is above the recrawl interval, 2.0 hours",
        ),
        (
            {"recrawl_interval_hours": 2, "recrawl_adaptive": True, "recrawl_max_hours": 1},
            "1.0 is below the recrawl interval, 2.0 hours",
        ),
    ],
)
def test_a_request_with_bounds_that_cannot_hold_is_refused(
    fields: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        _request(**fields)


def _recrawl_site(tmp_path: Path, request: CrawlRequest) -> tuple[Simulation, dict[str, list[int]]]:
    """A seed page that changes at every fetch and links a page that never changes, crawled by
    ``request``; per URL, the times (ms) it was fetched at."""
    fetched_at: dict[str, list[int]] = {}

    def page(fetch: FetchRequest, attempt: int) -> dict[str, Any]:
        fetched_at.setdefault(fetch.url, []).append(sim.clock.now_ms())
        if fetch.url == f"{A}/":
            return {"content_hash": f"version-{attempt}", "etag": f'"{attempt}"'}
        if attempt == 1:
            return {"content_hash": "static", "etag": '"static"'}
        return {"kind": "unchanged", "status": 304, "page_sent": False}

    registry = CollectorRegistry()
    site = {f"{A}/": [f"{A}/static"]}
    sim = Simulation(tmp_path, site=site, script=page, registry=registry)
    sim.start(request)
    sim.settle(until=lambda: len(fetched_at) == 2)
    return sim, fetched_at


def _run_for(sim: Simulation, hours: float, step_ms: int = 15_000) -> None:
    start = sim.clock.now_ms()
    while sim.clock.now_ms() - start < hours * HOUR_MS:
        sim.clock.advance_ms(step_ms)
        sim.tick_all()
        sim.run()


def _gaps_minutes(times: list[int]) -> list[float]:
    return [(later - earlier) / MINUTE_MS for earlier, later in pairwise(times)]


def test_an_adaptive_recrawl_comes_back_sooner_to_a_changing_page(tmp_path: Path) -> None:
    request = _request(crawl_id="ad", recrawl_interval_hours=1, recrawl_adaptive=True)
    sim, fetched_at = _recrawl_site(tmp_path, request)
    _run_for(sim, hours=9)
    # Each due time is met within a step (15 s) of the simulation's clock.
    changing = _gaps_minutes(fetched_at[f"{A}/"])
    expected = [60, 40, 26.67, 17.78, 15, 15]  # / 1.5 down to the shortest: 1 h / 4
    assert changing[: len(expected)] == pytest.approx(expected, abs=0.5)
    assert all(gap == pytest.approx(15, abs=0.5) for gap in changing[len(expected) :])
    static = _gaps_minutes(fetched_at[f"{A}/static"])
    assert static == pytest.approx([60, 75, 93.75, 117.19, 146.48], abs=0.5)  # x 1.25
    # Each recrawl was conditional, and counted by what it found.
    static_fetches = [f for f in sim.fetches if f.url == f"{A}/static"]
    assert [f.etag for f in static_fetches] == [None] + ['"static"'] * 5
    recrawls = len(changing) + len(static)
    assert sim.total("ad", "recrawls") == recrawls
    assert sim.total("ad", "changed") == len(changing)
    assert sim.total("ad", "unchanged") == len(static)
    assert sim.registry is not None
    for result, count in (("changed", len(changing)), ("unchanged", len(static))):
        labels = {"result": result}
        assert sim.registry.get_sample_value(RECRAWLS_METRIC, labels) == count
    assert sim.status("ad") == "active"  # a recrawling crawl runs until cancelled
    sim.close()


def test_a_fixed_recrawl_comes_back_after_the_same_time_whatever_the_page_did(
    tmp_path: Path,
) -> None:
    request = _request(crawl_id="fx", recrawl_interval_hours=1)
    sim, fetched_at = _recrawl_site(tmp_path, request)
    _run_for(sim, hours=3.5)
    assert _gaps_minutes(fetched_at[f"{A}/"]) == pytest.approx([60, 60, 60], abs=0.5)
    assert _gaps_minutes(fetched_at[f"{A}/static"]) == pytest.approx([60, 60, 60], abs=0.5)
    assert (sim.total("fx", "changed"), sim.total("fx", "unchanged")) == (3, 3)
    sim.close()


def _answer(sim: Simulation, url: str) -> None:
    [request] = [r for r in sim.held_fetches if r.url == url]
    sim.held_fetches.remove(request)
    sim.fetch(request)
    sim.run()


def test_recrawls_neither_wait_for_lower_depths_nor_hold_back_deeper_ones(tmp_path: Path) -> None:
    """A depth-ordered crawl leases depth d+1 only once nothing of depth <= d is unfinished. Were
    recrawls counted, a large crawl's lower depths, recrawled all the time, would keep every
    deeper page from its recrawl and every new page from its first fetch."""
    b, c = "https://b.example", "https://c.example"
    site = {f"{A}/": [f"{b}/"], f"{b}/": [f"{c}/"], f"{c}/": []}
    sim = Simulation(tmp_path, partitions=3, site=site)
    request = _request(crawl_id="d", max_depth=3, same_domain="any", recrawl_interval_hours=1)
    sim.start(request.model_copy(update={"politeness_delay_ms": 0}))
    sim.settle(until=lambda: len(sim.fetches) == 3)
    assert [f.depth for f in sim.fetches] == [0, 1, 2]
    sim.auto_fetch = False
    sim.clock.advance_ms(HOUR_MS)
    sim.tick_all()
    sim.run()
    # The seed's recrawl is out at a fetcher; the deeper recrawls are leased all the same.
    assert sorted(f.url for f in sim.held_fetches) == [f"{A}/", f"{b}/", f"{c}/"]
    site[f"{c}/"] = [f"{c}/new"]  # c.example's page changed: a new link, first fetched now
    _answer(sim, f"{c}/")
    assert [f.url for f in sim.held_fetches if f.url == f"{c}/new"] == [f"{c}/new"]
    assert sim.held_fetches[-1].depth == 3
    for url in (f"{A}/", f"{b}/", f"{c}/new"):
        _answer(sim, url)
    counters = [sim.counters("d", p) for p in range(sim.partitions)]
    unfinished = {k: v for c in counters for k, v in c.items() if k.startswith("unfinished_d")}
    assert set(unfinished.values()) <= {0}, unfinished  # no recrawl left a count behind
    sim.close()


def _busy_host_order(tmp_path: Path, config: FrontierConfig) -> list[str]:
    """A host with ten new pages queued and, two leases in, its seed's recrawl due: the order of
    its first twelve fetches (a window of two, each answered in turn)."""
    site = {f"{A}/": [f"/p{n}" for n in range(10)]}
    sim = Simulation(tmp_path, site=site, auto_fetch=False, config=config)
    sim.start(_request(crawl_id="busy", recrawl_interval_hours=0.001, politeness_delay_ms=100))
    sim.run()
    _answer(sim, f"{A}/")  # its links queued, two of them leased (a window of two)
    sim.clock.advance_ms(4_000)  # the seed's recrawl is due: back in the queue
    sim.tick_all()
    while sim.held_fetches and len(sim.fetches) < 12:
        _answer(sim, sim.held_fetches[0].url)
    order = [f.url.removeprefix(A) for f in sim.fetches]
    sim.close()
    return order[:12]


def test_a_busy_host_gives_its_recrawls_a_turn_after_every_four_new_pages(tmp_path: Path) -> None:
    """A recrawl goes behind the URLs waiting for their first fetch, but not forever: the
    recrawls of a host that cannot keep up would otherwise wait for every new page, and a
    continuous crawl's hubs (where new links appear) would go stale."""
    order = _busy_host_order(tmp_path / "share", FrontierConfig())
    assert order == ["/", "/p0", "/p1", "/p2", "/", *(f"/p{n}" for n in range(3, 10))]


def test_with_no_recrawl_turns_a_busy_host_fetches_every_new_page_first(tmp_path: Path) -> None:
    order = _busy_host_order(tmp_path / "strict", FrontierConfig(recrawl_every=0))
    assert order == ["/", *(f"/p{n}" for n in range(10)), "/"]


def _sitemap_says(sim: Simulation, crawl_id: str, url: str, modified_at: int) -> None:
    """A DiscoveredUrls as the parser sends a sitemap's entry with a <lastmod>."""
    message = DiscoveredUrls(
        crawl_id=crawl_id,
        host="a.example",
        depth=1,
        source_url=f"{A}/sitemap.xml",
        discovered_at=sim.clock.now_ms(),
        urls=[DiscoveredUrl(url=url, modified_at=modified_at)],
        origin=f"sitemap-{modified_at}",
    )
    sim.inject(sim.topics.urls, "a.example", message)
    sim.run()
    sim.tick_all()
    sim.run()


def test_a_sitemap_lastmod_after_the_last_fetch_brings_the_recrawl_forward(
    tmp_path: Path,
) -> None:
    def versions(request: FetchRequest, attempt: int) -> dict[str, Any]:
        return {"content_hash": f"version-{attempt}"}

    sim = Simulation(tmp_path, site={f"{A}/": ["/page"]}, script=versions)
    sim.start(_request(crawl_id="lm", recrawl_interval_hours=24, politeness_delay_ms=0))
    sim.settle(until=lambda: len(sim.fetches) == 2)
    fetched_at = sim.clock.now_ms()
    page = f"{A}/page"
    sim.clock.advance_ms(2 * HOUR_MS)
    _sitemap_says(sim, "lm", page, fetched_at - HOUR_MS)  # changed before the fetch: nothing
    assert sim.fetched_urls("lm").count(page) == 1
    _sitemap_says(sim, "lm", page, fetched_at + HOUR_MS)  # changed since: recrawled now
    assert sim.fetched_urls("lm").count(page) == 2
    assert (sim.fetches[-1].url, sim.fetches[-1].content_hash) == (page, "version-1")
    assert sim.total("lm", "recrawls_by_lastmod") == 1
    _sitemap_says(sim, "lm", page, fetched_at + HOUR_MS)  # the same news again: nothing more
    assert sim.fetched_urls("lm").count(page) == 2
    # The recrawl it replaced comes due and is passed over; the next one is 24 h after the early
    # one.
    _run_for(sim, hours=22.5, step_ms=MINUTE_MS)
    assert sim.fetched_urls("lm").count(page) == 2
    _run_for(sim, hours=2, step_ms=MINUTE_MS)
    assert sim.fetched_urls("lm").count(page) == 3
    assert sim.total("lm", "recrawl_scheduled") == 2  # the seed and the page, each once
    assert sim.total("lm", "recrawls") == 2 + 1  # both at 24 h, and the page's early one
    sim.close()


def test_a_recrawl_leased_in_its_turn_is_not_met_again_in_the_same_release(
    tmp_path: Path,
) -> None:
    """A release with room for more than its new pages: the turn leases the first recrawl, the
    new pages follow, and the queue's scan, begun before, reaches that recrawl's old entry. It is
    passed over, not taken for a stale entry and counted out of the host's queue a second time,
    which would leave the host looking empty with a recrawl still queued. (The host was held by a
    Retry-After while three recrawls came due and two pages waited to be retried, so the whole
    window is free when the hold ends.)"""

    def held_once(request: FetchRequest, attempt: int) -> dict[str, Any] | None:
        if request.url in (f"{A}/p0", f"{A}/p1") and attempt == 1:
            return {"kind": "retryable", "status": 500, "page_sent": False, "retry_after_ms": 8000}
        return None

    config = FrontierConfig(fetcher_host_concurrency=4, recrawl_every=2)
    site = {f"{A}/": ["/p0", "/p1", "/q0", "/q1"]}
    sim = Simulation(tmp_path, site=site, auto_fetch=False, script=held_once, config=config)
    sim.start(_request(crawl_id="held", recrawl_interval_hours=0.001, politeness_delay_ms=0))
    sim.run()
    _answer(sim, f"{A}/")  # its four links leased at once (a window of four)
    for page in ("/q0", "/q1", "/p0", "/p1"):  # /p0 and /p1: 500, Retry-After 8 s
        _answer(sim, f"{A}{page}")
    for _ in range(9):  # the three recrawls come due during the hold, then the hold ends
        sim.clock.advance_ms(1_000)
        sim.tick_all()
        sim.run()
    leased = sorted(f.url.removeprefix(A) for f in sim.held_fetches)
    assert leased == ["/", "/p0", "/p1", "/q0"]  # the seed's turn, the retries, then /q0
    [left] = sim.queue(0)
    assert left.url == f"{A}/q1"
    assert sim.handlers[0].memory[0].heap.queued.get("a.example") == 1
    sim.close()
