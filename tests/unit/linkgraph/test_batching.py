"""A cycle's records are applied as one batch: each one whole or not at all, failures routed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from linkgraph.queries import AnchorQuery, NodeQuery
from linkgraph.records import ANCHORS, FORWARD, NODES, REVERSE, STATS_KEY, PartitionStats
from linkgraph.wire import decode_in_link
from schemas.links import LinkEdge, PageLinks
from schemas.links_by_target import InLinkValue
from schemas.serde import encode
from tests.unit.linkgraph.harness import GraphHarness

TARGET = "https://t.example/"


def page(n: int, *targets: str, anchor: str = "text") -> PageLinks:
    return PageLinks(
        crawl_id="c1",
        from_url=f"https://s.example/{n}",
        fetched_at=1000 + n,
        edges=[
            LinkEdge(
                to_url=t,
                anchor_text=f"{anchor} {n}",
                context_window=f"ctx {n}",
                link_type="EXTERNAL",
                rel=["ugc"],
                position="FOOTER",
                discovered_at=900 + n,
            )
            for t in targets
        ],
    )


def in_links(graph: GraphHarness, *pages: PageLinks, **changed: str) -> list[Any]:
    """The in-links `pages` re-key, decoded as the loop decodes them; `changed`: fields set (an
    end in the key, the others in the value)."""
    made = []
    for output in graph.feed(*pages, rekey=False):
        assert output.value is not None and isinstance(output.key, str)
        to_url, _, from_url = output.key.partition("\t")
        key = f"{changed.get('to_url', to_url)}\t{changed.get('from_url', from_url)}"
        fields = {n: v for n, v in changed.items() if n not in ("to_url", "from_url")}
        made.append(decode_in_link(orjson.dumps({**orjson.loads(output.value), **fields}), key))
    return made


def test_a_rekeyed_value_is_the_in_link_the_schema_encodes(tmp_path: Path) -> None:
    graph = GraphHarness(tmp_path)
    try:
        source = page(1, TARGET, "https://u.example/a")
        outputs = graph.feed(source, rekey=False)
        for output, edge in zip(outputs, source.edges, strict=True):
            assert output.value is not None
            assert output.key == f"{edge.to_url}\t{source.from_url}"
            expected = InLinkValue(
                anchor_text=edge.anchor_text,
                context_window=edge.context_window,
                link_type=edge.link_type,
                position=edge.position,
                rel=edge.rel,
                discovered_at=edge.discovered_at,
                last_seen_at=source.fetched_at,
            )
            assert orjson.loads(output.value) == orjson.loads(encode(expected))
    finally:
        graph.close()


def test_a_target_twice_in_one_first_crawl_is_one_edge(tmp_path: Path) -> None:
    graph = GraphHarness(tmp_path)
    try:
        graph.feed(page(1, TARGET, TARGET))
        assert len(graph.scan(0, FORWARD)) == 1
        assert graph.query(NodeQuery("https://s.example/1"))["out_degree"] == 1
        assert graph.query(NodeQuery(TARGET))["in_degree"] == 1
    finally:
        graph.close()


def test_an_in_link_meeting_corrupt_state_is_dead_lettered_and_the_rest_applied(
    tmp_path: Path,
) -> None:
    graph = GraphHarness(tmp_path)
    try:
        graph.feed(page(1, TARGET), page(2, TARGET))
        bad_key = f"{TARGET}\thttps://s.example/2".encode()
        graph.stores[0].write({REVERSE: {bad_key: b"not json"}}, "changelog", None)
        anchors_before = graph.scan(0, ANCHORS)
        # A re-crawl of both sources; their in-links in one cycle, the corrupt one in between.
        recrawled = in_links(graph, page(11, TARGET, anchor="new"), from_url="https://s.example/1")
        recrawled += in_links(graph, page(12, TARGET, anchor="new"), from_url="https://s.example/2")
        third = in_links(graph, page(3, TARGET))
        graph._apply_cycle("links.by-target", 0, [*recrawled, *third])
        assert len(graph.dead_letters) == 1
        assert graph.dead_letters[0].startswith("corrupt state: ")
        # Nothing of the failed in-link was written: its reverse record is still the corrupt one.
        assert graph.stores[0].get(REVERSE, bad_key) == b"not json"
        assert (b"https://s.example/2", bad_key) not in graph.last_sources
        # The others were applied, each under its own message's source.
        offsets = graph.offset - 2, graph.offset
        for n, offset in zip((1, 3), offsets, strict=True):
            key = f"{TARGET}\thttps://s.example/{n}".encode()
            assert graph.last_sources[(REVERSE, key)] == f"links.by-target:0:{offset}"
        texts = {a["text"]: a["count"] for a in graph.query(AnchorQuery(TARGET))["anchors"]}
        assert texts == {"new 11": 1, "text 2": 1, "text 3": 1}
        assert graph.scan(0, ANCHORS) != anchors_before
        # Anchor entries are derived (no changelog records): their writes carry no source.
        assert not [key for table, key in graph.last_sources if table == ANCHORS]
        assert graph.query(NodeQuery(TARGET))["in_degree"] == 3
    finally:
        graph.close()


class _Broken:
    """A value no handler bug should be able to stop the loop with."""

    to_url = TARGET

    @property
    def from_url(self) -> str:
        raise ValueError("broken value")


def test_a_failing_record_is_routed_and_the_cycle_goes_on(tmp_path: Path) -> None:
    graph = GraphHarness(tmp_path)
    try:
        good = in_links(graph, page(1, TARGET))
        graph._apply_cycle("links.by-target", 0, [_Broken(), *good])
        assert graph.dead_letters == ["handler error: ValueError: broken value"]
        assert graph.query(NodeQuery(TARGET))["in_degree"] == 1
        assert len(graph.scan(0, REVERSE)) == 1
    finally:
        graph.close()


def test_the_size_stats_equal_the_stored_indexes_after_a_recrawl(tmp_path: Path) -> None:
    graph = GraphHarness(tmp_path)
    try:
        graph.feed_in_cycles(page(1, TARGET, "https://u.example/a"), page(2, TARGET))
        # Re-crawls: a longer anchor, an edge gone (swept), a new one; in one cycle.
        recrawl = page(1, TARGET, "https://u.example/b", anchor="a much longer anchor text")
        recrawl = recrawl.model_copy(update={"fetched_at": 2000})
        graph.feed_in_cycles(recrawl, page(3, TARGET))
        stats = PartitionStats.decode(graph.stores[0].get(NODES, STATS_KEY))
        for table in (FORWARD, REVERSE, ANCHORS, NODES):
            stored = [(k, v) for k, v in graph.scan(0, table) if k != STATS_KEY]
            assert stats.entries[table] == len(stored), table
            assert stats.size[table] == sum(len(k) + len(v) for k, v in stored), table
        gone = graph.stores[0].get(FORWARD, b"https://s.example/1\thttps://u.example/a")
        assert gone is not None and orjson.loads(gone)["gone"] is True
    finally:
        graph.close()
