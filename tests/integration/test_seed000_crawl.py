"""Seed document 000's example crawled by the real services (frontier, fetcher, parser, each a
process) through a real broker, against the example site served locally.

max_depth=2 with max_links=10 must fetch exactly intro, setup, api, config, install, api/auth and
api/rest; max_links=5 exactly intro, setup, api, config and install; /blog/news is excluded by
pattern; no depth d+1 page reaches the server before every depth-d page; and the crawl's status
becomes done. With `urls` at 1 and at 6 partitions.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.registry import ALL_TOPICS
from schemas.seeds import CrawlRequest
from tests.support import Deployment, LocalSite, ServiceProcess, wait_crawl_done

pytestmark = pytest.mark.kafka

LINKS = {
    "/docs/intro": ["/docs/setup", "/docs/api", "/blog/news"],
    "/docs/setup": ["/docs/config", "/docs/install", "/docs/intro"],
    "/docs/api": ["/docs/api/auth", "/docs/api/rest"],
    "/docs/config": ["/docs/config/advanced"],
    "/docs/install": ["/docs/install/linux"],
    "/docs/api/auth": ["/docs/api/auth/tokens"],
    "/docs/api/rest": ["/docs/api/rest/errors"],
    "/blog/news": ["/docs/intro"],
}
DEPTH = {
    "/docs/intro": 0,
    "/docs/setup": 1,
    "/docs/api": 1,
    "/docs/config": 2,
    "/docs/install": 2,
    "/docs/api/auth": 2,
    "/docs/api/rest": 2,
}


def html(path: str) -> bytes:
    anchors = "".join(f'<li><a href="{target}">{target}</a></li>' for target in LINKS.get(path, []))
    return f"<html><body><h1>{path}</h1><ul>{anchors}</ul></body></html>".encode()


@pytest.fixture
def site() -> Iterator[LocalSite]:
    pages = {p for p in LINKS} | {t for targets in LINKS.values() for t in targets}
    routes = {p: (200, {"Content-Type": "text/html; charset=utf-8"}, html(p)) for p in pages}
    local = LocalSite(routes).start()
    yield local
    local.stop()


def run_stack(deployment: Deployment, started: list[ServiceProcess]) -> None:
    started.extend(deployment.start_crawler(deployment.root / "logs"))


@pytest.mark.parametrize("partitions", [1, 6])
@pytest.mark.parametrize(
    ("max_links", "expected"),
    [
        (
            10,
            [
                "/docs/intro",
                "/docs/setup",
                "/docs/api",
                "/docs/config",
                "/docs/install",
                "/docs/api/auth",
                "/docs/api/rest",
            ],
        ),
        (5, ["/docs/intro", "/docs/setup", "/docs/api", "/docs/config", "/docs/install"]),
    ],
)
def test_seed_000_example_through_the_real_services(
    kafka_bootstrap: str,
    tmp_path: Path,
    site: LocalSite,
    started: list[ServiceProcess],
    partitions: int,
    max_links: int,
    expected: list[str],
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=partitions)
    deployment.create(ALL_TOPICS)
    run_stack(deployment, started)
    request = CrawlRequest(
        seeds=[site.url("/docs/intro")],
        max_depth=2,
        max_links=max_links,
        exclude_pattern="/blog/",
        politeness_delay_ms=0,
    )
    deployment.publish_crawl(request)
    wait_crawl_done(deployment, started, 120)
    fetched = [path for path in site.paths() if path != "/robots.txt"]
    assert sorted(fetched) == sorted(expected)
    assert len(fetched) == len(set(fetched)), "every page fetched once"
    depths = [DEPTH[path] for path in fetched]
    assert depths == sorted(depths), f"BFS order at the server: {fetched}"
