"""The anchors table is derived from the reverse records (`anchors_of_reverse`): a restore
rebuilds it from them, so it must equal what indexing wrote, through re-crawls and gone links."""

from __future__ import annotations

from pathlib import Path

from linkgraph.handler import LinkGraphHandler
from linkgraph.indexes import anchors_of_reverse
from linkgraph.records import ANCHORS, REVERSE
from schemas.links import LinkEdge, PageLinks
from tests.unit.linkgraph.harness import GraphHarness


def page(n: int, fetched_at: int, targets: dict[str, str]) -> PageLinks:
    return PageLinks(
        crawl_id="c1",
        from_url=f"https://s.example/{n}",
        fetched_at=fetched_at,
        edges=[
            LinkEdge(
                to_url=to_url,
                anchor_text=text,
                context_window="",
                link_type="EXTERNAL",
                position="CONTENT",
                discovered_at=fetched_at,
            )
            for to_url, text in targets.items()
        ],
    )


def derived_from_reverse(graph: GraphHarness) -> list[bytes]:
    """Fold `anchors_of_reverse` over the reverse records as a full restore would."""
    anchors: dict[bytes, bytes | None] = {}
    for key, value in graph.scan(0, REVERSE):
        for table, anchor, written in anchors_of_reverse(REVERSE, key, None, value):
            assert table == ANCHORS
            anchors[anchor] = written
    return sorted(key for key, value in anchors.items() if value is not None)


def test_the_anchors_indexing_wrote_are_those_derived_from_the_reverse_records(
    tmp_path: Path,
) -> None:
    graph = GraphHarness(tmp_path)
    try:
        a, b, c = "https://t.example/a", "https://t.example/b", "https://t.example/c"
        graph.feed(page(1, 1000, {a: "first", b: "bee", c: ""}), page(2, 1000, {a: "first"}))
        # Re-crawls: a new text, a link gone (b), a text removed and one added (c).
        graph.feed(page(1, 2000, {a: "second", c: "now a text"}))
        graph.feed(page(2, 2000, {b: "from two"}))  # a gone from page 2
        stored = [key for key, _ in graph.scan(0, ANCHORS)]
        assert stored == derived_from_reverse(graph)
        assert len(stored) == 3  # a "second", c "now a text", b "from two"
    finally:
        graph.close()


def test_each_reverse_change_derives_its_anchor_change() -> None:
    key = b"https://t.example/\thttps://s.example/1"
    live = b'{"anchor_text":"x","context_window":"","link_type":"EXTERNAL","position":"CONTENT",'
    live += b'"discovered_at":1,"last_seen_at":2,"rel":[],"gone":false}'
    gone = live.replace(b'"gone":false', b'"gone":true')
    other = live.replace(b'"anchor_text":"x"', b'"anchor_text":"y"')
    anchor_x = b"https://t.example/\tx\thttps://s.example/1"
    anchor_y = b"https://t.example/\ty\thttps://s.example/1"
    assert anchors_of_reverse(REVERSE, key, None, live) == [(ANCHORS, anchor_x, b"")]
    assert anchors_of_reverse(REVERSE, key, live, gone) == [(ANCHORS, anchor_x, None)]
    assert anchors_of_reverse(REVERSE, key, gone, live) == [(ANCHORS, anchor_x, b"")]
    assert anchors_of_reverse(REVERSE, key, live, other) == [
        (ANCHORS, anchor_x, None),
        (ANCHORS, anchor_y, b""),
    ]
    assert anchors_of_reverse(REVERSE, key, live, live) == []
    assert anchors_of_reverse(REVERSE, key, b"not json", live) == [(ANCHORS, anchor_x, b"")]
    assert anchors_of_reverse("forward", key, None, live) == []
    assert LinkGraphHandler.derived_tables == {ANCHORS}
