"""The ranker's compact graph against a plain model of its rules, and what it costs in memory.

The model is the rule in words: a source's out-links are those of its newest fetch, every part of
it, each target once (the first link type seen); a fetch older than the newest is ignored, and
adds no node. Random streams of fetches, re-crawls, parts, redelivered parts and late old fetches
are applied to both, with the log compacted often, and every snapshot must match.
"""

from __future__ import annotations

import random
import tracemalloc
from dataclasses import dataclass, field

import numpy as np
import pytest

from linkgraph import graph as graph_module
from linkgraph.graph import KINDS, CompactGraph, OutLinks
from linkgraph.urltable import EMPTY, UrlTable


@dataclass
class Fetch:
    at: int
    crawl: str
    links: dict[str, str] = field(default_factory=dict)


@dataclass
class Model:
    nodes: list[str] = field(default_factory=list)
    fetches: dict[str, Fetch] = field(default_factory=dict)

    def add(self, source: str, at: int, crawl: str, targets: list[str], kinds: list[str]) -> bool:
        newest = self.fetches.get(source)
        if newest is not None and at < newest.at:
            return False
        for url in [source, *targets]:
            if url not in self.nodes:
                self.nodes.append(url)
        if newest is None or at > newest.at:
            newest = self.fetches[source] = Fetch(at, crawl)
        for target, kind in zip(targets, kinds, strict=True):
            newest.links.setdefault(target, kind)
        return True

    def edges(self) -> set[tuple[str, str, str]]:
        return {(s, t, k) for s, f in self.fetches.items() for t, k in f.links.items()}


def edges_of(graph: CompactGraph) -> list[tuple[str, str, str]]:
    arrays = graph.arrays()
    urls = graph.urls.urls(range(arrays.nodes))
    return [
        (urls[s], urls[t], KINDS[k])
        for s, t, k in zip(
            arrays.src.tolist(), arrays.dst.tolist(), arrays.kind.tolist(), strict=True
        )
    ]


@pytest.mark.parametrize("seed", range(6))
def test_the_graph_keeps_each_sources_newest_fetch_like_the_model(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(graph_module, "COMPACT_AT_LEAST", 5)
    rng = random.Random(seed)
    pages = [f"https://h{rng.randrange(4)}.example/{n}" for n in range(60)] + [
        "https://ü.example/ä?q=1"
    ]
    graph, model = CompactGraph(), Model()
    sent: list[OutLinks] = []
    for step in range(120):
        batch: list[OutLinks] = []
        for _ in range(rng.choice([1, 1, 2, 5])):  # as the reader hands them over
            if sent and rng.random() < 0.15:  # a redelivered record or a late old fetch
                record = rng.choice(sent)
            else:
                source = rng.choice(pages[:20])
                at = rng.randrange(1, 8)
                targets = [rng.choice(pages) for _ in range(rng.randrange(0, 12))]
                kinds = [rng.choice(KINDS) for _ in targets]
                record = OutLinks(source, at, f"c{at % 3}", targets, kinds)
                sent.append(record)
            batch.append(record)
        assert graph.add_all(batch) == sum(model.add(*record[:5]) for record in batch)
        if step % 10 == 0:
            found = edges_of(graph)
            assert len(found) == len(set(found)), "each (source, target) once"
            assert set(found) == model.edges()
    arrays = graph.arrays()
    assert graph.urls.urls(range(arrays.nodes)) == model.nodes
    assert set(edges_of(graph)) == model.edges()
    crawled = {graph.urls.url(n) for n in np.flatnonzero(arrays.crawled).tolist()}
    assert crawled == set(model.fetches)
    for source, fetch in model.fetches.items():
        node = int(graph.find([source])[0])
        assert graph.crawls[arrays.source_crawl[node]] == fetch.crawl
    assert graph.edge_count >= len(model.edges())


def test_a_compaction_drops_replaced_fetches_and_keeps_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(graph_module, "COMPACT_AT_LEAST", 10)
    graph = CompactGraph()
    home = "https://a.example/"
    graph.add_all([OutLinks("https://b.example/", 1, "c", [home], ["EXTERNAL"])])
    for at in range(1, 8):
        targets = [f"https://a.example/{at}/{i}" for i in range(4)]
        graph.add_all([OutLinks(home, at, "c", targets, ["INTERNAL"] * 4)])
    assert len(graph._dst) < 4 * 7 + 1, "the log was compacted"
    assert sorted(t for s, t, _ in edges_of(graph) if s == home) == [
        f"https://a.example/7/{i}" for i in range(4)
    ]
    assert ("https://b.example/", home, "EXTERNAL") in edges_of(graph)


def test_url_ids_are_dense_in_order_of_first_appearance_and_survive_growth() -> None:
    table, truth = UrlTable(), {}
    rng = random.Random(7)
    for _ in range(400):
        urls = [f"https://h{rng.randrange(9)}.example/é/{rng.randrange(30_000)}" for _ in range(50)]
        batch = table.batch(urls)
        skipped = rng.randrange(41)  # a record the caller rejects is left unnumbered
        numbered = list(range(skipped)) + list(range(skipped + 10, 50))
        added = batch.number(0, skipped) + batch.number(skipped + 10, 50)
        batch.close()
        first = {urls[p]: p for p in reversed(numbered)}
        new = [p for p in numbered if urls[p] not in truth and first[urls[p]] == p]
        assert added == new
        for position in new:
            truth[urls[position]] = len(truth)
        assert [batch.ids[p] for p in numbered] == [truth[urls[p]] for p in numbered]
        assert all(
            batch.ids[p] in (EMPTY, truth.get(urls[p])) for p in range(skipped, skipped + 10)
        )
    assert len(table) == len(truth) > 4096, "the table grew past its first size"
    assert table.urls(range(len(table))) == list(truth)
    assert table.find(["https://nowhere.example/", *truth][:3]).tolist() == [EMPTY, 0, 1]


def test_memory_is_arrays_not_objects_per_node_and_per_edge() -> None:
    """Each page here has a URL of 36 bytes, one record and 25 links. Beyond 5 bytes a link and
    12 a record, a page takes its URL plus about 60 bytes (offset, fingerprint, table slots, its
    fetch); the dict of URL strings and object per source of before took some 430."""
    rng = random.Random(3)
    urls = [f"https://w{n % 7}.example/wiki/Page_{n:07d}" for n in range(40_000)]
    targets = [[urls[rng.randrange(len(urls))] for _ in range(25)] for _ in range(len(urls))]
    CompactGraph().add_all([OutLinks(urls[0], 1, "c", [], [])])  # the suffix list, loaded once
    tracemalloc.start()
    try:
        graph = CompactGraph()
        for url, out in zip(urls, targets, strict=True):
            graph.add_all([OutLinks(url, 1, "c", out, ["INTERNAL"] * len(out))])
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(graph.urls) == len(urls) and graph.edge_count == 25 * len(urls)
    per_node = (held - 5 * graph.edge_count - 12 * len(urls)) / len(urls)
    assert per_node < 36 + 80, f"{per_node:.0f} bytes a node"
