"""The ranker without a broker: its thread run on stand-ins for its election consumer, its `links`
reader, its score publisher and its `members` record, time from a FakeClock. It ranks once caught
up, then on its interval when the graph changed, and at once when asked; it stops ranking when the
election gives the `members` partition away and rebuilds from `links` when it gets it back. Each
ranking is warm-started from the previous vector and publishes only the scores that moved."""

from __future__ import annotations

import queue
import random
import threading
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pytest
from confluent_kafka import Consumer

from linkgraph.analyses import AnalysisParameters
from linkgraph.exceptions import QueryError
from linkgraph.graph import CompactGraph
from linkgraph.pagerank import RankParameters
from linkgraph.publisher import ScorePublisher
from linkgraph.ranker import LinkReader, Ranker, RankerConfig
from linkgraph.ranking import Ranking, build_ranking
from schemas.links import LinkEdge, PageLinks
from streamcrawl.clock import FakeClock
from streamcrawl.membership import MemberPublisher
from tests.support import wait_for

INTERVAL_S = 60.0
CHANGE_RATIO = 0.01
PARAMETERS = RankParameters()


def fetched(source: str, targets: list[str], at: int = 1) -> PageLinks:
    return PageLinks(
        crawl_id="c1",
        from_url=source,
        fetched_at=at,
        edges=[LinkEdge(to_url=t, link_type="INTERNAL", discovered_at=at) for t in targets],
    )


def skewed_site(pages: int = 300) -> list[PageLinks]:
    """Pages linking to one of five hubs and to a few other pages: a skewed ranking, as a real
    site's is, so a cold start from the uniform vector is far from the fixed point."""
    rng = random.Random(3)
    site = [f"https://a.example/{i}" for i in range(pages)]
    return [
        fetched(
            page,
            [rng.choice(site[:5]), site[(i * 7 + 1) % pages], *rng.sample(site[: max(i, 10)], 2)],
        )
        for i, page in enumerate(site)
    ]


def refetched_with_one_more_link(page: PageLinks, target: str) -> PageLinks:
    return fetched(page.from_url, [e.to_url for e in page.edges] + [target], at=page.fetched_at + 1)


class Election:
    """The ranker group's consumer: the test decides whether `members` is assigned here. `consume`
    blocks up to its timeout unless the assignment changes, as a consumer waiting on the group."""

    def __init__(self, assigned: bool = True) -> None:
        self.assigned = assigned
        self.closed = False
        self._changed = threading.Event()

    def give(self, assigned: bool) -> None:
        self.assigned = assigned
        self._changed.set()

    def subscribe(self, topics: list[str]) -> None:
        pass

    def consume(self, count: int, timeout_s: float) -> list[Any]:
        if self._changed.wait(timeout_s):
            self._changed.clear()
        return []

    def assignment(self) -> list[str]:
        return ["members:0"] if self.assigned else []

    def close(self) -> None:
        self.closed = True


class LinksTopic:
    """`links` as a list the test appends to; each reader the ranker opens reads it from the
    start, and `read` waits up to its timeout for a new page, as the table consumer does."""

    def __init__(self, pages: list[PageLinks]) -> None:
        self.pages = list(pages)
        self.readers: list[FedReader] = []

    def produce(self, page: PageLinks) -> None:
        self.pages.append(page)
        for reader in self.readers:
            reader.fresh.put(page)

    def open_reader(self) -> LinkReader:
        reader = FedReader(self.pages)
        self.readers.append(reader)
        return reader


