"""Seed 000's example crawl through the whole frontier: BFS prefix, budget, done detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas.seeds import CrawlRequest
from tests.unit.frontier.simulation import Simulation, Site

BASE = "https://example.com"
SITE: Site = {
    f"{BASE}/docs/intro": ["/docs/setup", "/docs/api", "/blog/news"],
    f"{BASE}/docs/setup": ["/docs/config", "/docs/install", "/docs/intro"],
    f"{BASE}/docs/api": ["/docs/api/auth", "/docs/api/rest"],
    f"{BASE}/docs/config": ["/docs/config/advanced", "/docs/setup"],
    f"{BASE}/docs/install": ["/docs/install/linux", "/docs/intro"],
    f"{BASE}/docs/api/auth": ["/docs/api/auth/oauth"],
    f"{BASE}/docs/api/rest": ["/docs/api/rest/v2", "/docs/api"],
    f"{BASE}/blog/news": ["/blog/older"],
}
TRACE_10 = {
    f"{BASE}/docs/{page}"
    for page in ("intro", "setup", "api", "config", "install", "api/auth", "api/rest")
}
TRACE_5 = {f"{BASE}/docs/{page}" for page in ("intro", "setup", "api", "config", "install")}


def seed_request(max_links: int, crawl_id: str = "docs") -> CrawlRequest:
    return CrawlRequest(
        crawl_id=crawl_id,
        seeds=[f"{BASE}/docs/intro"],
        max_depth=2,
        max_links=max_links,
        exclude_pattern="/blog/",
    )


@pytest.mark.parametrize("partitions", [1, 6])
@pytest.mark.parametrize(("max_links", "expected"), [(10, TRACE_10), (5, TRACE_5)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_seed_000_trace(
    tmp_path: Path, partitions: int, max_links: int, expected: set[str], seed: int
) -> None:
    sim = Simulation(tmp_path, partitions=partitions, site=SITE, seed=seed)
    sim.start(seed_request(max_links))
    sim.settle(until=lambda: sim.status("docs") == "done")
    fetched = sim.fetched_urls("docs")
    assert sorted(fetched) == sorted(expected)  # each exactly once
    depths = [request.depth for request in sim.fetches]
    assert depths == sorted(depths), "a deeper page was released before a shallower one"
    assert sim.status("docs") == "done"
    assert not sim.done_while_busy
    assert sim.total("docs", "rejected_exclude") == 1
    assert sim.total("docs", "rejected_depth") >= 1
    sim.close()
