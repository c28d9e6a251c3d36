"""`streamcrawl duplicates` through the real services (frontier, fetcher, parser): the URLs of a
crawl that got the same body, read from `outcomes`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.seeds import CrawlRequest
from tests.support import LocalSite, ServiceProcess, crawl_to_the_end

pytestmark = pytest.mark.kafka

HTML = {"Content-Type": "text/html; charset=utf-8"}
HOME = b'<html><body><a href="/?from=nav">home</a><a href="/Index.html">index</a>' + (
    b'<a href="/offer">offer</a><a href="/print/offer">print</a></body></html>'
)
OFFER = b"<html><body><h1>Kettles</h1></body></html>"


@pytest.fixture
def site() -> Iterator[LocalSite]:
    local = LocalSite(
        {
            "/robots.txt": (200, {}, b"User-agent: *\n"),
            "/": (200, HTML, HOME),
            "/?from=nav": (200, HTML, HOME),
            "/Index.html": (200, HTML, HOME),
            "/offer": (200, HTML, OFFER),
            "/print/offer": (200, HTML, OFFER + b"<!-- print -->"),
        }
    ).start()
    yield local
    local.stop()


def test_duplicates_groups_the_urls_that_got_the_same_body(
    kafka_bootstrap: str, tmp_path: Path, site: LocalSite, started: list[ServiceProcess]
) -> None:
    request = CrawlRequest(crawl_id="dups", seeds=[site.url("/")], politeness_delay_ms=0)
    deployment = crawl_to_the_end(kafka_bootstrap, tmp_path, started, request)

    listed = deployment.cli("duplicates", "dups")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("3 URLs, sha256 ")
    assert sorted(lines[1:]) == sorted(
        f"  {site.url(path)}" for path in ("/", "/?from=nav", "/Index.html")
    )
    assert "1 group of duplicate pages in crawl dups" in listed.stderr

    as_json = deployment.cli("duplicates", "dups", "--json")
    [group] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert len(group["sha256"]) == 64 and len(group["urls"]) == 3