class FedReader(LinkReader):
    def __init__(self, pages: list[PageLinks]) -> None:  # no consumer: pages come from the test
        self.fresh: queue.Queue[PageLinks] = queue.Queue()
        for page in pages:
            self.fresh.put(page)
        self.undecodable = 0
        self.reads = 0
        """Calls of `read` begun: the ranker calls it once each time round its loop."""
        self.applied = 0
        self.applied_in = 0
        """The read that applied the latest page."""
        self.closed = False

    @property
    def caught_up(self) -> bool:
        return True

    def read(self, graph: CompactGraph, timeout_s: float) -> int:
        self.reads += 1
        try:
            page: PageLinks | None = self.fresh.get(timeout=timeout_s)
        except queue.Empty:
            return 0
        applied = 0
        while page is not None:
            graph.add(page)
            applied += 1
            page = None if self.fresh.empty() else self.fresh.get_nowait()
        self.applied_in = self.reads
        self.applied += applied
        return applied

    def close(self) -> None:
        self.closed = True


class RecordingPublisher(ScorePublisher):
    """Records the URLs each ranking would publish to `scores`."""

    def __init__(self) -> None:  # no producer
        self.published: list[dict[str, float]] = []

    def publish(self, ranking: Ranking, nodes: npt.NDArray[np.int64]) -> int:
        self.published.append(
            {ranking.urls.url(n): float(ranking.scores[n]) for n in nodes.tolist()}
        )
        return int(nodes.size)

    def close(self) -> None:
        pass


class RankerRecord(MemberPublisher):
    """The ranker's `members` record: whether it is published, and whether it was withdrawn."""

    def __init__(self) -> None:  # no producer
        self.published = False
        self.left = False

    def publish(self, partitions: list[str], ready: bool) -> None:
        self.published, self.left = True, False

    def leave(self) -> None:
        self.published, self.left = False, True

    def close(self) -> None:
        pass


class RankerUnderTest:
    def __init__(self, pages: list[PageLinks]) -> None:
        self.clock = FakeClock()
        self.election = Election()
        self.links = LinksTopic(pages)
        self.publisher = RecordingPublisher()
        self.record = RankerRecord()
        self.ranker = Ranker(
            RankerConfig(interval_s=INTERVAL_S, change_ratio=CHANGE_RATIO, parameters=PARAMETERS),
            cast(Consumer, self.election),  # only what the ranker calls of a Consumer
            "members",
            self.links.open_reader,
            self.publisher,
            dict,
            self.clock,
        )

    def number(self) -> int:
        ranking = self.ranker.ranking
        return ranking.number if ranking is not None else 0

    def wait_for_ranking(self, number: int) -> Ranking:
        wait_for(lambda: self.number() == number, 30, f"ranking {number}")
        ranking = self.ranker.ranking
        assert ranking is not None
        return ranking

    def went_round(self) -> None:
        """Wait until the ranker has decided whether to rank after this call, with every page
        produced so far in its graph: the read after the one that applied the latest page, and
        the second read begun after this call, mark such a decision made."""
        reader = self.links.readers[-1]
        begun = reader.reads
        wait_for(
            lambda: (
                reader.applied == len(self.links.pages)
                and reader.reads > max(begun + 1, reader.applied_in)
            ),
            30,
            "the ranker went round",
        )


@pytest.fixture
def running() -> Iterator[RankerUnderTest]:
    site = [f"https://a.example/{i}" for i in range(10)]
    under_test = RankerUnderTest([fetched(p, [site[(i + 1) % 10]]) for i, p in enumerate(site)])
    under_test.ranker.start(under_test.record)
    yield under_test
    under_test.ranker.stop()
    assert under_test.ranker.error is None


def test_the_ranker_ranks_once_caught_up_then_each_interval_the_graph_changed_and_on_demand(
    running: RankerUnderTest,
) -> None:
    first = running.wait_for_ranking(1)
    assert running.ranker.leading() and running.record.published
    assert first.graph.nodes == 10 and len(running.publisher.published[0]) == 10

    running.links.produce(fetched("https://a.example/new", ["https://a.example/0"]))
    running.went_round()
    running.clock.advance(INTERVAL_S - 0.5)
    running.went_round()
    assert running.number() == 1, "a changed graph waits for the interval"
    running.clock.advance(0.5)
    assert running.wait_for_ranking(2).graph.nodes == 11

    running.clock.advance(INTERVAL_S)
    running.went_round()
    assert running.number() == 2, "an unchanged graph is not ranked again"

    summary = running.ranker.request_ranking().result(timeout=30)
    assert (summary["ranking"], summary["nodes"]) == (3, 11), "asked: ranked at once"


