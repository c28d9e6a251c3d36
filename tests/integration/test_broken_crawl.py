"""`streamcrawl broken` through the real services (frontier, fetcher, parser, linkgraph): a
crawl's dead URLs, each with the pages linking to it and their anchor texts, and nothing for a
URL robots.txt keeps out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.seeds import CrawlRequest
from tests.support import Deployment, LocalSite, ServiceProcess, crawl_to_the_end, wait_for

pytestmark = pytest.mark.kafka

HTML = {"Content-Type": "text/html; charset=utf-8"}


def page(links: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    anchors = "".join(f'<a href="{href}">{text}</a>' for href, text in links.items())
    return (200, HTML, f"<html><body><main>{anchors}</main></body></html>".encode())


def graph_holding(
    deployment: Deployment, started: list[ServiceProcess], root: Path, url: str, in_links: int
) -> None:
    """Start a linkgraph instance and wait until it holds ``in_links`` in-links of ``url``."""
    started.append(deployment.start("linkgraph", root / "logs"))

    def holding() -> bool:
        answer = deployment.cli("graph", "in", url, "--json")
        return answer.returncode == 0 and len(json.loads(answer.stdout)["edges"]) == in_links

    wait_for(holding, 120, f"the link graph holding {in_links} in-links of {url}")


@pytest.fixture
def site() -> Iterator[LocalSite]:
    local = LocalSite(
        {
            "/robots.txt": (200, {}, b"User-agent: *\nDisallow: /private\n"),
            "/": page({"/offers": "Offers", "/gone": "Old offer", "/private": "Staff"}),
            "/offers": page({"/gone": "last year's offer", "/": "home"}),
            "/moved": (301, {"Location": "/gone"}, b""),
        }
    ).start()
    yield local
    local.stop()


def test_broken_lists_dead_urls_with_the_pages_linking_to_them(
    kafka_bootstrap: str, tmp_path: Path, site: LocalSite, started: list[ServiceProcess]
) -> None:
    request = CrawlRequest(
        crawl_id="shop", seeds=[site.url("/"), site.url("/moved")], politeness_delay_ms=0
    )
    deployment = crawl_to_the_end(kafka_bootstrap, tmp_path, started, request)
    gone = site.url("/gone")
    graph_holding(deployment, started, tmp_path, gone, in_links=3)

    listed = deployment.cli("broken", "shop")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0] == f"404     {gone}  (permanent)"
    assert sorted(listed.stdout.splitlines()[1:]) == sorted(
        [
            f"        <- {site.url('/')}  'Old offer'  [INTERNAL]",
            f'        <- {site.url("/offers")}  "last year\'s offer"  [INTERNAL]',
            f"        <- {site.url('/moved')}  [REDIRECT]",
        ]
    )
    assert "1 broken URL in crawl shop, linked from 3 pages" in listed.stderr

    as_json = deployment.cli("broken", "shop", "--json", "--links=1")
    [item] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert (item["url"], item["status"], item["reason"]) == (gone, 404, "permanent")
    assert len(item["linked_from"]) == 1 and item["more_links"] is True
    assert "no broken links in crawl other" in deployment.cli("broken", "other").stderr


@pytest.fixture
def elsewhere() -> Iterator[LocalSite]:
    local = LocalSite(
        {
            "/robots.txt": (200, {}, b"User-agent: *\n"),
            "/fine": page({"/beyond": "beyond"}),
            "/beyond": page({}),
        }
    ).start()
    yield local
    local.stop()


def test_check_external_fetches_outbound_links_for_their_status_only(
    kafka_bootstrap: str,
    tmp_path: Path,
    site: LocalSite,
    elsewhere: LocalSite,
    started: list[ServiceProcess],
) -> None:
    """Another host (another port) is another domain under ``same_domain="host"``: its links are
    fetched once for their status, never parsed, so what they link to stays unfetched; the one
    that answers 404 is a broken link like any other."""
    site.routes["/"] = page(
        {elsewhere.url("/fine"): "a partner", elsewhere.url("/retired"): "an old partner"}
    )
    request = CrawlRequest(
        crawl_id="outbound", seeds=[site.url("/")], check_external=True, politeness_delay_ms=0
    )
    deployment = crawl_to_the_end(kafka_bootstrap, tmp_path, started, request)
    assert sorted(elsewhere.paths()) == ["/fine", "/retired", "/robots.txt"]

    retired = elsewhere.url("/retired")
    graph_holding(deployment, started, tmp_path, retired, in_links=1)
    listed = deployment.cli("broken", "outbound")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        f"404     {retired}  (permanent)",
        # INTERNAL: the link type compares registered domains, and both sites are 127.0.0.1.
        f"        <- {site.url('/')}  'an old partner'  [INTERNAL]",
    ]
