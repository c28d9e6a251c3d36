"""The frontier's Prometheus metrics, read back from the registry the handlers count into."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

from frontier.metrics import FrontierMetrics
from schemas.fetch import FetchRequest
from schemas.seeds import CrawlRequest
from schemas.urls import DiscoveredUrl, DiscoveredUrls
from tests.unit.frontier.simulation import Simulation

A = "https://a.example"
B = "https://b.example"


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(f"streamcrawl_frontier_{name}", labels)
    return 0.0 if found is None else found


def test_admission_release_and_outcomes_are_counted(tmp_path: Path) -> None:
    registry = CollectorRegistry()

    def outcomes(request: FetchRequest, attempt: int) -> dict[str, Any] | None:
        if request.url.endswith("/flaky") and attempt == 1:
            return {"kind": "retryable", "status": 503, "page_sent": False}
        if request.url.endswith("/gone"):
            return {"kind": "permanent", "status": 404, "page_sent": False}
        return None

    site = {f"{A}/": [f"{A}/flaky", f"{A}/gone", f"{A}/x", f"{A}/x", f"{A}/skip/1", f"{B}/"]}
    sim = Simulation(tmp_path, site=site, script=outcomes, registry=registry)
    request = CrawlRequest(
        crawl_id="m", seeds=[f"{A}/"], exclude_pattern="/skip/", same_domain="host"
    )
    sim.start(request)
    sim.settle(until=lambda: sim.status("m") == "done")
    assert sim.status("m") == "done"
    # Seed + 5 distinct links (one twice) on the page, the off-host link in its own message.
    assert value(registry, "urls_discovered_total") == sim.total("m", "discovered") == 7
    assert value(registry, "urls_admitted_total") == 4  # /, flaky, gone, x
    assert value(registry, "urls_duplicate_total") == 1
    assert value(registry, "urls_out_of_scope_total", reason="exclude") == 1
    assert value(registry, "urls_out_of_scope_total", reason="domain") == 1
    assert value(registry, "urls_released_total") == 5  # flaky twice
    assert value(registry, "urls_retried_total") == 1
    assert value(registry, "urls_dead_total") == 1
    assert value(registry, "urls_queued") == 0
    assert value(registry, "leases_open") == 0
    # A finished crawl has no per-crawl series left, from the next progress interval on.
    assert value(registry, "crawl_urls", crawl_id="m", counter="fetched") == 3
    sim.clock.advance_ms(1_000)
    sim.tick_all()
    assert (
        registry.get_sample_value(
            "streamcrawl_frontier_crawl_urls", {"crawl_id": "m", "counter": "fetched"}
        )
        is None
    )
    sim.close()


def test_gauges_show_queued_urls_open_leases_and_waiting_hosts(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    sim = Simulation(tmp_path, auto_fetch=False, registry=registry)
    # No max_depth: the BFS-prefix rule would hold the depth-1 URLs until the seed is fetched.
    sim.start(CrawlRequest(crawl_id="g", seeds=[f"{A}/"], politeness_delay_ms=0, max_depth=-1))
    sim.run()
    links = [DiscoveredUrl(url=f"{A}/{n}") for n in range(5)]
    message = DiscoveredUrls(
        crawl_id="g", host="a.example", depth=1, discovered_at=0, source_url=f"{A}/", urls=links
    )
    sim.inject(sim.topics.urls, "a.example", message)
    sim.run()
    sim.clock.advance_ms(2_000)
    sim.tick_all()
    # Two leases fill a.example's window (no politeness delay): four URLs wait behind them.
    assert value(registry, "leases_open") == 2
    assert value(registry, "urls_queued") == 4
    assert value(registry, "hosts_throttled") == 1
    assert value(registry, "hosts_ready") == 0
    assert value(registry, "oldest_ready_url_age_seconds") == 0
    assert value(registry, "crawl_urls", crawl_id="g", counter="leased") == 2
    assert value(registry, "crawl_urls", crawl_id="g", counter="queued") == 4
    assert value(registry, "crawl_urls", crawl_id="g", counter="admitted") == 6
    text = generate_latest(registry).decode()
    assert "a.example" not in text  # no URL or host label
    sim.close()


def test_a_new_registry_never_inherits_the_metrics_of_one_that_is_gone() -> None:
    # Each registry is dropped before the next is made, so CPython hands most of them the address
    # (and the id) of the one before. Cached by id, the metrics of a dead registry came back, and
    # a test reading its own registry found nothing there (this file's gauge test, now and then).
    for round_number in range(50):
        registry = CollectorRegistry()
        metrics = FrontierMetrics.register(registry)
        assert FrontierMetrics.register(registry) is metrics
        metrics.leases_open.set(round_number + 1)
        assert value(registry, "leases_open") == round_number + 1
        del registry, metrics
        gc.collect()


def test_the_service_registers_them_on_the_default_registry() -> None:
    metrics = FrontierMetrics.register()
    assert FrontierMetrics.register() is metrics
    text = generate_latest(REGISTRY).decode()
    for name in (
        "streamcrawl_frontier_urls_discovered_total",
        "streamcrawl_frontier_urls_queued",
        "streamcrawl_frontier_leases_open",
        "streamcrawl_frontier_hosts_throttled",
        "streamcrawl_frontier_hosts_held",
        "streamcrawl_frontier_host_holds_total",
        "streamcrawl_frontier_oldest_ready_url_age_seconds",
    ):
        assert name in text
