"""The indexes equal the ground truth of a generated graph: every edge, anchor and field."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from linkgraph.queries import AnchorQuery, EdgeQuery, NodeQuery
from linkgraph.records import (
    ANCHORS,
    FORWARD,
    NODES,
    REVERSE,
    STATS_KEY,
    TABLES,
    PartitionStats,
)
from linkgraph.wire import ENDS_LAYOUT
from schemas.links import LinkEdge, PageLinks, PageMeta
from schemas.links_by_target import InLink, InLinkValue
from tests.unit.linkgraph.harness import GraphHarness

TYPES = ("INTERNAL", "EXTERNAL", "NOFOLLOW", "UGC", "SPONSORED", "REDIRECT")
POSITIONS = ("NAV", "CONTENT", "FOOTER", "SIDEBAR")
ANCHOR_WORDS = ("pricing", "about us", "plans", "", "home", "docs")


def url(n: int) -> str:
    return f"https://h{n % 7}.example/page/{n}"


def generated_graph(seed: int, sources: int, max_out: int) -> list[PageLinks]:
    rng = random.Random(seed)
    pages = []
    for s in range(sources):
        targets = rng.sample(range(sources * 2), rng.randint(0, max_out))
        edges = [
            LinkEdge(
                to_url=url(t),
                anchor_text=rng.choice(ANCHOR_WORDS),
                context_window=f"ctx {s}->{t}",
                link_type=rng.choice(TYPES),
                rel=["nofollow"] if rng.random() < 0.2 else [],
                position=rng.choice(POSITIONS),
                discovered_at=1000 + s,
            )
            for t in targets
        ]
        pages.append(
            PageLinks(
                crawl_id="c1",
                from_url=url(s),
                fetched_at=1000 + s,
                edges=edges,
                page=PageMeta(status=200, title=f"title {s}"),
            )
        )
    return pages


def in_parts(page: PageLinks, parts: int) -> list[PageLinks]:
    size = max(1, -(-len(page.edges) // parts))
    chunks = [page.edges[i * size : (i + 1) * size] for i in range(parts)]
    return [
        page.model_copy(update={"edges": chunk, "part": i, "parts": parts})
        for i, chunk in enumerate(chunks)
    ]


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[GraphHarness]:
    harness = GraphHarness(tmp_path, partitions=3)
    yield harness
    harness.close()


def all_entries(graph: GraphHarness, table: str) -> dict[str, dict[str, object]]:
    entries = {}
    for p in range(len(graph.stores)):
        for key, raw in graph.scan(p, table):
            if key != STATS_KEY:
                entries[key.decode()] = raw if table == ANCHORS else orjson.loads(raw)
    return entries


def test_indexes_equal_the_ground_truth(graph: GraphHarness) -> None:
    pages = generated_graph(seed=7, sources=60, max_out=25)
    for page in pages:
        graph.feed(*(in_parts(page, 3) if len(page.edges) > 20 else [page]))
    expected = {
        f"{page.from_url}\t{edge.to_url}": {
            "anchor_text": edge.anchor_text,
            "context_window": edge.context_window,
            "link_type": edge.link_type,
            "position": edge.position,
            "discovered_at": edge.discovered_at,
            "last_seen_at": page.fetched_at,
            "rel": edge.rel,
            "gone": False,
        }
        for page in pages
        for edge in page.edges
    }
    assert all_entries(graph, FORWARD) == expected
    reverse = {
        "\t".join(reversed(key.split("\t"))): value
        for key, value in all_entries(graph, REVERSE).items()
    }
    assert reverse == expected
    # One empty-valued entry per in-link with a text: target TAB text TAB source.
    anchors = {
        (edge.to_url, edge.anchor_text, page.from_url)
        for page in pages
        for edge in page.edges
        if edge.anchor_text
    }
    stored = all_entries(graph, ANCHORS)
    assert set(stored.values()) == {b""}
    assert {tuple(key.split("\t")) for key in stored} == anchors
    # Every forward entry lives on its source's partition, every reverse one on its target's.
    for p in range(3):
        assert all(
            graph.partition_of(k.decode().split("\t")[0]) == p for k, _ in graph.scan(p, FORWARD)
        )
        assert all(
            graph.partition_of(k.decode().split("\t")[0]) == p for k, _ in graph.scan(p, REVERSE)
        )


def test_nodes_count_degrees_and_crawled(graph: GraphHarness) -> None:
    pages = generated_graph(seed=3, sources=30, max_out=10)
    graph.feed(*pages)
    nodes = all_entries(graph, NODES)
    in_degree = Counter(edge.to_url for page in pages for edge in page.edges)
    sources = {page.from_url: page for page in pages}
    assert set(nodes) == set(sources) | set(in_degree)
    for node_url, node in nodes.items():
        assert node["in_live"] == in_degree.get(node_url, 0)
        page = sources.get(node_url)
        assert node["crawled"] is (page is not None)
        assert node["out_live"] == (len(page.edges) if page else 0)
        if page is not None:
            assert node["title"] == page.page.title if page.page else None
            assert node["first_seen_at"] <= page.fetched_at
    stats = [PartitionStats.decode(graph.stores[p].get(NODES, STATS_KEY)) for p in range(3)]
    assert sum(s.entries[FORWARD] for s in stats) == sum(len(p.edges) for p in pages)
    assert sum(s.entries[NODES] for s in stats) == len(nodes)
    assert all(s.size[FORWARD] > 0 for s in stats)


SITES = (
    # host of site n, its registered domain: multi-label public suffixes, a port, a private suffix
    ("www.a{n}.co.uk", "a{n}.co.uk"),
    ("news.b{n}.com.au", "b{n}.com.au"),
    ("www.c{n}.org:8443", "c{n}.org"),
    ("d{n}.github.io", "d{n}.github.io"),
)


def site_url(n: int) -> str:
    host, _ = SITES[n % len(SITES)]
    return f"https://{host.format(n=n % 5)}/page/{n}"


def site_of(url: str) -> tuple[str, str]:
    n = int(url.rsplit("/", 1)[1])
    host, domain = SITES[n % len(SITES)]
    return host.format(n=n % 5), domain.format(n=n % 5)


@pytest.mark.parametrize("cycles", [False, True], ids=["message-by-message", "in-cycles"])
def test_nodes_hold_host_domain_and_first_sighting(tmp_path: Path, cycles: bool) -> None:
    """Every node, crawled or only linked: its host key, registered domain and the earliest of its
    own fetch and the discoveries of the edges to it (an edge's discovery is never later than the
    fetch that found it). Sources are fetched in shuffled order, so a page is often linked before
    and after it is crawled."""
    rng = random.Random(4)
    order = list(range(40))
    rng.shuffle(order)
    pages = []
    for s in order:
        fetched_at = 10_000 + 100 * rng.randrange(50)
        targets = rng.sample(range(80), rng.randint(1, 9))
        edges = [
            LinkEdge(
                to_url=site_url(t),
                link_type="EXTERNAL",
                # discovered before the fetch, or "later" (capped at the fetch)
                discovered_at=fetched_at + rng.randrange(-3_000, 500),
            )
            for t in targets
            if t != s
        ]
        pages.append(
            PageLinks(crawl_id="c1", from_url=site_url(s), fetched_at=fetched_at, edges=edges)
        )
    first_seen: dict[str, int] = {}
    for page in pages:
        sightings = [(page.from_url, page.fetched_at)]
        sightings += [(e.to_url, min(e.discovered_at, page.fetched_at)) for e in page.edges]
        for node_url, at in sightings:
            first_seen[node_url] = min(at, first_seen.get(node_url, at))
    graph = GraphHarness(tmp_path, partitions=3)
    try:
        # Each page's in-links are indexed before the next page comes, as on a live crawl.
        for start in range(0, len(pages), 10 if cycles else 1):
            chunk = pages[start : start + (10 if cycles else 1)]
            graph.feed_in_cycles(*chunk) if cycles else graph.feed(*chunk)
        nodes = all_entries(graph, NODES)
        assert set(nodes) == set(first_seen)
        for node_url, node in nodes.items():
            host, domain = site_of(node_url)
            assert (node["host"], node["domain"]) == (host, domain), node_url
            assert node["first_seen_at"] == first_seen[node_url], node_url
            answered = graph.query(NodeQuery(node_url))
            assert (answered["host"], answered["registered_domain"]) == (host, domain)
            assert answered["first_seen_at"] == first_seen[node_url]
    finally:
        graph.close()


def test_rekeyed_values_validate_as_in_links(graph: GraphHarness) -> None:
    page = generated_graph(seed=1, sources=5, max_out=8)[2]
    outputs = graph.feed(page, rekey=False)
    assert len(outputs) == len(page.edges)
    for output, edge in zip(outputs, page.edges, strict=True):
        assert output.topic == "links.by-target"
        assert output.key == f"{edge.to_url}\t{page.from_url}"
        assert output.partition == graph.partition_of(edge.to_url)
        assert output.value is not None
        in_link = InLinkValue.model_validate_json(output.value)
        assert (in_link.anchor_text, in_link.link_type, in_link.rel) == (
            edge.anchor_text,
            edge.link_type,
            edge.rel,
        )


def test_with_in_link_ends_the_values_are_those_earlier_link_graphs_read(tmp_path: Path) -> None:
    """During an upgrade from a link graph that reads only values with both ends, the re-keyed
    values carry them (`in_link_ends`); the indexes both layouts build are the same."""
    pages = generated_graph(seed=3, sources=12, max_out=10)
    pages.append(pages[0].model_copy(update={"fetched_at": pages[0].fetched_at + 10}))
    compact, with_ends = (
        GraphHarness(tmp_path / "a", 2),
        GraphHarness(tmp_path / "b", 2, in_link_ends=True),
    )
    try:
        outputs = with_ends.feed(*pages)
        compact.feed(*pages)
        assert outputs and all(o.value is not None for o in outputs)
        for output in outputs:
            assert output.value is not None and isinstance(output.key, str)
            assert tuple(orjson.loads(output.value)) == ENDS_LAYOUT
            in_link = InLink.model_validate_json(output.value)
            assert f"{in_link.to_url}\t{in_link.from_url}" == output.key
        for partition in range(2):
            for table in TABLES:
                assert with_ends.scan(partition, table) == compact.scan(partition, table)
    finally:
        compact.close()
        with_ends.close()


def paged(graph: GraphHarness, query: EdgeQuery) -> list[str]:
    """Every page of `query` from the first on, following the cursors: the other ends in order."""
    end = "to_url" if query.direction == "out" else "from_url"
    seen: list[str] = []
    cursor = None
    while True:
        answer = graph.query(dataclasses.replace(query, cursor=cursor))
        assert len(answer["edges"]) <= query.limit
        seen.extend(e[end] for e in answer["edges"])
        cursor = answer["next_cursor"]
        if cursor is None:
            return seen


def test_queries_paginate_and_filter(graph: GraphHarness) -> None:
    pages = generated_graph(seed=11, sources=40, max_out=30)
    graph.feed(*pages)
    big = max(pages, key=lambda p: len(p.edges))
    assert paged(graph, EdgeQuery("out", big.from_url, limit=7)) == sorted(
        e.to_url for e in big.edges
    )
    in_links = Counter(e.to_url for p in pages for e in p.edges)
    popular = in_links.most_common(1)[0][0]
    assert in_links[popular] > 3
    assert paged(graph, EdgeQuery("in", popular, limit=2)) == sorted(
        p.from_url for p in pages for e in p.edges if e.to_url == popular
    )
    # Filters apply before the limit, page after page.
    for link_type in TYPES:
        assert paged(graph, EdgeQuery("out", big.from_url, limit=2, link_type=link_type)) == sorted(
            e.to_url for e in big.edges if e.link_type == link_type
        )
    for position in POSITIONS:
        assert paged(graph, EdgeQuery("in", popular, limit=1, position=position)) == sorted(
            p.from_url
            for p in pages
            for e in p.edges
            if e.to_url == popular and e.position == position
        )
    both = [(e.link_type, e.position) for e in big.edges]
    link_type, position = Counter(both).most_common(1)[0][0]
    assert paged(
        graph, EdgeQuery("out", big.from_url, limit=1, link_type=link_type, position=position)
    ) == sorted(e.to_url for e in big.edges if (e.link_type, e.position) == (link_type, position))
    internal = graph.query(EdgeQuery("out", big.from_url, limit=1000, link_type="INTERNAL"))
    assert {e["to_url"] for e in internal["edges"]} == {
        e.to_url for e in big.edges if e.link_type == "INTERNAL"
    }
    target = Counter(e.to_url for p in pages for e in p.edges).most_common(1)[0][0]
    incoming = graph.query(EdgeQuery("in", target, limit=1000, position="CONTENT"))
    assert {e["from_url"] for e in incoming["edges"]} == {
        p.from_url for p in pages for e in p.edges if e.to_url == target and e.position == "CONTENT"
    }
    anchors = graph.query(AnchorQuery(target))["anchors"]
    texts = Counter(e.anchor_text for p in pages for e in p.edges if e.to_url == target)
    assert {a["text"]: a["count"] for a in anchors} == {t: c for t, c in texts.items() if t}
    assert [a["count"] for a in anchors] == sorted((a["count"] for a in anchors), reverse=True)
    node = graph.query(NodeQuery(big.from_url))
    assert node["out_degree"] == len(big.edges)
    assert node["registered_domain"] == "h" + big.from_url.split("//h")[1][0] + ".example"


def everything(graph: GraphHarness) -> list[list[tuple[bytes, bytes]]]:
    return [graph.scan(p, table) for p in range(3) for table in (FORWARD, REVERSE, ANCHORS, NODES)]


def test_a_cycle_of_many_messages_stores_what_one_message_cycles_store(tmp_path: Path) -> None:
    """Nodes are cached through a cycle and written once at its tick: same state either way,
    re-crawls (gone edges, moved anchors) included."""
    first = generated_graph(seed=5, sources=40, max_out=12)
    again = generated_graph(seed=6, sources=40, max_out=12)
    recrawl = [p.model_copy(update={"fetched_at": p.fetched_at + 100}) for p in again]
    one, many = GraphHarness(tmp_path / "one", 3), GraphHarness(tmp_path / "many", 3)
    try:
        one.feed(*first)
        one.feed(*recrawl)
        many.feed_in_cycles(*first)
        many.feed_in_cycles(*recrawl)
        assert everything(many) == everything(one)
        assert any(orjson.loads(raw)["gone"] for _, raw in many.scan(0, REVERSE))
    finally:
        one.close()
        many.close()


def test_a_node_written_at_the_tick_carries_its_last_message_as_source(tmp_path: Path) -> None:
    graph = GraphHarness(tmp_path, 1)
    try:
        target = "https://t.example/"
        pages = [
            PageLinks(
                crawl_id="c1",
                from_url=f"https://s.example/{n}",
                fetched_at=1000 + n,
                edges=[LinkEdge(to_url=target, link_type="EXTERNAL", discovered_at=1000 + n)],
            )
            for n in range(3)
        ]
        graph.feed_in_cycles(*pages)
        last_in_link = graph.offset  # the cycle of in-links ends with the third source's
        assert graph.last_sources[(NODES, target.encode())] == f"links.by-target:0:{last_in_link}"
        assert graph.query(NodeQuery(target))["in_degree"] == 3
    finally:
        graph.close()


def test_a_failed_message_leaves_the_cached_node_as_it_was(tmp_path: Path) -> None:
    """A re-crawl in two parts, one cycle: the second part meets a corrupt forward record and is
    dead-lettered after it changed the cached source node; the node must be as the first part
    left it (compared with a graph that never got the second part), and uncached nodes too."""
    page = generated_graph(seed=2, sources=3, max_out=6)[1]
    assert len(page.edges) >= 2
    other = generated_graph(seed=2, sources=3, max_out=6)[2]
    recrawl = page.model_copy(update={"fetched_at": page.fetched_at + 50, "crawl_id": "c2"})
    first, second = in_parts(recrawl, 2)
    bad_key = f"{page.from_url}\t{second.edges[-1].to_url}".encode()
    graphs = GraphHarness(tmp_path / "failed", 1), GraphHarness(tmp_path / "clean", 1)
    try:
        for graph in graphs:
            graph.feed(page)
            # Corrupt in both (the clean graph never reads it back).
            graph.stores[0].write({FORWARD: {bad_key: b"not json"}}, "changelog", None)
        failed, clean = graphs
        failed.feed_in_cycles(first, second, other)
        clean.feed_in_cycles(first, other)
        assert (len(failed.dead_letters), len(clean.dead_letters)) == (1, 0)
        source = page.from_url.encode()
        stored = failed.stores[0].get(NODES, source)
        assert stored is not None and stored == clean.stores[0].get(NODES, source)
        assert orjson.loads(stored)["crawl_ids"] == ["c1", "c2"]
        assert orjson.loads(stored)["fetch"]["parts_seen"] == [0]
        assert failed.scan(0, NODES) == clean.scan(0, NODES)
        # Failing first in its cycle (the node not cached before it): nothing changes either.
        failed.feed_in_cycles(second)
        assert len(failed.dead_letters) == 2
        assert failed.scan(0, NODES) == clean.scan(0, NODES)
    finally:
        for graph in graphs:
            graph.close()
