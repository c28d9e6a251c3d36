"""Outcomes through the handler: retries, dead letters, 429 windows, expiry, redirects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from frontier.budget import blocking_depth
from frontier.config import FrontierConfig
from frontier.records import ReportWait
from schemas.fetch import FetchRequest
from schemas.outcomes import FetchOutcome
from schemas.seeds import CrawlRequest
from schemas.urls import DiscoveredUrl, DiscoveredUrls
from tests.unit.frontier.simulation import Simulation

A = "https://a.example"
B = "https://b.example"


def outcome_for(request: FetchRequest, **fields: Any) -> FetchOutcome:
    values: dict[str, Any] = {"kind": "done", "status": 200, "page_sent": False}
    values.update(fields)
    return FetchOutcome(
        crawl_id=request.crawl_id,
        url=request.url,
        host=request.host,
        lease_id=request.lease_id,
        depth=request.depth,
        redirect_hops=request.redirect_hops,
        fetched_at=1,
        **values,
    )


def held_hosts(sim: Simulation) -> float:
    """The ``hosts_held`` gauge, set by the tick one progress interval from now."""
    sim.clock.advance_ms(sim.config.progress_interval_ms)
    sim.tick_all()
    [sample] = sim.metrics.hosts_held.collect()[0].samples
    return sample.value


def published(sim: Simulation, crawl_id: str, counter: str) -> int:
    """The counter in the crawl's latest progress snapshots, summed over partitions."""
    sim.run()  # the snapshots the last tick published
    history = sim.book.snapshots(crawl_id).values()
    return sum(snapshots[-1].counters.get(counter, 0) for snapshots in history)


def answer(sim: Simulation, request: FetchRequest, **fields: Any) -> None:
    sim.inject(sim.topics.outcomes, request.host, outcome_for(request, **fields))
    sim.run()


def answered_by_hand(
    tmp_path: Path, crawl_id: str, seeds: list[str], host_concurrency: int = 2, **request: Any
) -> Simulation:
    """A crawl of `seeds` without a politeness delay, run until its first fetches wait for the
    test to answer them (`held_fetches`)."""
    config = FrontierConfig(fetcher_host_concurrency=host_concurrency)
    sim = Simulation(tmp_path, site={}, config=config, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id=crawl_id, seeds=seeds, politeness_delay_ms=0, **request))
    sim.run()
    return sim


def test_retry_waits_for_its_backoff_then_succeeds(tmp_path: Path) -> None:
    def flaky(request: FetchRequest, attempt: int) -> dict[str, Any] | None:
        if attempt <= 2:  # Retry-After 30 s, longer than the backoff
            return {
                "kind": "retryable",
                "status": 500,
                "page_sent": False,
                "retry_after_ms": 30_000,
            }
        return None

    sim = Simulation(tmp_path, site={}, script=flaky)
    sim.start(CrawlRequest(crawl_id="r", seeds=[f"{A}/flaky"]))
    sim.run()
    assert len(sim.fetches) == 1
    assert sim.total("r", "delayed") == 1
    sim.clock.advance_ms(29_000)
    sim.tick_all()
    assert len(sim.fetches) == 1  # not before Retry-After
    sim.clock.advance_ms(2_000)
    sim.tick_all()
    sim.run()
    assert len(sim.fetches) == 2
    sim.clock.advance_ms(31_000)
    sim.tick_all()
    sim.run()
    assert len(sim.fetches) == 3
    assert sim.total("r", "retried") == 2
    assert sim.total("r", "fetched") == 1
    assert sim.total("r", "delayed") == 0
    assert sim.dead_letters == []
    sim.close()


def test_dead_after_max_retries_with_a_dead_letter(tmp_path: Path) -> None:
    def broken(request: FetchRequest, attempt: int) -> dict[str, Any]:
        return {"kind": "retryable", "status": 500, "page_sent": False, "error": "boom"}

    sim = Simulation(tmp_path, site={}, script=broken)
    sim.start(CrawlRequest(crawl_id="d", seeds=[f"{A}/broken"], max_retries=2))
    sim.settle(until=lambda: sim.status("d") == "done")
    assert len(sim.fetches) == 3
    assert sim.total("d", "retried") == 2
    assert sim.total("d", "dead") == 1
    assert sim.total("d", "failed") == 3
    [letter] = sim.dead_letters
    assert letter.stage == "frontier"
    assert letter.topic == sim.topics.outcomes
    assert letter.error.startswith("retries_exhausted")
    assert FetchOutcome.model_validate_json(letter.payload).url == f"{A}/broken"
    assert sim.status("d") == "done"
    sim.close()