def test_a_ranker_that_loses_the_election_steps_down_and_rebuilds_from_links_when_it_wins_again(
    running: RankerUnderTest,
) -> None:
    running.wait_for_ranking(1)
    running.election.give(False)
    wait_for(lambda: not running.ranker.leading(), 30, "the ranker stepped down")
    assert running.ranker.ranking is None and running.record.left
    assert running.links.readers[0].closed
    with pytest.raises(QueryError, match="no ranking yet"):
        running.ranker.answer("top", {})

    running.links.produce(fetched("https://a.example/new", ["https://a.example/0"]))
    running.election.give(True)
    again = running.wait_for_ranking(1)  # a fresh start: no vector to warm up from
    assert len(running.links.readers) == 2 and running.record.published
    assert again.graph.nodes == 11, "the whole of `links` read again, the new page with it"


def ranker_on(pages: list[PageLinks]) -> tuple[Ranker, RecordingPublisher, CompactGraph]:
    publisher = RecordingPublisher()
    ranker = Ranker(
        RankerConfig(change_ratio=CHANGE_RATIO, parameters=PARAMETERS),
        cast(Consumer, Election()),
        "members",
        LinksTopic([]).open_reader,
        publisher,
        dict,
        FakeClock(),
    )
    graph = CompactGraph()
    for page in pages:
        graph.add(page)
    return ranker, publisher, graph


def test_a_second_ranking_publishes_only_the_scores_that_moved_more_than_the_ratio() -> None:
    pages = skewed_site()
    ranker, publisher, graph = ranker_on(pages)
    ranker.rank(graph)
    first = publisher.published[0]
    assert len(first) == len(graph.urls) == 300, "the first ranking publishes every page"

    graph.add(refetched_with_one_more_link(pages[250], "https://a.example/37"))
    summary = ranker.rank(graph)
    second = ranker.ranking
    assert second is not None
    moved = {
        url: abs(second.scores[node] - first[url]) / first[url]
        for node, url in enumerate(second.urls.urls(range(second.graph.nodes)))
    }
    assert set(publisher.published[1]) == {
        url for url, ratio in moved.items() if ratio > CHANGE_RATIO
    }
    assert "https://a.example/37" in publisher.published[1]
    assert 0 < summary["published"] == len(publisher.published[1]) < 30
    assert any(0 < ratio <= CHANGE_RATIO for ratio in moved.values()), "some moved a little"


def test_a_new_page_is_published_with_those_that_moved() -> None:
    pages = skewed_site()
    ranker, publisher, graph = ranker_on(pages)
    ranker.rank(graph)
    graph.add(refetched_with_one_more_link(pages[250], "https://a.example/new"))
    ranker.rank(graph)
    assert "https://a.example/new" in publisher.published[1]
    assert len(publisher.published[1]) < 30


def test_a_second_ranking_starts_warm_from_the_previous_vector() -> None:
    pages = skewed_site()
    ranker, _, graph = ranker_on(pages)
    ranker.rank(graph)
    graph.add(refetched_with_one_more_link(pages[250], "https://a.example/37"))
    warm = ranker.rank(graph)
    cold = build_ranking(graph, 1, 0, {}, PARAMETERS, AnalysisParameters(), start=None)
    cold_iterations = cold.outcome.iterations
    ranking = ranker.ranking
    assert ranking is not None
    assert warm["iterations"] < 0.75 * cold_iterations
    # Each is within `tolerance` (L1) of the fixed point, so of each other within twice that.
    assert np.abs(ranking.scores - cold.scores).sum() <= 2 * PARAMETERS.tolerance
