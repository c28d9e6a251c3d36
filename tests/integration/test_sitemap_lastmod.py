"""A sitemap's <lastmod> through the real services (frontier, fetcher, parser): a recrawling crawl
fetches a page again as soon as its sitemap says it changed, before the page's own recrawl is due.

The sitemap changes at every request (a counter in a comment), so its adaptive interval falls to
the shortest, while the page, unchanged, waits longer each time. Then the page changes and the
sitemap's lastmod says so: the page's next fetch comes before the due time the frontier gave it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web

from schemas.registry import ALL_TOPICS
from schemas.seeds import CrawlRequest
from streamcrawl.apis import get_json
from tests.support import Deployment, LocalSite, ServiceProcess, TopicReader, wait_for

pytestmark = pytest.mark.kafka

HTML = {"Content-Type": "text/html; charset=utf-8"}
XML = {"Content-Type": "application/xml"}
HOUR_S = 3600


class NewsSite(LocalSite):
    """/sitemap.xml lists /page with `lastmod` and changes at every request; `page_fetches` holds
    the epoch time of each request for /page."""

    lastmod = "2026-01-01T00:00:00Z"
    page_fetches: list[float]

    async def _answer(self, request: web.Request) -> web.Response:
        if request.path == "/page":
            self.page_fetches.append(time.time())
        response = await super()._answer(request)
        if request.path == "/sitemap.xml":
            response.body = (
                '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<!-- edition {len(self.requests)} --><url><loc>{self.url('/page')}</loc>"
                f"<lastmod>{self.lastmod}</lastmod></url></urlset>"
            ).encode()
        return response


@pytest.fixture
def site() -> Iterator[NewsSite]:
    local = NewsSite({})
    local.page_fetches = []
    local.start()
    local.routes.update(
        {
            "/robots.txt": (
                200,
                {},
                f"User-agent: *\nSitemap: {local.url('/sitemap.xml')}\n".encode(),
            ),
            "/": (200, HTML, f'<a href="{local.url("/page")}">page</a>'.encode()),
            "/page": (200, HTML, b"<p>version 1</p>"),
            "/sitemap.xml": (200, XML, b""),
        }
    )
    yield local
    local.stop()


def test_a_page_whose_sitemap_lastmod_moved_is_fetched_before_its_recrawl_is_due(
    kafka_bootstrap: str, tmp_path: Path, site: NewsSite, started: list[ServiceProcess]
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    deployment.create(ALL_TOPICS)
    started.extend(deployment.start_crawler(tmp_path / "logs"))
    request = CrawlRequest(
        crawl_id="news",
        seeds=[site.url("/")],
        politeness_delay_ms=0,
        use_sitemaps=True,
        recrawl_interval_hours=4 / HOUR_S,
        recrawl_adaptive=True,
        recrawl_min_hours=1 / HOUR_S,
        recrawl_max_hours=60 / HOUR_S,
    )
    deployment.publish_crawl(request)
    try:
        # The page unchanged twice: its interval grows (4 s, 5 s, 6.25 s, ...).
        wait_for(lambda: len(site.page_fetches) >= 3, 90, "/page recrawled twice")
        seen = len(site.page_fetches)
        wait_for(lambda: len(site.page_fetches) > seen, 60, "/page recrawled once more")
    except TimeoutError:
        for process in started:
            print(process.module, process.log_tail(15))
        raise
    [frontier] = [m for m in deployment.live_members("frontier") if m.api_address]
    status = get_json(str(frontier.api_address), "/v1/crawl/news/url", url=site.url("/page"))
    assert status["waiting_for"] == "recrawl", status
    due_s = status["due_ms"] / 1000
    assert due_s - time.time() > 2, "the page's recrawl is still a while away"
    fetches = len(site.page_fetches)
    site.routes["/page"] = (200, HTML, b"<p>version 2</p>")
    site.lastmod = datetime.now(UTC).isoformat(timespec="milliseconds")
    wait_for(lambda: len(site.page_fetches) > fetches, 60, "/page fetched again")
    assert site.page_fetches[fetches] < due_s, "fetched because the sitemap said it changed"

    progress = TopicReader(deployment.bootstrap, deployment.topic("progress"))
    try:
        wait_for(
            lambda: any(b'"recrawls_by_lastmod":1' in (m.value() or b"") for m in progress.poll()),
            30,
            "the early recrawl counted",
        )
    finally:
        progress.close()