def test_429_shrinks_the_window_to_one_lease(tmp_path: Path) -> None:
    sim = answered_by_hand(tmp_path, "w", [f"{A}/{n}" for n in range(10)], host_concurrency=4)
    first = list(sim.held_fetches)
    assert len(first) == 4  # max(2, per-host concurrency) without a politeness delay
    answer(sim, first[0], kind="retryable", status=429)  # no Retry-After: no hold
    answer(sim, first[1])
    answer(sim, first[2])
    assert len(sim.fetches) == 4  # three in flight, window of one: nothing new
    answer(sim, first[3])
    assert len(sim.fetches) == 5
    for _ in range(3):
        answer(sim, sim.held_fetches[-1])
        assert sim.total("w", "leased") == 1
    assert len(sim.fetches) == 8
    sim.close()


def test_a_retry_after_holds_the_whole_host_and_spends_one_retry(tmp_path: Path) -> None:
    seeds = [f"{A}/{n}" for n in range(10)] + ["https://b.example/1", "https://b.example/2"]
    sim = answered_by_hand(tmp_path, "h", seeds, host_concurrency=4)
    on_a = [request for request in sim.held_fetches if request.host == "a.example"]
    assert len(on_a) == 4
    answer(sim, on_a[0], kind="retryable", status=503, retry_after_ms=60_000)
    for request in on_a[1:]:
        answer(sim, request)
    on_b = [request for request in sim.held_fetches if request.host == "b.example"]
    for request in on_b:
        answer(sim, request)
    assert [r.host for r in sim.fetches].count("a.example") == 4  # held: nothing more leased
    assert sim.total("h", "fetched") == 5  # three of a.example, both of b.example
    sim.clock.advance_ms(58_000)
    assert held_hosts(sim) == 1  # a progress interval later: 59 s
    assert published(sim, "h", "hosts_held") == 1  # the crawl's progress says it waits for it
    sim.run()
    assert [r.host for r in sim.fetches].count("a.example") == 4
    sim.clock.advance_ms(2_000)
    sim.tick_all()
    sim.run()
    assert [r.host for r in sim.fetches].count("a.example") == 5  # the window is one after a 503
    while sim.held_fetches and sim.held_fetches[-1].host == "a.example":
        answer(sim, sim.held_fetches.pop())
        sim.tick_all()
        sim.run()
    assert sim.total("h", "fetched") == 12
    assert published(sim, "h", "hosts_held") == 0
    assert sim.total("h", "retried") == 1  # only the URL that met the 503
    assert sim.total("h", "host_holds") == 1
    assert sim.metrics.host_holds._value.get() == 1
    assert sim.dead_letters == []
    sim.close()


def test_admissions_and_a_restart_do_not_release_a_held_host(tmp_path: Path) -> None:
    # Unlimited depth: nothing but the hold stops its links.
    sim = answered_by_hand(tmp_path, "r", [f"{A}/robots-down"], max_depth=-1)
    [first] = sim.held_fetches
    error = "robots.txt unreachable: http_status: 503"
    answer(sim, first, kind="retryable", status=None, error=error, retry_after_ms=1_800_000)
    found = DiscoveredUrls(
        crawl_id="r",
        host="a.example",
        depth=1,
        source_url=f"{A}/elsewhere",
        discovered_at=1,
        urls=[DiscoveredUrl(url=f"{A}/{n}") for n in range(3)],
    )
    sim.inject(sim.topics.urls, "a.example", found)
    sim.run()
    sim.tick_all()
    sim.run()
    assert len(sim.fetches) == 1
    sim.restart(0)  # memory forgets the hold; the stored one still counts
    sim.clock.advance_ms(1_799_000)
    sim.tick_all()
    sim.run()
    assert len(sim.fetches) == 1
    sim.clock.advance_ms(2_000)
    sim.tick_all()
    sim.run()
    assert len(sim.fetches) == 3  # the normal window of two
    sim.close()


