"""`--page-requisites` through the real frontier, fetcher, parser and storage: a crawl limited to
the seed page still fetches and archives what the page needs to be shown, from another site too,
and a stylesheet's font and import; the links stay within the crawl's scope."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.registry import ALL_TOPICS
from schemas.seeds import CrawlRequest
from tests.integration.storage_support import warc_records
from tests.support import Deployment, LocalSite, ServiceProcess, wait_crawl_done, wait_for

pytestmark = pytest.mark.kafka

HTML = {"Content-Type": "text/html; charset=utf-8"}
CSS = {"Content-Type": "text/css"}
PNG = {"Content-Type": "image/png"}


@pytest.fixture
def cdn() -> Iterator[LocalSite]:
    local = LocalSite(
        {
            "/robots.txt": (200, {}, b"User-agent: *\n"),
            "/app.js": (200, {"Content-Type": "text/javascript"}, b"console.log(1)"),
            "/font.woff2": (200, {"Content-Type": "font/woff2"}, b"wOF2 font bytes"),
            "/page": (200, HTML, b"<html><body>a page of another site</body></html>"),
        }
    ).start()
    yield local
    local.stop()


@pytest.fixture
def site(cdn: LocalSite) -> Iterator[LocalSite]:
    home = (
        '<html><head><link rel="stylesheet" href="/site.css">'
        f'<script src="{cdn.url("/app.js")}"></script></head>'
        '<body><img src="/logo.png" srcset="/logo-2x.png 2x"><img src="/missing.png">'
        '<a href="/about">about</a>'
        f'<a href="{cdn.url("/page")}">elsewhere</a></body></html>'
    )
    stylesheet = f'@import "/print.css"; @font-face {{ src: url({cdn.url("/font.woff2")}) }}'
    local = LocalSite(
        {
            "/robots.txt": (200, {}, b"User-agent: *\n"),
            "/": (200, HTML, home.encode()),
            "/site.css": (200, CSS, stylesheet.encode()),
            "/print.css": (200, CSS, b"body { background: url(/paper.png) }"),
            "/logo.png": (200, PNG, b"\x89PNG logo"),
            "/logo-2x.png": (200, PNG, b"\x89PNG logo 2x"),
            "/paper.png": (200, PNG, b"\x89PNG paper"),
            "/about": (200, HTML, b"<html><body>about us</body></html>"),
        }
    ).start()
    yield local
    local.stop()


def test_a_crawl_of_one_page_archives_what_the_page_needs(
    kafka_bootstrap: str,
    tmp_path: Path,
    site: LocalSite,
    cdn: LocalSite,
    started: list[ServiceProcess],
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    deployment.create(ALL_TOPICS)
    storage_root = tmp_path / "storage"
    logs = tmp_path / "logs"
    started.extend(deployment.start_crawler(logs))
    started.append(deployment.start("storage", logs, STREAMCRAWL_STORAGE__ROOT=str(storage_root)))
    request = CrawlRequest(
        crawl_id="archive",
        seeds=[site.url("/")],
        max_depth=0,
        politeness_delay_ms=0,
        fetch_page_requisites=True,
    )
    deployment.publish_crawl(request)
    wait_crawl_done(deployment, started, 120)

    requisites = {
        site.url(path): media
        for path, media in (
            ("/site.css", "text/css"),
            ("/print.css", "text/css"),
            ("/logo.png", "image/png"),
            ("/logo-2x.png", "image/png"),
            ("/paper.png", "image/png"),
        )
    } | {cdn.url("/app.js"): "text/javascript", cdn.url("/font.woff2"): "font/woff2"}
    fetched = _fetch_log(deployment)
    assert fetched == {site.url("/"): "text/html", **requisites}
    assert "/about" not in site.paths() and "/page" not in cdn.paths()  # links past depth 0

    def archived() -> Counter[str]:
        return Counter(uri for kind, uri, _ in warc_records(storage_root) if kind == "response")

    wait_for(lambda: set(fetched) <= set(archived()), 60, "every fetch archived")
    assert all(count == 1 for count in archived().values())

    # The missing image is a broken requisite of the page: `broken` names the page (the link
    # graph is not running here, which it says, with exit status 1).
    report = deployment.cli("broken", "archive")
    assert report.stdout.splitlines() == [
        f"404     {site.url('/missing.png')}  (permanent)",
        f"        <- {site.url('/')}  [requisite]",
    ], report.stderr
    assert "1 broken URL in crawl archive, linked from 1 page" in report.stderr


def _fetch_log(deployment: Deployment) -> dict[str, str]:
    """URL -> media type of each fetch of the crawl, from `streamcrawl log --json`."""
    listed = deployment.cli("log", "archive", "--limit", "-1", "--json")
    assert listed.returncode == 0, listed.stderr
    lines = [json.loads(line) for line in listed.stdout.splitlines()]
    return {line["url"]: line["content_type"] for line in lines if line["status"] == 200}
