"""`streamcrawl url` against a real crawl with two frontier instances: every URL is answered by
the instance holding its host's partition, whichever instance the command asks first.

The site is several hosts (ports of 127.0.0.1), chosen so that each half of the partitions holds
one: the group's range assignment gives each frontier instance one half. Each host serves a page,
a link to another page and a 404, and links the next host.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from schemas.partitioning import partition_for_key
from schemas.registry import ALL_TOPICS
from schemas.seeds import CrawlRequest
from tests.support import (
    CRAWLER_ENV,
    Deployment,
    LocalSite,
    ServiceProcess,
    wait_crawl_done,
    wait_for,
)

pytestmark = pytest.mark.kafka

PARTITIONS = 4
HTML = {"Content-Type": "text/html; charset=utf-8"}
MAX_SITES = 40


def page(links: list[str]) -> bytes:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return f"<html><body>{anchors}</body></html>".encode()


@pytest.fixture
def sites() -> Iterator[list[LocalSite]]:
    """Hosts until both halves of the partitions hold one (each 2 or more apart)."""
    started: list[LocalSite] = []
    halves: set[int] = set()
    while len(started) < 3 or len(halves) < 2:
        assert len(started) < MAX_SITES, "no host landed in one half of the partitions"
        site = LocalSite({}).start()
        started.append(site)
        halves.add(partition_for_key(site.host.encode(), PARTITIONS) * 2 // PARTITIONS)
    for index, site in enumerate(started):
        following = started[(index + 1) % len(started)]
        site.routes.update(
            {
                "/robots.txt": (200, {"Content-Type": "text/plain"}, b"User-agent: *\n"),
                "/": (200, HTML, page(["/a", "/gone", following.url("/")])),
                "/a": (200, HTML, page(["/"])),
            }
        )
    yield started
    for site in started:
        site.stop()


def test_every_url_is_answered_by_the_frontier_holding_its_partition(
    kafka_bootstrap: str, tmp_path: Path, sites: list[LocalSite], started: list[ServiceProcess]
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=PARTITIONS)
    deployment.create(ALL_TOPICS)
    logs = tmp_path / "logs"
    for instance in ("frontier-a", "frontier-b"):
        env = deployment.env(instance)
        started.append(ServiceProcess("frontier", env, logs / f"{instance}.log").start())
    started.append(deployment.start("fetcher", logs, **CRAWLER_ENV["fetcher"]))
    started.append(deployment.start("parser", logs))
    request = CrawlRequest(
        crawl_id="lookup",
        seeds=[sites[0].url("/")],
        max_depth=-1,
        politeness_delay_ms=0,
        domain_whitelist=["127.0.0.1"],  # the other ports: hosts of their own
    )
    deployment.publish_crawl(request)
    wait_crawl_done(deployment, started, 120)

    holders: dict[int, str] = {}

    def both_frontiers_hold_partitions() -> bool:
        holders.clear()
        for member in deployment.live_members("frontier"):
            for entry in member.partitions:
                topic, _, partition = entry.rpartition(":")
                if topic == deployment.topic("urls") and member.ready:
                    holders[int(partition)] = member.instance
        return len(holders) == PARTITIONS and len(set(holders.values())) == 2

    wait_for(both_frontiers_hold_partitions, 60, "two frontiers holding every partition")

    expected: dict[str, tuple[bool, str | None, str | None]] = {}
    for site in sites:
        expected[site.url("/")] = (True, "done", "200")
        expected[site.url("/a")] = (True, "done", "200")
        expected[site.url("/gone")] = (True, "dead", "404")
    expected["https://elsewhere.example/"] = (False, None, None)
    with ThreadPoolExecutor(4) as pool:
        running = {u: pool.submit(deployment.cli, "url", "lookup", u, "--json") for u in expected}
    answers = {url: future.result() for url, future in running.items()}
    answered_by: set[str] = set()
    for url, (admitted, state, outcome) in expected.items():
        answer = answers[url]
        assert answer.returncode == 0, answer.stderr
        status = json.loads(answer.stdout)
        assert (status["url"], status["admitted"]) == (url, admitted)
        assert (status["state"], status["last_outcome"]) == (state, outcome), status
        partition = partition_for_key(status["host"].encode(), PARTITIONS)
        assert status["partition"] == partition
        answered_by.add(holders[partition])
    assert answered_by == {"frontier-a", "frontier-b"}
    outside = json.loads(answers["https://elsewhere.example/"].stdout)
    assert outside["scope"] == "domain"

    missing = deployment.cli("url", "no-such-crawl", sites[0].url("/"))
    assert missing.returncode == 1
    assert "no crawl 'no-such-crawl'" in missing.stderr
