"""One crawl of the generated site through every service, each its own process, on a real broker.

The site (three hosts on 127.0.0.1, about 140 pages within depth 5 of 220) knows its ground truth
(`streamcrawl.testsite`); the crawl must match it: the pages the server saw, the depth of every
URL (redirect targets at their redirect's depth), robots.txt obeyed, the spider trap bounded by the
frontier's guard, the politeness delay kept at the server, and every edge, on `links` and in the
link graph's API. The crawl runs once for the module; each test checks one property of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from frontier.traps import check_traps
from schemas.outcomes import FetchOutcome
from streamcrawl.testsite import ReferenceCrawl, reference_crawl
from streamcrawl.testsite.graph import DISALLOWED, TRAP_ROOT
from streamcrawl.watch import CrawlView
from tests.e2e.harness import EndToEnd, get_json, graph_out_edges

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(400)]

MAX_DEPTH = 5
DELAY_MS = 200
GAP_FLOOR = 1.0
"""The smallest gap at the server is at least the delay: the fetcher counts it from the previous
answer's headers (which the site sends after it noted the arrival), one request at a time per host.
Before that rule, at a load average of 10 to 16, a few gaps came short (159 to 191 ms for 200).
"""
MAX_RETRIES = 1


def trap_guard(url: str) -> bool:
    return check_traps(url) is not None


@dataclass
class Crawl:
    e2e: EndToEnd
    view: CrawlView
    reference: ReferenceCrawl
    served: list[str]
    outcomes: list[FetchOutcome]
    crawl_id: str


@pytest.fixture(scope="module")
def crawl(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    root = tmp_path_factory.mktemp("e2e-crawl")
    e2e = EndToEnd(kafka_bootstrap, root, (220, 3, 6, 11), partitions=3)
    e2e.start()
    try:
        request = e2e.seed(
            max_depth=MAX_DEPTH,
            same_domain="registered_domain",
            politeness_delay_ms=DELAY_MS,
            max_retries=MAX_RETRIES,
        )
        view = e2e.wait_done(request.crawl_id, 240)
        reference = reference_crawl(
            e2e.server.site, MAX_DEPTH, max_retries=MAX_RETRIES, refuse=trap_guard
        )
        served = [url for url, _ in e2e.server.page_requests()]
        yield Crawl(e2e, view, reference, served, e2e.outcomes(request.crawl_id), request.crawl_id)
    finally:
        e2e.stop()


def test_the_server_saw_exactly_the_reference_pages(crawl: Crawl) -> None:
    assert set(crawl.served) == crawl.reference.fetched
    assert Counter(crawl.served) == Counter(crawl.reference.attempts), (
        "each page once, 500s retried"
    )
    assert len(crawl.reference.fetched) > 100


def test_every_url_was_leased_at_its_breadth_first_depth(crawl: Crawl) -> None:
    depths = {outcome.url: outcome.depth for outcome in crawl.outcomes}
    assert depths == crawl.reference.depth
    site = crawl.e2e.server.site
    redirects = [p for p in site.graph.pages.values() if site.url(p.address) in depths]
    followed = [p for p in redirects if p.redirect_to is not None]
    assert followed, "the crawl went through redirects"
    for page in followed:
        assert page.redirect_to is not None
        assert depths[site.url(page.redirect_to)] == depths[site.url(page.address)]


def test_robots_txt_was_obeyed(crawl: Crawl) -> None:
    site = crawl.e2e.server.site
    requests = crawl.e2e.server.snapshot()
    for host, prefix in DISALLOWED.items():
        assert not [r for r in requests if r.host == host and r.path_qs.startswith(prefix)]
    denied = {o.url for o in crawl.outcomes if o.kind == "robots_denied"}
    assert denied == crawl.reference.robots_denied and denied
    robots = Counter(r.host for r in requests if r.path_qs == "/robots.txt")
    assert set(robots) == set(range(site.graph.hosts))


def test_the_spider_trap_stayed_bounded(crawl: Crawl) -> None:
    trap = [url for url in crawl.served if TRAP_ROOT in url]
    assert len(trap) == len(set(trap)) == 4
    assert crawl.view.counters.get("rejected_trap_repeated_segments", 0) >= 1, crawl.view.counters


def test_the_politeness_delay_held_at_the_server(crawl: Crawl) -> None:
    gaps = crawl.e2e.server.smallest_gap_s()
    assert set(gaps) == {0, 1, 2}
    print(f"smallest gap per host at the server for a {DELAY_MS} ms delay: {gaps}")
    assert min(gaps.values()) >= DELAY_MS / 1000 * GAP_FLOOR, gaps


def test_the_links_topic_holds_exactly_the_reference_edges(crawl: Crawl) -> None:
    got = crawl.e2e.link_edges(crawl.crawl_id)
    expected = {
        source: {
            (e.to_url, e.anchor_text, e.context_window, e.link_type, e.rel, e.position)
            for e in edges
        }
        for source, edges in crawl.reference.edges.items()
    }
    assert set(got) == set(expected)
    for source, edges in expected.items():
        assert got[source] == edges, source
    assert sum(map(len, got.values())) == crawl.reference.edge_count > 1000


def test_the_link_graph_holds_exactly_the_reference_edges(crawl: Crawl) -> None:
    if not crawl.e2e.built("linkgraph"):
        pytest.skip("the linkgraph service reports NOT_BUILT (issue 6); run after merging it")
    address = crawl.e2e.api_address("linkgraph")
    for source, edges in crawl.reference.edges.items():
        expected = {
            (e.to_url, e.anchor_text, e.context_window, e.link_type, e.rel, e.position)
            for e in edges
        }
        assert graph_out_edges(address, source) == expected, source


def test_storage_kept_every_fetched_page(crawl: Crawl) -> None:
    if not crawl.e2e.built("storage"):
        pytest.skip("the storage service reports NOT_BUILT (issue 7); run after merging it")
    address = crawl.e2e.api_address("storage")
    pages = [url for url, status in crawl.reference.statuses.items() if status == 200]
    for url in pages:
        meta = get_json(address, "/v1/page", url=url)
        assert meta["url"] == url and meta["status"] == 200 and meta["warc_file"], meta
    warcs = get_json(address, "/v1/storage/warcs", crawl_id=crawl.crawl_id)
    assert warcs["files"], warcs
