"""The node cache: changed nodes written once per cycle with their last source, kept across cycles,
bounded, and put back as they were when a message fails."""

from __future__ import annotations

from pathlib import Path

import orjson

from linkgraph.indexes import new_node
from linkgraph.nodecache import CachedNode, NodeCache
from linkgraph.records import NODES, NodeRecord, PartitionStats
from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Transaction


def _store(tmp_path: Path) -> PartitionStore:
    return PartitionStore(tmp_path / "p0", (NODES,), StoreOptions(StateSettings()))


def test_a_node_is_written_once_a_cycle_with_the_last_source(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        cache, stats = NodeCache(), PartitionStats()
        cached = CachedNode(new_node("https://a.example/", 5), None)
        cache.add("https://a.example/", cached)
        for source in ("t:0:1", "t:0:2"):
            cached.node.in_total += 1
            cache.changed(cached, source)
        top = Transaction(store)
        cache.flush(top, stats)
        assert {t: list(w) for t, w in top.writes.items()} == {NODES: [b"https://a.example/"]}
        assert top.sources[NODES][b"https://a.example/"] == "t:0:2"
        assert stats.entries[NODES] == 1
        store.write(top.writes, "changelog", None)
        # Next cycle: still cached; a change back and forth to the same bytes writes nothing.
        assert cache.get("https://a.example/") is cached
        cached.node.in_total += 1
        cached.node.in_total -= 1
        cache.changed(cached, "t:0:3")
        top = Transaction(store)
        cache.flush(top, stats)
        assert not top.writes
        raw = store.get(NODES, b"https://a.example/")
        assert raw is not None and NodeRecord.decode(raw).in_total == 2
    finally:
        store.close()


def test_the_cache_is_bounded_and_never_drops_a_change_unwritten(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        cache, stats = NodeCache(limit=8), PartitionStats()
        top = Transaction(store)
        for n in range(20):
            url = f"https://a.example/{n}"
            cached = CachedNode(new_node(url, n), None)
            cache.add(url, cached)
            cache.changed(cached, f"t:0:{n}")
        cache.flush(top, stats)
        assert len(top.writes[NODES]) == 20  # every change written before anything is forgotten
        assert len(cache) == 6
        assert cache.get("https://a.example/19") is not None
        assert cache.get("https://a.example/0") is None
    finally:
        store.close()


def test_restore_puts_back_the_node_and_its_pending_change(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        cache, stats = NodeCache(), PartitionStats()
        url = "https://a.example/"
        cached = CachedNode(new_node(url, 5), None)
        cache.add(url, cached)
        cached.node.in_total = 1
        cache.changed(cached, "t:0:1")
        saved = cache.snapshot(url)
        cached.node.in_total = 99  # a message that then fails
        cached.node.crawl_ids.append("c9")
        cache.changed(cached, "t:0:2")
        cache.restore(url, saved)
        fresh = "https://b.example/"  # not cached before the failing message: forgotten
        cache.add(fresh, CachedNode(new_node(fresh, 1), None))
        cache.changed(cache.get(fresh), "t:0:2")  # type: ignore[arg-type]
        cache.restore(fresh, None)
        top = Transaction(store)
        cache.flush(top, stats)
        assert {t: list(w) for t, w in top.writes.items()} == {NODES: [url.encode()]}
        assert top.sources[NODES][url.encode()] == "t:0:1"
        raw = top.writes[NODES][url.encode()]
        assert raw is not None
        node = NodeRecord.decode(raw)
        assert (node.in_total, node.crawl_ids) == (1, [])
    finally:
        store.close()


def test_a_new_node_and_a_decoded_one_equal_the_constructors() -> None:
    made = NodeRecord.new("https://a.example/x", "a.example", "a.example", 5)
    built = NodeRecord(
        url="https://a.example/x", host="a.example", domain="a.example", first_seen_at=5
    )
    assert made == built and made.encode() == built.encode()
    assert made.crawl_ids is not NodeRecord.new("u", "h", "d", 1).crawl_ids
    built.crawl_ids.append("c1")
    built.fetch.parts_seen.append(0)
    decoded = NodeRecord.decode(built.encode())
    assert decoded == built and decoded.encode() == built.encode()
    assert decoded.fetch.complete
    # A record of another version (a field missing, one unknown) goes field by field.
    other = orjson.loads(built.encode())
    del other["title"]
    other["future"] = 1
    assert NodeRecord.decode(orjson.dumps(other)) == built
