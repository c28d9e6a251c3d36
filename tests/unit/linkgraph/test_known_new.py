"""What is known new without a read: new targets (kept as counts, encoded from a template) and
in-links the epoch's filter rules out. A stored node or reverse record must never be taken for
new: across restarts, epochs and mixed batches the state is what reading everything would give."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from linkgraph import nodecache
from linkgraph.handler import LinkGraphHandler
from linkgraph.hosts import origin_of
from linkgraph.keyfilter import KeyFilter
from linkgraph.nodecache import origin_fields
from linkgraph.queries import AnchorQuery, NodeQuery
from linkgraph.records import NODES, REVERSE, STATS_KEY, NodeRecord, PartitionStats
from linkgraph.records import new_target_value as encoded_target
from linkgraph.wire import decode_in_link
from schemas.canonical import host_key, registered_domain
from schemas.links import LinkEdge, PageLinks
from streamcrawl.batch import apply_batch
from streamcrawl.handler import Context, Record
from streamcrawl.state import Transaction
from tests.unit.linkgraph.harness import GraphHarness

TARGET = "https://t.example/"


def page(n: int, *targets: str, at: int = 0) -> PageLinks:
    return PageLinks(
        crawl_id="c1",
        from_url=f"https://s{n % 3}.example/{n}",
        fetched_at=1000 + n + at,
        edges=[
            LinkEdge(to_url=t, anchor_text=f"text {n}", link_type="EXTERNAL", discovered_at=900 + n)
            for t in targets
        ],
    )


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[GraphHarness]:
    harness = GraphHarness(tmp_path)
    yield harness
    harness.close()


def node(graph: GraphHarness, url: str = TARGET) -> dict[str, object]:
    return graph.query(NodeQuery(url))


def test_a_new_targets_template_is_the_records_encoding() -> None:
    for url in (
        "https://a.example/x",
        'https://www.b.example.co.uk/q?x="y"&z=\\',
        "https://xn--e1afmkfd.xn--p1ai/%D0%BF",
        "http://127.0.0.1:8080/",
    ):
        host = host_key(origin_of(url) + "/")
        domain = registered_domain(host) if host else ""
        record = NodeRecord(url, host, domain, 7, in_live=2, in_total=3, in_epoch=5)
        assert encoded_target(url, origin_fields(origin_of(url)), 7, 2, 3, 5) == record.encode()
        assert NodeRecord.decode(record.encode()) == record


def test_a_key_filter_has_no_false_negatives_and_few_false_positives() -> None:
    keys = [f"https://h.example/{n}\thttps://s.example/{n}".encode() for n in range(20_000)]
    full, overfull = KeyFilter(len(keys)), KeyFilter(100)
    for start in range(0, len(keys), 700):
        full.add_all(keys[start : start + 700])
        overfull.add_all(keys[start : start + 700])
    assert all(full.might_contain(key) for key in keys)
    assert all(overfull.might_contain(key) for key in keys)
    assert full.full and overfull.full
    others = [key + b"/other" for key in keys]
    assert sum(full.might_contain(key) for key in others) < len(others) * 0.01


def test_a_target_stored_before_a_restart_is_read_not_made_anew(graph: GraphHarness) -> None:
    graph.feed_in_cycles(page(1, TARGET))
    graph.restart()
    graph.feed_in_cycles(page(2, TARGET), page(3, TARGET))
    assert node(graph)["in_degree"] == 3
    assert node(graph)["first_seen_at"] == 901
    # A crawled source that becomes a target after a restart keeps what its crawl recorded.
    graph.restart()
    graph.feed_in_cycles(page(4, "https://s1.example/1"))
    source = node(graph, "https://s1.example/1")
    assert (source["crawled"], source["out_degree"], source["in_degree"]) == (True, 1, 1)


def test_replayed_in_links_change_nothing_after_a_restart(graph: GraphHarness) -> None:
    rekeyed = graph.feed_in_cycles(page(1, TARGET), page(2, TARGET))
    reverse = graph.scan(0, REVERSE)
    graph.restart()  # the targets' epoch is over: their in-links are read back
    graph.feed_in_links(rekeyed)
    assert graph.scan(0, REVERSE) == reverse
    assert node(graph)["in_degree"] == 2
    anchors = graph.query(AnchorQuery(TARGET))["anchors"]
    assert {a["text"]: a["count"] for a in anchors} == {"text 1": 1, "text 2": 1}


def test_a_full_filter_begins_a_new_epoch_and_nothing_is_counted_twice(
    graph: GraphHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nodecache, "IN_LINKS_EXPECTED", 3)
    graph.restart()  # caches made with the small filter
    first = PartitionStats.decode(graph.stores[0].get(NODES, STATS_KEY)).epoch
    rekeyed = []
    for cycle in range(4):
        rekeyed += graph.feed_in_cycles(*(page(n, TARGET) for n in range(cycle * 3, cycle * 3 + 3)))
    assert PartitionStats.decode(graph.stores[0].get(NODES, STATS_KEY)).epoch >= first + 3
    assert node(graph)["in_degree"] == 12
    graph.feed_in_links(rekeyed)  # replays, each in its own cycle, over several epochs
    assert node(graph)["in_degree"] == 12
    assert len(graph.scan(0, REVERSE)) == 12


def test_a_new_target_crawled_in_the_same_batch_keeps_both_sides(graph: GraphHarness) -> None:
    """An in-link makes a new target, then a `links` record of that URL in the same batch (its
    node becomes a full one), then another in-link (a second run): one node with all of it."""
    rekeyed = graph.feed(page(1, TARGET, "https://u.example/"), rekey=False)
    in_links = [decode_in_link(o.value, o.key) for o in rekeyed]
    crawled = PageLinks(crawl_id="c1", from_url=TARGET, fetched_at=5000, edges=[])
    (rekeyed_second,) = graph.feed(page(2, TARGET), rekey=False)
    second = decode_in_link(rekeyed_second.value, rekeyed_second.key)
    values = [("links.by-target", in_links[0]), ("links", crawled), ("links.by-target", second)]
    top = Transaction(graph.stores[0])
    records = [Record(t, 0, 100 + n, None, v, [], 0) for n, (t, v) in enumerate(values)]
    batch = apply_batch(graph.handler, 0, records, top)
    assert not batch.rejections
    graph.handler.on_tick(Context(partition=0, transaction=top))
    graph.stores[0].write(top.writes, "changelog", None)
    target = node(graph)
    assert (target["crawled"], target["in_degree"], target["fetched_at"]) == (True, 2, 5000)
    assert top.sources[NODES][TARGET.encode()] == "links.by-target:0:102"


def test_an_edge_twice_in_one_run_reads_the_runs_own_write(graph: GraphHarness) -> None:
    """The same edge thrice in one cycle of in-links (a replay, then a newer fetch with another
    anchor): the run reads back what it wrote, and the last write wins with its own source."""
    (output,) = graph.feed(page(1, TARGET), rekey=False)
    assert output.value is not None
    first = decode_in_link(output.value, output.key)
    newer = decode_in_link(
        orjson.dumps({**orjson.loads(output.value), "anchor_text": "moved", "last_seen_at": 5000}),
        output.key,
    )
    graph._apply_cycle("links.by-target", 0, [first, first, newer])
    key = f"{TARGET}\t{first.from_url}".encode()
    assert graph.last_sources[(REVERSE, key)] == f"links.by-target:0:{graph.offset}"
    assert node(graph)["in_degree"] == 1
    anchors = graph.query(AnchorQuery(TARGET))["anchors"]
    assert {a["text"]: a["count"] for a in anchors} == {"moved": 1}
    assert PartitionStats.decode(graph.stores[0].get(NODES, STATS_KEY)).entries[REVERSE] == 1


def test_a_partition_first_seen_in_a_batch_counts_its_epoch_on(graph: GraphHarness) -> None:
    """A handler handed a batch of a partition it never opened reads its stats first: its epoch
    is a new one, so the earlier epoch's in-links are read back, not taken for new."""
    rekeyed = graph.feed_in_cycles(page(1, TARGET))
    graph.handler = LinkGraphHandler(graph.topics)  # no `on_partition_opened`
    graph.feed_in_links(rekeyed)
    assert node(graph)["in_degree"] == 1
    assert PartitionStats.decode(graph.stores[0].get(NODES, STATS_KEY)).epoch == 2