def test_a_longer_hold_is_not_shortened(tmp_path: Path) -> None:
    sim = answered_by_hand(tmp_path, "l", [f"{A}/{n}" for n in range(4)])
    first, second = sim.held_fetches
    answer(sim, first, kind="retryable", status=429, retry_after_ms=120_000)
    answer(sim, second, kind="retryable", status=429, retry_after_ms=10_000)
    sim.clock.advance_ms(60_000)
    sim.tick_all()
    sim.run()
    assert len(sim.fetches) == 2
    assert sim.total("l", "host_holds") == 1
    sim.clock.advance_ms(61_000)
    sim.tick_all()
    sim.run()
    assert len(sim.fetches) == 3
    sim.close()


def test_an_expired_lease_is_queued_again_and_its_late_outcome_ignored(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, site={}, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id="e", seeds=[f"{A}/slow"]))
    sim.run()
    [first] = sim.held_fetches
    sim.clock.advance_ms(first.deadline - sim.clock.now_ms() - 1)
    sim.tick_all()
    assert len(sim.fetches) == 1
    sim.clock.advance_ms(2)
    sim.tick_all()
    sim.run()
    assert len(sim.fetches) == 2
    second = sim.held_fetches[-1]
    assert second.url == first.url
    assert second.lease_id != first.lease_id
    assert sim.total("e", "expired") == 1
    answer(sim, first)
    assert sim.total("e", "outcomes_ignored") == 1
    assert sim.total("e", "leased") == 1
    answer(sim, second)
    assert sim.total("e", "fetched") == 1
    assert sim.total("e", "leased") == 0
    sim.close()


def test_one_terminal_outcome_per_lease(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, site={}, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id="o", seeds=[f"{A}/1", f"{A}/2", f"{A}/3"]))
    sim.run()
    request = sim.held_fetches[0]
    answer(sim, request)
    before = dict(sim.counters("o", 0))
    fetches = len(sim.fetches)
    answer(sim, request)
    after = dict(sim.counters("o", 0))
    assert after.pop("outcomes_ignored") == 1
    assert after == before
    assert len(sim.fetches) == fetches
    sim.close()


def test_redirects_keep_the_depth_and_count_hops(tmp_path: Path) -> None:
    redirects = {
        f"{A}/old": "/new",
        f"{A}/r1": "/r2",
        f"{A}/r2": "/r3",
        f"{A}/ftp": "ftp://files.example/x",
        f"{A}/away": "https://b.example/landing",
    }

    def redirecting(request: FetchRequest, attempt: int) -> dict[str, Any] | None:
        target = redirects.get(request.url)
        if target is None:
            return None
        return {"kind": "redirect", "status": 301, "redirect_to": target, "page_sent": False}

    site = {f"{A}/": ["/old", "/r1", "/ftp", "/away"]}
    sim = Simulation(tmp_path, partitions=2, site=site, script=redirecting)
    request = CrawlRequest(crawl_id="rd", seeds=[f"{A}/"], max_redirects=1, same_domain="any")
    sim.start(request)
    sim.settle(until=lambda: sim.status("rd") == "done")
    by_url = {fetch.url: fetch for fetch in sim.fetches}
    assert (by_url[f"{A}/new"].depth, by_url[f"{A}/new"].redirect_hops) == (1, 1)
    assert (by_url[f"{A}/r2"].depth, by_url[f"{A}/r2"].redirect_hops) == (1, 1)
    assert "https://b.example/landing" in by_url
    assert f"{A}/r3" not in by_url  # a second hop is more than max_redirects
    assert sim.total("rd", "redirects") == 3
    assert sim.total("rd", "redirect_refused") == 1
    [letter] = sim.dead_letters
    assert letter.error.startswith("too_many_redirects")
    assert sim.status("rd") == "done"
    sim.close()


