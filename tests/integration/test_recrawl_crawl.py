"""An adaptive recrawl through the real services (frontier, fetcher, parser) of a site where one
page changes at every request and the others never do.

The fetcher tells a changed page from an unchanged one (same sha256 as the last fetch); the
frontier schedules each page's next fetch from that (`frontier.recrawl`): the changing page comes
back sooner each time, down to the shortest interval, the others later each time. The progress
counters say what the recrawls found, page by page as the server saw them.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from aiohttp import web

from schemas import progress
from schemas.registry import ALL_TOPICS
from schemas.seeds import CrawlRequest
from schemas.serde import decode
from tests.support import Deployment, LocalSite, ServiceProcess, TopicReader, wait_for

pytestmark = pytest.mark.kafka

HTML = {"Content-Type": "text/html; charset=utf-8"}
INTERVAL_S = 2.0
SHORTEST_S = INTERVAL_S / 4
NEWS_FETCHES = 8


def page(links: list[str]) -> bytes:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return f"<html><body>{anchors}</body></html>".encode()


class NewsSite(LocalSite):
    """/news has a new body at every request; /, /about and /robots.txt never change."""

    async def _answer(self, request: web.Request) -> web.Response:
        response = await super()._answer(request)
        if request.path == "/news":
            response.body = page(["/"]) + f"<!-- edition {len(self.requests)} -->".encode()
        return response


@pytest.fixture
def site() -> Iterator[NewsSite]:
    local = NewsSite(
        {
            "/robots.txt": (200, {"Content-Type": "text/plain"}, b"User-agent: *\nAllow: /\n"),
            "/": (200, HTML, page(["/news", "/about"])),
            "/news": (200, HTML, page(["/"])),
            "/about": (200, HTML, page(["/"])),
        }
    )
    local.start()
    yield local
    local.stop()


def _fetch_times(site: LocalSite, path: str) -> list[float]:
    return [at for at, asked in site.requests if asked == path]


def test_an_adaptive_recrawl_fetches_the_changing_page_sooner_and_the_others_later(
    kafka_bootstrap: str, tmp_path: Path, site: NewsSite, started: list[ServiceProcess]
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    deployment.create(ALL_TOPICS)
    started.extend(deployment.start_crawler(tmp_path / "logs"))
    request = CrawlRequest(
        seeds=[site.url("/")],
        max_depth=1,
        politeness_delay_ms=0,
        recrawl_interval_hours=INTERVAL_S / 3600,
        recrawl_adaptive=True,
    )
    deployment.publish_crawl(request)
    try:
        wait_for(lambda: len(_fetch_times(site, "/news")) >= NEWS_FETCHES, 90, "/news recrawled")
    except TimeoutError:
        for process in started:
            print(process.module, process.log_tail(15))
        raise
    news = list(pairwise(_fetch_times(site, "/news")))[: NEWS_FETCHES - 1]
    gaps = [later - earlier for earlier, later in news]
    # Each recrawl comes after its due time, which the page's interval sets: x 1/1.5 per change.
    due = [max(INTERVAL_S / 1.5**n, SHORTEST_S) for n in range(len(gaps))]
    assert all(gap >= interval * 0.99 for gap, interval in zip(gaps, due, strict=True)), gaps
    assert min(gaps[-3:]) < INTERVAL_S * 0.75, f"the changing page comes back sooner: {gaps}"
    about = _fetch_times(site, "/about")
    growing = [INTERVAL_S * 1.25**n for n in range(len(about) - 1)]
    about_gaps = [later - earlier for earlier, later in pairwise(about)]
    assert all(g >= i * 0.99 for g, i in zip(about_gaps, growing, strict=True)), about_gaps
    assert len(about) < NEWS_FETCHES - 2

    progress_reader = TopicReader(deployment.bootstrap, deployment.topic("progress"))

    def counters() -> dict[str, int]:
        latest: dict[int, dict[str, int]] = {}
        for message in progress_reader.poll():
            if message.value() is not None:
                snapshot = decode(progress.PartitionProgress, message.value())
                latest[snapshot.partition] = snapshot.counters
        total: dict[str, int] = {}
        for partition_counters in latest.values():
            for name, value in partition_counters.items():
                total[name] = total.get(name, 0) + value
        return total

    def counted(total: dict[str, int]) -> bool:
        # /news's recrawls, each found changed (only it ever changes), and some of the others'
        return total.get("changed", 0) >= NEWS_FETCHES - 1 and total.get("unchanged", 0) >= 1

    try:
        wait_for(lambda: counted(counters()), 30, "the recrawls counted")
        total = counters()
    finally:
        progress_reader.close()
    assert total["recrawls"] >= total["changed"] + total["unchanged"], total
