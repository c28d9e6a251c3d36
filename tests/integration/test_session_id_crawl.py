"""A site that puts a fresh session id in every link of every answer (what Java and PHP servers
do for a client without cookies) is crawled once through the real services (frontier, fetcher,
parser): each page is fetched once, not once per session id (`schemas.canonical`, rule 6)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from schemas.seeds import CrawlRequest
from tests.support import LocalSite, ServiceProcess, crawl_to_the_end

pytestmark = pytest.mark.kafka

PAGES = ("/", "/catalog", "/catalog/kettles", "/about")


class SessionSite(LocalSite):
    """Every page links to every page, each link with a session id never used before."""

    sessions = itertools.count()

    async def _answer(self, request: web.Request) -> web.Response:
        if request.path not in PAGES:
            return await super()._answer(request)
        self.requests.append((0.0, request.path_qs))
        links = []
        for page in PAGES:
            session = f"{next(self.sessions):032X}"
            links.append(f'<a href="{page};jsessionid={session}">{page}</a>')
            links.append(f'<a href="{page}?PHPSESSID={session}">{page}</a>')
        body = f"<html><body>{''.join(links)}</body></html>"
        return web.Response(text=body, content_type="text/html")


@pytest.fixture
def site() -> Iterator[LocalSite]:
    local = SessionSite({"/robots.txt": (200, {}, b"User-agent: *\n")}).start()
    yield local
    local.stop()


def test_session_ids_in_links_do_not_make_new_urls(
    kafka_bootstrap: str, tmp_path: Path, site: LocalSite, started: list[ServiceProcess]
) -> None:
    request = CrawlRequest(
        crawl_id="sessions", seeds=[site.url("/")], max_depth=5, politeness_delay_ms=0
    )
    crawl_to_the_end(kafka_bootstrap, tmp_path, started, request)
    pages = [path for path in site.paths() if path != "/robots.txt"]
    assert sorted(pages) == sorted(PAGES)
