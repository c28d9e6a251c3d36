"""A crawl whose fetcher reaches the web only through a forward proxy (`fetcher.proxy`).

The fetcher may connect to no private or loopback address itself and cannot resolve the site's
name (``site.example``): only the proxy can, and it reaches the site on 127.0.0.1. So every page
fetched, robots.txt included, came through the proxy with its credentials. A seed written as the
site's loopback address is refused by the fetcher before the proxy sees it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.registry import ALL_TOPICS
from schemas.seeds import CrawlRequest
from tests.forward_proxy import ThreadedProxy
from tests.support import Deployment, LocalSite, ServiceProcess, wait_crawl_done

pytestmark = pytest.mark.kafka

HTML = {"Content-Type": "text/html; charset=utf-8"}


@pytest.fixture
def site() -> Iterator[LocalSite]:
    local = LocalSite(
        {
            "/robots.txt": (200, {}, b"User-agent: *\nDisallow: /private\n"),
            "/": (200, HTML, b'<a href="/a">a</a> <a href="/b">b</a> <a href="/private">p</a>'),
            "/a": (200, HTML, b'<a href="/b">b</a>'),
            "/b": (200, HTML, b"<p>leaf</p>"),
        }
    ).start()
    yield local
    local.stop()


@pytest.fixture
def proxy() -> Iterator[ThreadedProxy]:
    running = ThreadedProxy({"site.example": "127.0.0.1"}, ("crawler", "s3cret")).start()
    yield running
    running.stop()


def test_a_crawl_through_a_proxy_fetches_every_page_through_it(
    kafka_bootstrap: str,
    tmp_path: Path,
    site: LocalSite,
    proxy: ThreadedProxy,
    started: list[ServiceProcess],
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    deployment.create(ALL_TOPICS)
    fetcher_env = {
        "STREAMCRAWL_FETCHER__ALLOWED_NETWORKS": "[]",
        "STREAMCRAWL_FETCHER__PROXY__URL": proxy.url,
        "STREAMCRAWL_FETCHER__PROXY__USERNAME": "crawler",
        "STREAMCRAWL_FETCHER__PROXY__PASSWORD": "s3cret",
        "STREAMCRAWL_FETCHER__PROXY__CHECK_TARGETS": "false",
    }
    started.extend(deployment.start_crawler(tmp_path / "logs", fetcher=fetcher_env))
    named = f"http://site.example:{site.port}"
    request = CrawlRequest(
        crawl_id="proxied",
        seeds=[f"{named}/", site.url("/")],
        politeness_delay_ms=0,
        max_retries=0,
    )
    deployment.publish_crawl(request)
    wait_crawl_done(deployment, started, 120)

    assert sorted(site.paths()) == ["/", "/a", "/b", "/robots.txt"]
    assert sorted(proxy.proxy.seen if proxy.proxy else []) == [
        f"GET {named}{path}" for path in ("/", "/a", "/b", "/robots.txt")
    ]
    fetched = _lookup(deployment, f"{named}/b")
    assert (fetched["state"], fetched["last_outcome"]) == ("done", "200"), fetched
    refused = _lookup(deployment, site.url("/"))
    assert refused["state"] == "dead", refused
    dead = deployment.cli("deadletters", "--crawl-id", "proxied", "--json")
    assert dead.returncode == 0, dead.stderr
    assert "blocked_address" in dead.stdout and site.url("/") in dead.stdout, dead.stdout
    fetcher_log = started[1].log_tail(400)
    assert "s3cret" not in fetcher_log

    crawl_log = deployment.cli("log", "proxied")
    assert crawl_log.returncode == 0, crawl_log.stderr
    *fetches, summary = crawl_log.stdout.splitlines()
    assert summary.startswith("5 fetches of crawl proxied: 200=3"), summary
    assert "robots_denied=1" in summary and "permanent=1" in summary
    denied = next(line for line in fetches if f"{named}/private" in line)
    assert denied.split()[2] == "robots_denied", denied
    refused = next(line for line in fetches if f"  {site.url('/')}" in line)
    assert "blocked_address" in refused, refused

    report = deployment.cli("log", "proxied", "--hosts")
    assert report.returncode == 0, report.stderr
    _, *hosts = report.stdout.splitlines()
    counts = {line.split()[0]: line.split()[1:7] for line in hosts}
    assert counts == {
        f"site.example:{site.port}": ["4", "3", "0", "0", "0", "1"],
        f"127.0.0.1:{site.port}": ["1", "0", "0", "0", "0", "1"],
    }


def _lookup(deployment: Deployment, url: str) -> dict[str, object]:
    answer = deployment.cli("url", "proxied", url, "--json")
    assert answer.returncode == 0, answer.stderr
    document: dict[str, object] = json.loads(answer.stdout)
    return document
