"""Re-crawl semantics: discovered_at kept, last_seen_at moved, disappeared edges marked gone (in
the forward and the reverse index, anchors and degrees following), replays changing nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from linkgraph.queries import AnchorQuery, EdgeQuery, NodeQuery
from schemas.links import LinkEdge, PageLinks
from tests.unit.linkgraph.harness import GraphHarness

A = "https://a.example/"
B = "https://a.example/b"
C = "https://c.example/"
D = "https://a.example/d"


def edge(to_url: str, anchor: str, at: int, position: str = "CONTENT") -> LinkEdge:
    return LinkEdge(
        to_url=to_url,
        anchor_text=anchor,
        link_type="INTERNAL",
        position=position,
        discovered_at=at,  # type: ignore[arg-type]
    )


def fetch(at: int, *edges: LinkEdge, part: int = 0, parts: int = 1) -> PageLinks:
    return PageLinks(
        crawl_id="c1", from_url=A, fetched_at=at, edges=list(edges), part=part, parts=parts
    )


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[GraphHarness]:
    harness = GraphHarness(tmp_path, partitions=2)
    yield harness
    harness.close()


def out_edges(graph: GraphHarness, url: str = A) -> dict[str, dict[str, object]]:
    found = graph.query(EdgeQuery("out", url, limit=1000))["edges"]
    return {e["to_url"]: e for e in found}


def in_edges(graph: GraphHarness, url: str) -> dict[str, dict[str, object]]:
    found = graph.query(EdgeQuery("in", url, limit=1000))["edges"]
    return {e["from_url"]: e for e in found}


def test_recrawl_keeps_discovery_moves_last_seen_and_marks_gone(graph: GraphHarness) -> None:
    graph.feed(fetch(100, edge(B, "bee", 100), edge(C, "sea", 100)))
    graph.feed(fetch(200, edge(B, "bee two", 200, "NAV"), edge(D, "dee", 200)))
    out = out_edges(graph)
    assert (out[B]["discovered_at"], out[B]["last_seen_at"], out[B]["gone"]) == (100, 200, False)
    assert (out[B]["anchor_text"], out[B]["position"]) == ("bee two", "NAV")
    assert (out[C]["discovered_at"], out[C]["last_seen_at"], out[C]["gone"]) == (100, 100, True)
    assert (out[D]["discovered_at"], out[D]["gone"]) == (200, False)
    assert in_edges(graph, C)[A]["gone"] is True
    assert in_edges(graph, B)[A]["anchor_text"] == "bee two"
    assert graph.query(AnchorQuery(C))["anchors"] == []
    assert graph.query(AnchorQuery(B))["anchors"] == [{"text": "bee two", "count": 1}]
    assert graph.query(NodeQuery(A))["out_degree"] == 2
    assert graph.query(NodeQuery(A))["out_links_stored"] == 3
    assert graph.query(NodeQuery(C))["in_degree"] == 0
    live = graph.query(EdgeQuery("out", A, live_only=True))["edges"]
    assert {e["to_url"] for e in live} == {B, D}


def test_a_gone_edge_that_returns_is_live_with_its_first_discovery(graph: GraphHarness) -> None:
    graph.feed(fetch(100, edge(B, "bee", 100), edge(C, "sea", 100)))
    graph.feed(fetch(200, edge(B, "bee", 200)))
    graph.feed(fetch(300, edge(B, "bee", 300), edge(C, "sea again", 300)))
    out = out_edges(graph)
    assert (out[C]["discovered_at"], out[C]["last_seen_at"], out[C]["gone"]) == (100, 300, False)
    assert graph.query(NodeQuery(A))["out_degree"] == 2
    assert graph.query(NodeQuery(C))["in_degree"] == 1
    assert graph.query(AnchorQuery(C))["anchors"] == [{"text": "sea again", "count": 1}]


def test_a_fetch_in_parts_sweeps_only_once_every_part_arrived(graph: GraphHarness) -> None:
    graph.feed(fetch(100, edge(B, "bee", 100), edge(C, "sea", 100), edge(D, "dee", 100)))
    graph.feed(fetch(200, edge(D, "dee", 200), part=1, parts=2))
    assert not any(e["gone"] for e in out_edges(graph).values())  # part 0 still to come
    graph.feed(fetch(200, edge(B, "bee", 200), part=0, parts=2))
    out = out_edges(graph)
    assert {u for u, e in out.items() if e["gone"]} == {C}
    assert graph.query(NodeQuery(A))["out_degree"] == 2


def test_replays_and_late_older_fetches_change_nothing_they_should_not(graph: GraphHarness) -> None:
    first = fetch(100, edge(B, "bee", 100), edge(C, "sea", 100))
    graph.feed(first)
    graph.feed(fetch(200, edge(B, "bee", 200)))
    before = out_edges(graph)
    assert graph.feed(fetch(200, edge(B, "bee", 200))) == []  # a replay: no writes, no re-keys
    assert graph.feed(first) == []  # the older fetch again: C stays gone, B keeps last_seen 200
    assert out_edges(graph) == before
    assert graph.query(NodeQuery(A))["out_degree"] == 1
    assert in_edges(graph, C)[A]["gone"] is True


def test_an_empty_recrawl_marks_every_edge_gone(graph: GraphHarness) -> None:
    graph.feed(fetch(100, edge(B, "bee", 100), edge(C, "sea", 100)))
    graph.feed(fetch(200))
    assert all(e["gone"] for e in out_edges(graph).values())
    assert graph.query(NodeQuery(A))["out_degree"] == 0
    assert graph.query(NodeQuery(A))["fetched_at"] == 200