def test_a_page_refresh_is_admitted_at_the_page_depth_and_keeps_bfs_moving(
    tmp_path: Path,
) -> None:
    """The parser sends a refresh target at its page's depth and says so in the report
    (``redirect_messages``): a depth-ordered crawl counts it there, so depth 1 opens once it is
    admitted. Counted one depth deeper, depth 1 would look unfinished forever, holding back
    depth 2 (whether it already leased some depends on when the snapshots travel)."""
    site = {f"{A}/": ["/b"], f"{B}/moved": ["/c"], f"{B}/c": ["/d"]}
    sim = Simulation(tmp_path, partitions=2, site=site, refreshes={f"{A}/": f"{B}/moved"})
    request = CrawlRequest(crawl_id="rf", seeds=[f"{A}/"], max_depth=2, same_domain="any")
    sim.start(request)
    sim.settle(until=lambda: sim.status("rf") == "done")
    by_url = {fetch.url: fetch for fetch in sim.fetches}
    assert (by_url[f"{B}/moved"].depth, by_url[f"{B}/moved"].redirect_hops) == (0, 1)
    assert (by_url[f"{B}/c"].depth, by_url[f"{B}/c"].redirect_hops) == (1, 0)
    assert (by_url[f"{A}/b"].depth, by_url[f"{A}/b"].redirect_hops) == (1, 0)
    assert by_url[f"{B}/d"].depth == 2
    assert sim.status("rf") == "done"
    assert blocking_depth(sim.counters("rf", p) for p in range(2)) is None
    sim.close()


def test_page_requisites_come_from_any_site_at_their_pages_depth_in_bfs_order(
    tmp_path: Path,
) -> None:
    """A depth-ordered crawl limited to depth 0 and the seed's host still fetches the seed's
    requisites on another host, at depth 0 with one hop, and a stylesheet's own font with one
    more; the crawl ends. Past ``max_redirects``, a requisite of a requisite is refused."""
    requisites = {
        f"{A}/": [f"{B}/site.css", "/logo.png"],
        f"{B}/site.css": ["/font.woff2"],
        f"{B}/font.woff2": ["/deeper.png"],
    }
    site = {f"{A}/": ["/next"]}
    sim = Simulation(tmp_path, partitions=2, site=site, requisites=requisites)
    request = CrawlRequest(
        crawl_id="req", seeds=[f"{A}/"], max_depth=0, fetch_page_requisites=True, max_redirects=2
    )
    sim.start(request)
    sim.settle(until=lambda: sim.status("req") == "done")
    fetched = {fetch.url: (fetch.depth, fetch.redirect_hops) for fetch in sim.fetches}
    assert fetched == {
        f"{A}/": (0, 0),
        f"{B}/site.css": (0, 1),
        f"{A}/logo.png": (0, 1),
        f"{B}/font.woff2": (0, 2),
    }
    assert all(fetch.find_requisites and fetch.content_types == ["*/*"] for fetch in sim.fetches)
    assert sim.total("req", "rejected_redirects") == 1  # /deeper.png, a third hop
    assert sim.total("req", "rejected_depth") == 1  # /next, a link
    assert blocking_depth(sim.counters("req", p) for p in range(2)) is None
    sim.close()


def test_a_host_delay_reaches_the_fetches_of_its_hosts_only(tmp_path: Path) -> None:
    """The fetcher keeps the gap each FetchRequest names (`fetcher.politeness`): the frontier
    names the host's own delay, and the crawl's for the other hosts."""
    site = {f"{A}/": [f"{B}/", "/a"], f"{B}/": ["/b", "/c"]}
    sim = Simulation(tmp_path, partitions=2, site=site)
    request = CrawlRequest(
        crawl_id="hd",
        seeds=[f"{A}/"],
        same_domain="any",
        politeness_delay_ms=0,
        host_delays_ms={"b.example": 5000},
    )
    sim.start(request)
    sim.settle(until=lambda: sim.status("hd") == "done")
    delays = {fetch.url: fetch.politeness_delay_ms for fetch in sim.fetches}
    assert delays == {f"{A}/": 0, f"{A}/a": 0, f"{B}/": 5000, f"{B}/b": 5000, f"{B}/c": 5000}
    sim.close()


def test_a_chain_of_refreshes_longer_than_max_redirects_is_refused(tmp_path: Path) -> None:
    refreshes = {f"{A}/r1": "/r2", f"{A}/r2": "/r3", f"{A}/r3": "/r4"}
    sim = Simulation(tmp_path, partitions=2, site={f"{A}/": ["/r1"]}, refreshes=refreshes)
    request = CrawlRequest(crawl_id="rc", seeds=[f"{A}/"], max_redirects=2)
    sim.start(request)
    sim.settle(until=lambda: sim.status("rc") == "done")
    fetched = {fetch.url: fetch.redirect_hops for fetch in sim.fetches}
    assert fetched == {f"{A}/": 0, f"{A}/r1": 0, f"{A}/r2": 1, f"{A}/r3": 2}
    assert sim.total("rc", "rejected_redirects") == 1
    sim.close()


