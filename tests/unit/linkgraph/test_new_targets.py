"""In-links to new targets are applied together (`inlinks._to_new_targets`): the state, the stats,
each write's changelog source and the dead letters must be exactly those of applying every in-link
one by one, whatever the run mixes (kept and cached targets, stored nodes, an edge twice, gone
links, links without text, values of another layout)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from linkgraph import inlinks
from linkgraph.keyfilter import KeyFilter
from linkgraph.records import TABLES
from linkgraph.wire import decode_in_link
from schemas.links import LinkEdge, PageLinks
from tests.unit.linkgraph.harness import GraphHarness


def sources(rng: random.Random, count: int, at: int) -> list[PageLinks]:
    """Pages of a few sites linking a shared set of targets (some of them crawled sources too)."""
    made = []
    for n in range(count):
        targets = {f"https://t{rng.randrange(4)}.example/{rng.randrange(30)}" for _ in range(6)}
        targets.add(f"https://s.example/{rng.randrange(count)}")  # a source as a target
        made.append(
            PageLinks(
                crawl_id="c1",
                from_url=f"https://s.example/{n}",
                fetched_at=1000 + at + n,
                edges=[
                    LinkEdge(
                        to_url=target,
                        anchor_text=rng.choice(["", "home", f"text {n}"]),
                        link_type="INTERNAL",
                        discovered_at=900 + at + n,
                    )
                    for target in sorted(targets)
                ],
            )
        )
    return made


def in_link_runs(rng: random.Random, graph: GraphHarness, pages: list[PageLinks]) -> list[Any]:
    """The in-links `pages` re-key, shuffled, with copies (an edge twice in a run), gone ones,
    and some in another layout (no record as received), decoded as the loop decodes them."""
    values = [(orjson.loads(o.value), o.key) for o in graph.feed(*pages, rekey=False) if o.value]
    rng.shuffle(values)
    values += [(dict(value), key) for value, key in rng.sample(values, len(values) // 10)]
    decoded = []
    for value, key in values:
        if rng.random() < 0.1:
            value["gone"] = True
        raw = orjson.dumps(value)
        if rng.random() < 0.1:  # the fields in another order: the model decodes it
            raw = orjson.dumps(dict(reversed(list(value.items()))))
        decoded.append(decode_in_link(raw, key))
    return decoded


def state(graph: GraphHarness) -> dict[str, list[tuple[bytes, bytes]]]:
    return {table: graph.scan(0, table) for table in TABLES}


@pytest.mark.parametrize("seed", range(4))
def test_in_links_applied_together_equal_those_applied_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    together, one_by_one = GraphHarness(tmp_path / "a"), GraphHarness(tmp_path / "b")
    applied = inlinks._to_new_targets
    try:
        for at in (0, 1000):  # the second round meets kept, cached and stored targets
            rng = random.Random(seed * 10 + at)
            pages = sources(rng, 12, at)
            runs = {}
            for name, graph in (("together", together), ("one by one", one_by_one)):
                runs[name] = in_link_runs(random.Random(seed + at), graph, pages)
            for start in range(0, len(runs["together"]), 40):
                sources_seen = []
                for name, graph in (("together", together), ("one by one", one_by_one)):
                    monkeypatch.setattr(
                        inlinks,
                        "_to_new_targets",
                        applied if name == "together" else lambda _i, records, _r, _a: records,
                    )
                    graph._apply_cycle("links.by-target", 0, runs[name][start : start + 40])
                    sources_seen.append(graph.last_sources)
                assert sources_seen[0] == sources_seen[1]
            assert state(together) == state(one_by_one)
            assert together.dead_letters == one_by_one.dead_letters
    finally:
        together.close()
        one_by_one.close()


def test_might_contain_many_answers_as_might_contain() -> None:
    keys = [f"https://h{n}.example/{n * 7}".encode() for n in range(5000)]
    held = KeyFilter(2000)
    held.add_all(keys[:2000])
    assert held.might_contain_many(keys) == [held.might_contain(key) for key in keys]
    assert all(held.might_contain_many(keys[:2000]))
    assert held.might_contain_many([]) == []


def test_a_url_that_does_not_encode_fails_alone(tmp_path: Path) -> None:
    """The run goes one by one when it cannot be applied together; only the bad in-link fails."""
    graph = GraphHarness(tmp_path)
    try:
        good = [o for o in graph.feed(*sources(random.Random(1), 3, 0)) if o.value]
        values = [decode_in_link(o.value, o.key) for o in good]
        bad = decode_in_link(good[0].value, good[0].key)
        bad.to_url = "https://t.example/\ud800"  # a lone surrogate: no UTF-8 for it
        graph._apply_cycle("links.by-target", 0, [*values, bad])
        assert len(graph.dead_letters) == 1
        assert "surrogate" in graph.dead_letters[0]
    finally:
        graph.close()
