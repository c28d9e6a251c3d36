"""Depth-ordered crawls lease in breadth-first order across partitions (DESIGN.md section 4).

A partition whose shallow URLs are all fetched must not lease deeper URLs while another partition
still has, or is about to receive, URLs of a lower depth. Under a finite budget that keeps the
budget for the shallow URLs (the owner also holds deeper requests until the progress view shows
every lower depth finished everywhere); under a finite max_depth it keeps a URL from being fetched
deeper than its shortest path, which would cut its links at max_depth.
"""

from __future__ import annotations

import random
from collections import deque
from pathlib import Path

import pytest

from schemas.canonical import canonical_url, host_key
from schemas.seeds import CrawlRequest
from tests.unit.frontier.simulation import Simulation, Site

A = "https://a.example"  # partition 0 of 2
B = "https://b.example"  # partition 1 of 2
SITE: Site = {
    f"{A}/root": ["/a1", "/a2", f"{B}/b1"],
    f"{A}/a1": ["/a1x", "/a1y"],
    f"{A}/a2": ["/a2x"],
    f"{B}/b1": ["/b1x"],
}


def crawl(max_links: int, seeds: list[str], max_depth: int = 2) -> CrawlRequest:
    return CrawlRequest(
        crawl_id="spread", seeds=seeds, max_depth=max_depth, max_links=max_links, same_domain="any"
    )


def test_a_slow_partition_keeps_its_share_of_a_shallow_depth(tmp_path: Path) -> None:
    """b1 (depth 1) reaches its partition late; a1x (depth 2) must not take its unit of budget."""
    sim = Simulation(tmp_path, partitions=2, site=SITE, seed=0)
    assert sim.partition_of("a.example") != sim.partition_of("b.example")
    stalled = (sim.topics.urls, sim.partition_of("b.example"))
    sim.blocked.add(stalled)
    sim.start(crawl(4, [f"{A}/root"]))
    sim.settle(rounds=20)
    assert not any(url.endswith(("x", "y")) for url in sim.fetched_urls("spread"))
    sim.blocked.clear()
    sim.settle(until=lambda: sim.status("spread") == "done")
    assert sorted(sim.fetched_urls("spread")) == sorted(
        [f"{A}/root", f"{A}/a1", f"{A}/a2", f"{B}/b1"]
    )
    assert sim.status("spread") == "done"
    sim.close()


def random_site(rng: random.Random, hosts: int, pages: int) -> tuple[Site, str]:
    names = [f"https://h{h}.example" for h in range(hosts)]
    urls = [f"{rng.choice(names)}/p{i}" for i in range(pages)]
    site: Site = {url: rng.sample(urls, rng.randint(1, 4)) for url in urls}
    return site, urls[0]


def bfs_depths(site: Site, seed: str) -> dict[str, int]:
    depths = {seed: 0}
    todo = deque([seed])
    while todo:
        page = todo.popleft()
        for href in site.get(page, []):
            target = canonical_url(href, page)
            if target is not None and target not in depths:
                depths[target] = depths[page] + 1
                todo.append(target)
    return depths


@pytest.mark.parametrize("seed", range(6))
def test_the_fetched_set_is_a_bfs_prefix_whatever_the_interleaving(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    site, root = random_site(rng, hosts=5, pages=40)
    depths = bfs_depths(site, root)
    max_links = rng.randint(3, min(12, len(depths) - 1))
    sim = Simulation(tmp_path, partitions=3, site=site, seed=seed)
    assert len({host_key(url) for url in depths}) > 1
    sim.start(crawl(max_links, [root], max_depth=-1))
    sim.settle(until=lambda: sim.status("spread") == "done")
    fetched = sim.fetched_urls("spread")
    assert len(fetched) == len(set(fetched)) == max_links
    deepest = max(depths[url] for url in fetched)
    shallower = {url for url, depth in depths.items() if depth < deepest}
    assert shallower <= set(fetched), "a deeper URL took the budget of a shallower one"
    assert sim.status("spread") == "done"
    sim.close()


def fetched_depths(sim: Simulation, crawl_id: str) -> dict[str, list[int]]:
    depths: dict[str, list[int]] = {}
    for request in sim.fetches:
        if request.crawl_id == crawl_id:
            depths.setdefault(request.url, []).append(request.depth)
    return depths


def test_a_fast_host_does_not_reach_a_page_deeper_than_its_shortest_path(tmp_path: Path) -> None:
    """While a.example is stalled on a1 (depth 1), b.example's chain would reach b/target at
    depth 4; fetched there, its link b/t1 (depth 3 through a1) would be cut by max_depth 3."""
    site: Site = {
        f"{B}/root": ["/b1", f"{A}/a1"],
        f"{A}/a1": [f"{B}/target"],
        f"{B}/b1": ["/b2"],
        f"{B}/b2": ["/b3"],
        f"{B}/b3": ["/target"],
        f"{B}/target": ["/t1"],
        f"{B}/t1": ["/t2"],
    }
    sim = Simulation(tmp_path, partitions=2, site=site, seed=0)
    assert sim.partition_of("a.example") != sim.partition_of("b.example")
    sim.blocked.add((sim.topics.fetch, sim.partition_of("a.example")))
    sim.start(
        CrawlRequest(
            crawl_id="deep",
            seeds=[f"{B}/root"],
            max_depth=3,
            same_domain="any",
            politeness_delay_ms=0,
        )
    )
    sim.settle(rounds=20)
    leased = {f"{B}/root": [0], f"{B}/b1": [1], f"{A}/a1": [1]}
    assert fetched_depths(sim, "deep") == leased, "b2 waits for a1, which is unfinished"
    sim.blocked.clear()
    sim.settle(until=lambda: sim.status("deep") == "done")
    expected = {url: depth for url, depth in bfs_depths(site, f"{B}/root").items() if depth <= 3}
    assert expected[f"{B}/target"] == 2
    assert expected[f"{B}/t1"] == 3
    assert fetched_depths(sim, "deep") == {url: [depth] for url, depth in expected.items()}
    assert sim.status("deep") == "done"
    sim.close()


@pytest.mark.parametrize("seed", range(6))
def test_max_depth_fetches_every_page_within_it_at_its_shortest_depth(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    site, root = random_site(rng, hosts=5, pages=40)
    max_depth = 3
    expected = {url: depth for url, depth in bfs_depths(site, root).items() if depth <= max_depth}
    sim = Simulation(tmp_path, partitions=3, site=site, seed=seed)
    sim.start(
        CrawlRequest(
            crawl_id="spread",
            seeds=[root],
            max_depth=max_depth,
            same_domain="any",
            politeness_delay_ms=0,
        )
    )
    sim.settle(until=lambda: sim.status("spread") == "done")
    assert fetched_depths(sim, "spread") == {url: [depth] for url, depth in expected.items()}
    assert sim.status("spread") == "done"
    assert not sim.done_while_busy
    sim.close()
