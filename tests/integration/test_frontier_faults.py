"""The frontier killed at each crash point mid-crawl and restarted.

The crawl still fetches every page of the demo site and ends done; pages fetched twice stay
within the leases open at the crash.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from schemas.registry import ALL_TOPICS
from schemas.seeds import CrawlRequest
from streamcrawl.crashpoints import CRASH_EXIT_CODE
from streamcrawl.demo import DemoSite
from tests.support import Deployment, ServiceProcess, TopicReader, crawl_done

pytestmark = pytest.mark.kafka


def crawl_demo(kafka_bootstrap: str, root: Path, crash_at: str | None) -> list[str]:
    """Crawl the demo site with frontier, fetcher and parser processes until done; the frontier
    dies at `crash_at` once and is restarted. Returns the pages the site served, repeats kept."""
    deployment = Deployment(kafka_bootstrap, root, partitions=2)
    deployment.create(ALL_TOPICS)
    site = DemoSite().start()
    processes: list[ServiceProcess] = []

    def start(role: str, **env: str) -> ServiceProcess:
        log = root / "logs" / f"{role}-{len(processes)}.log"
        process = ServiceProcess(role, deployment.env(f"{role}-1", **env), log).start()
        processes.append(process)
        return process

    try:
        frontier = start("frontier", **({"STREAMCRAWL_CRASH_AT": crash_at} if crash_at else {}))
        start("fetcher", STREAMCRAWL_FETCHER__ALLOWED_NETWORKS='["127.0.0.0/8"]')
        start("parser")
        request = CrawlRequest(seeds=[site.seed_url], max_depth=3, politeness_delay_ms=0)
        deployment.publish_crawl(request)
        if crash_at:
            assert frontier.wait(120) == CRASH_EXIT_CODE, frontier.log_tail()
            start("frontier")
        states = TopicReader(deployment.bootstrap, deployment.topic("crawls"))
        states.read_until(crawl_done, 180, "the crawl done")
        return [page for page in site.requests if not page.endswith("/robots.txt")]
    finally:
        for process in processes:
            process.kill()
        site.stop()


def pages_of(served: list[str]) -> set[str]:
    """Served pages without the host:port, which differs between runs."""
    return {page.split("/", 1)[1] for page in served}


@pytest.fixture(scope="module")
def reference(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    served = crawl_demo(kafka_bootstrap, tmp_path_factory.mktemp("reference"), None)
    assert len(served) == len(set(served)), "without faults every page is fetched once"
    return pages_of(served)


@pytest.mark.parametrize(
    "point", ["after_produce:4", "after_delivery:4", "after_offset_store:4", "after_state_write:4"]
)
def test_frontier_killed_at_a_crash_point_loses_no_url(
    kafka_bootstrap: str, tmp_path: Path, reference: set[str], point: str
) -> None:
    served = crawl_demo(kafka_bootstrap, tmp_path, point)
    assert pages_of(served) == reference
    repeats = sum(count - 1 for count in Counter(served).values())
    hosts = {page.split("/", 1)[0] for page in served}
    # Only leases open when the frontier died may be fetched twice: at most the window per host
    # (2 without a politeness delay) for each of the two hosts.
    assert repeats <= 2 * len(hosts), Counter(served).most_common(5)