def test_a_redirect_to_itself_fetches_the_url_again_until_max_redirects(tmp_path: Path) -> None:
    """A site that sets a cookie and sends the client back to the same URL: the URL is fetched
    again (with the cookie, when the crawl keeps them), not lost as a duplicate of itself."""

    def cookie_check(request: FetchRequest, attempt: int) -> dict[str, Any] | None:
        once = request.url == f"{A}/once" and attempt == 1
        if once or request.url == f"{A}/always":
            return {"kind": "redirect", "status": 302, "redirect_to": request.url}
        return None

    site = {f"{A}/": ["/once", "/always"]}
    sim = Simulation(tmp_path, partitions=2, site=site, script=cookie_check)
    sim.start(CrawlRequest(crawl_id="self", seeds=[f"{A}/"], max_redirects=2))
    sim.settle(until=lambda: sim.status("self") == "done")
    hops = [(fetch.url, fetch.redirect_hops) for fetch in sim.fetches if fetch.url != f"{A}/"]
    assert [hop for hop in hops if hop[0] == f"{A}/once"] == [(f"{A}/once", 0), (f"{A}/once", 1)]
    assert [hop for hop in hops if hop[0] == f"{A}/always"] == [
        (f"{A}/always", 0),
        (f"{A}/always", 1),
        (f"{A}/always", 2),
    ]
    assert sim.total("self", "redirects_to_self") == 3
    [letter] = sim.dead_letters
    assert letter.error.startswith("too_many_redirects")
    assert sim.total("self", "fetched") == 2  # the seed and /once
    sim.close()


def test_urls_are_counted_once_each_by_their_latest_outcome(tmp_path: Path) -> None:
    """``outcome_<label>`` counts each URL under its latest outcome: the HTTP status, or the kind
    when there was none. A retried URL moves from its failure's count to its success's."""
    answers: dict[str, list[dict[str, Any]]] = {
        f"{A}/flaky": [{"kind": "retryable", "status": 503, "page_sent": False}],
        f"{A}/gone": [{"kind": "permanent", "status": 404, "page_sent": False}],
        f"{A}/moved": [{"kind": "redirect", "status": 301, "redirect_to": "/", "page_sent": False}],
        f"{A}/down": [{"kind": "retryable", "status": None, "error": "refused", "page_sent": False}]
        * 2,
    }

    def scripted(request: FetchRequest, attempt: int) -> dict[str, Any] | None:
        script = answers.get(request.url, [])
        return script[attempt - 1] if attempt <= len(script) else None

    site = {f"{A}/": [f"{A}/{page}" for page in ("flaky", "gone", "moved", "down", "ok")]}
    sim = Simulation(tmp_path, partitions=2, site=site, script=scripted)
    sim.start(CrawlRequest(crawl_id="l", seeds=[f"{A}/"], max_retries=1))
    sim.settle(until=lambda: sim.status("l") == "done")
    assert sim.attempts[f"{A}/flaky"] == 2 and sim.attempts[f"{A}/down"] == 2
    by_outcome = {
        name: published(sim, "l", f"outcome_{name}")
        for name in ("200", "301", "404", "503", "retryable")
    }
    # /, /flaky (503, then 200) and /ok; /down failed twice without a status.
    assert by_outcome == {"200": 3, "301": 1, "404": 1, "503": 0, "retryable": 1}
    sim.close()


def test_a_report_before_its_outcome_does_not_hold_the_depth(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, site={f"{A}/": ["/1"]}, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id="early", seeds=[f"{A}/"], max_links=10))
    sim.run()
    [seed] = sim.held_fetches
    sim.fetch(seed)
    sim.run([sim.topics.urls])  # links and report first: depth 1 waits for the lease of depth 0
    assert len(sim.fetches) == 1
    sim.settle(until=lambda: len(sim.fetches) == 2)  # depth 1's budget waits for progress
    assert [request.url for request in sim.fetches] == [f"{A}/", f"{A}/1"]
    record = sim.record("early", 0)
    assert record is not None
    assert record.unfinished == {"1": 1}
    [(_, raw)] = sim.stores[0].scan("reports")
    assert ReportWait.decode(raw).state == "reported"  # kept: a repeat of either counts nothing
    assert record.counters.get("reports_waiting", 0) == 0
    sim.close()
