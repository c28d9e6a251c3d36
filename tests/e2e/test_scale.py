"""Several instances per stage on multi-partition topics give the same crawl and the same graph.

Three fetchers, two parsers, two frontiers and two link-graph instances (each its own process)
share six partitions per topic and crawl the generated site of `test_crawl.py`: the pages the
server saw, the depth of every URL and every edge (on `links`, and through either link-graph
instance, which forward to the owner) equal the single-instance ground truth.
"""

from __future__ import annotations

from collections import Counter

import pytest

from frontier.traps import check_traps
from streamcrawl.testsite import reference_crawl
from tests.e2e.harness import EndToEnd, graph_out_edges

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(400)]

MAX_DEPTH = 5
SCALE = {"frontier": 2, "fetcher": 3, "parser": 2, "linkgraph": 2}


def test_three_fetchers_two_parsers_two_frontiers_crawl_the_same_graph(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("e2e-scale")
    e2e = EndToEnd(kafka_bootstrap, root, (220, 3, 6, 11), partitions=6, scale=SCALE)
    e2e.start()
    try:
        e2e.wait_balanced()  # the assertions below count every fetch: no rebalance may add one
        request = e2e.seed(
            max_depth=MAX_DEPTH,
            same_domain="registered_domain",
            politeness_delay_ms=0,
            max_retries=1,
        )
        e2e.wait_done(request.crawl_id, 240)
        reference = reference_crawl(
            e2e.server.site, MAX_DEPTH, max_retries=1, refuse=lambda u: check_traps(u) is not None
        )
        for role, count in SCALE.items():
            if e2e.built(role):
                running = [i for i in e2e.stack.live(role) if i.running]
                assert len(running) == count, f"{role}: every instance ran to the end"
        partitions = {
            member.instance: member.partitions
            for member in [
                e2e.wait_member(lambda m, n=n: m.instance == n, 30, n)
                for n in ("fetcher-0", "fetcher-1", "fetcher-2")
            ]
        }
        assert all(partitions.values()), f"every fetcher holds partitions: {partitions}"

        served = [url for url, _ in e2e.server.page_requests()]
        assert set(served) == reference.fetched
        assert Counter(served) == Counter(reference.attempts)
        depths = {o.url: o.depth for o in e2e.outcomes(request.crawl_id)}
        assert depths == reference.depth

        expected = {
            source: {
                (e.to_url, e.anchor_text, e.context_window, e.link_type, e.rel, e.position)
                for e in edges
            }
            for source, edges in reference.edges.items()
        }
        assert e2e.link_edges(request.crawl_id) == expected
        if e2e.built("linkgraph"):
            addresses = sorted(
                {str(m.api_address) for m in e2e.live_members("linkgraph") if m.api_address}
            )
            assert len(addresses) == SCALE["linkgraph"], addresses
            for number, (source, edges) in enumerate(sorted(expected.items())):
                address = addresses[number % len(addresses)]  # either instance answers for all
                assert graph_out_edges(address, source) == edges, (address, source)
    finally:
        e2e.stop()