def test_a_written_target_is_kept_and_counted_on_without_a_read(
    graph: GraphHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A target written in one cycle is counted on in the next without reading its node; one
    forgotten beyond the bound (the least recently changed first) is read back; a kept one
    crawled as a source becomes a full node over what the store has. The stats stay exact."""
    graph.restart(kept_targets=4)
    store = graph.stores[0]
    reads: list[bytes] = []
    stored_get = store.get

    def get(table: str, key: bytes) -> bytes | None:
        if table == NODES:
            reads.append(key)
        return stored_get(table, key)

    monkeypatch.setattr(store, "get", get)
    graph.feed_in_cycles(page(1, TARGET))
    graph.feed_in_cycles(page(2, TARGET))
    assert TARGET.encode() not in reads
    assert node(graph)["in_degree"] == 2
    reads.clear()  # the query's
    others = [f"https://u.example/{n}" for n in range(6)]
    graph.feed_in_cycles(page(3, *others))  # TARGET is the least recently changed: forgotten
    graph.feed_in_cycles(page(4, TARGET))
    assert reads.count(TARGET.encode()) == 1
    assert node(graph)["in_degree"] == 3
    reads.clear()
    graph.feed_in_cycles(page(5, others[-1]))  # kept: no read
    graph.feed(PageLinks(crawl_id="c1", from_url=others[-1], fetched_at=5000, edges=[]))
    assert others[-1].encode() not in reads
    crawled = node(graph, others[-1])
    assert (crawled["crawled"], crawled["in_degree"], crawled["fetched_at"]) == (True, 2, 5000)
    stats = PartitionStats.decode(store.get(NODES, STATS_KEY))
    stored = [(k, v) for k, v in graph.scan(0, NODES) if k != STATS_KEY]
    assert stats.entries[NODES] == len(stored)
    assert stats.size[NODES] == sum(len(k) + len(v) for k, v in stored)


def test_a_kept_target_changed_then_crawled_in_one_batch_keeps_its_stored_size(
    graph: GraphHarness,
) -> None:
    """A kept target that an in-link changes, then a `links` record of that URL crawls, in one
    batch: the full node it becomes knows the value the store has (the counts taken before the
    change), so the stats stay exact, and nothing of the kept counts outlives the full node."""
    graph.feed_in_cycles(*[page(n, TARGET) for n in range(1, 10)])  # written and kept
    (rekeyed,) = graph.feed(page(10, TARGET), rekey=False)  # 10 in-links: a longer value
    crawled = PageLinks(crawl_id="c1", from_url=TARGET, fetched_at=5000, edges=[])
    values = [("links.by-target", decode_in_link(rekeyed.value, rekeyed.key)), ("links", crawled)]
    top = Transaction(graph.stores[0])
    records = [Record(t, 0, 100 + n, None, v, [], 0) for n, (t, v) in enumerate(values)]
    assert not apply_batch(graph.handler, 0, records, top).rejections
    graph.handler.on_tick(Context(partition=0, transaction=top))
    graph.stores[0].write(top.writes, "changelog", None)
    graph.handler._nodes[0].entries.clear()  # the full node forgotten: read back from here on
    graph.feed_in_cycles(page(11, TARGET))
    target = node(graph)
    assert (target["crawled"], target["in_degree"], target["fetched_at"]) == (True, 11, 5000)
    stats = PartitionStats.decode(graph.stores[0].get(NODES, STATS_KEY))
    stored = [(k, v) for k, v in graph.scan(0, NODES) if k != STATS_KEY]
    assert stats.entries[NODES] == len(stored)
    assert stats.size[NODES] == sum(len(k) + len(v) for k, v in stored)


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://a.example/x/y", "https://a.example"),
        ("https://a.example", "https://a.example"),
        ("https://a.example?q=/x", "https://a.example"),
        ("http://u@127.0.0.1:8080/p?q", "http://u@127.0.0.1:8080"),
        ("https://h.example/?a://b", "https://h.example"),
    ],
)
def test_a_urls_origin_is_its_scheme_and_authority(url: str, origin: str) -> None:
    assert origin_of(url) == origin
