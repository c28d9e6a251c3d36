"""The ranker: one linkgraph instance at a time reads `links` whole, ranks, publishes `scores`.

Which instance ranks is decided by a consumer group of its own (`<prefix>linkgraph-ranker`)
subscribed to the one-partition `members` topic: the group gives that partition to exactly one
member, and that member leads (a single-member group in effect; when it dies, the group hands the
partition to another instance, which rebuilds the graph from `links`). The leader publishes itself
in `members` under `RANKER_ROLE`, so every instance can proxy global queries to it.

While leading it reads every partition of `links` from the beginning, outside any group, into a
`CompactGraph`; once it has caught up with the high watermarks seen at start it ranks, then again
every ``interval_s`` when the graph changed, and at once when asked (`rank_now`, the API's
POST /v1/graph/rank). Each ranking is warm-started from the previous vector and publishes the
scores that changed (`linkgraph.publisher`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from linkgraph import metrics
from linkgraph.analyses import AnalysisParameters
from linkgraph.exceptions import LinkGraphError, QueryError
from linkgraph.graph import CompactGraph, OutLinks
from linkgraph.pagerank import RankParameters
from linkgraph.publisher import ScorePublisher, changed_scores
from linkgraph.ranking import Ranking, build_ranking
from schemas.exceptions import DecodeError
from schemas.links import PageLinks
from schemas.serde import decode
from streamcrawl.clock import Clock
from streamcrawl.kafka import check_consumer_error, coordinates, watermarks
from streamcrawl.membership import MemberPublisher

log = logging.getLogger(__name__)

RANK_NOW_TIMEOUT_S = 300.0
READ_BATCH = 2000


@dataclass(frozen=True)
class RankerConfig:
    interval_s: float = 60.0
    change_ratio: float = 0.01
    parameters: RankParameters = field(default_factory=RankParameters)
    analysis: AnalysisParameters = field(default_factory=AnalysisParameters)


class LinkReader:
    """`links` read whole into a graph; `caught_up` once the start's high watermarks are reached."""

    def __init__(self, config: dict[str, Any], topic: str) -> None:
        self._consumer = Consumer(config)
        metadata = self._consumer.list_topics(topic, timeout=30)
        partitions = sorted(metadata.topics[topic].partitions)
        self._targets: dict[int, int] = {}
        for partition in partitions:
            low, high = watermarks(self._consumer, TopicPartition(topic, partition), 30.0)
            if high > low:
                self._targets[partition] = high
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        self.undecodable = 0

    @property
    def caught_up(self) -> bool:
        return not self._targets

    def read(self, graph: CompactGraph, timeout_s: float) -> int:
        records: list[OutLinks] = []
        for message in self._consumer.consume(READ_BATCH, timeout_s):
            error = message.error()
            if error is not None:
                check_consumer_error(error)
                continue
            _, partition, offset = coordinates(message)
            target = self._targets.get(partition)
            if target is not None and offset >= target - 1:
                del self._targets[partition]
            try:
                links: PageLinks = decode(PageLinks, message.value())
            except DecodeError as problem:
                self.undecodable += 1  # the linkgraph group dead-letters it; the ranker skips it
                log.warning("ranker skips an undecodable links record: %s", problem)
                continue
            records.append(OutLinks.of(links))
        graph.add_all(records)
        return len(records)

    def close(self) -> None:
        self._consumer.close()


class Ranker:
    def __init__(
        self,
        config: RankerConfig,
        election: Consumer,
        election_topic: str,
        open_reader: Callable[[], LinkReader],
        publisher: ScorePublisher,
        seeds: Callable[[], dict[str, list[str]]],
        clock: Clock,
    ) -> None:
        self._config = config
        self._election = election
        self._election_topic = election_topic
        self._open_reader = open_reader
        self._publisher = publisher
        self._seeds = seeds
        self._clock = clock
        self._member: MemberPublisher | None = None
        self._leading = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._requests: list[Future[dict[str, Any]]] = []
        self._ranking: Ranking | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="ranker")
        self.error: BaseException | None = None

    # ----- what the API sees -----------------------------------------------------------------

    def leading(self) -> bool:
        return self._leading.is_set()

    @property
    def ranking(self) -> Ranking | None:
        return self._ranking

    def answer(self, view: str, params: Mapping[str, str]) -> Any:
        ranking = self._ranking
        if ranking is None:
            raise QueryError("no ranking yet: the ranker is still reading links", 503)
        return ranking.answer(view, params)

    def request_ranking(self) -> Future[dict[str, Any]]:
        future: Future[dict[str, Any]] = Future()
        with self._lock:
            self._requests.append(future)
        return future

    async def rank_now(self) -> dict[str, Any]:
        return await asyncio.wait_for(
            asyncio.wrap_future(self.request_ranking()), RANK_NOW_TIMEOUT_S
        )

    # ----- the thread ----------------------------------------------------------------------

    def start(self, member: MemberPublisher) -> None:
        self._member = member
        self._election.subscribe([self._election_topic])
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _run(self) -> None:
        reader: LinkReader | None = None
        graph = CompactGraph()
        ranked_version = -1
        last_ranked = float("-inf")
        try:
            while not self._stop.is_set():
                self._election.consume(100, 0 if reader is not None else 0.2)
                if not self._election.assignment():
                    if reader is not None:
                        reader.close()
                        reader, graph, ranked_version = None, CompactGraph(), -1
                        last_ranked = float("-inf")  # leading again, it ranks once caught up
                        self._step_down()
                    continue
                if reader is None:
                    reader = self._open_reader()
                    self._leading.set()
                    log.info("this instance now ranks the link graph")
                if self._member is not None:
                    self._member.publish([], True)
                reader.read(graph, 0.1)
                if not reader.caught_up:
                    continue
                with self._lock:
                    requests, self._requests = self._requests, []
                due = self._clock.monotonic() - last_ranked >= self._config.interval_s
                if requests or (due and graph.version != ranked_version):
                    last_ranked = self._clock.monotonic()
                    # A failed ranking (scores not delivered) is tried again at the next interval.
                    ranked = self._rank_and_answer(graph, requests)
                    ranked_version = graph.version if ranked else -1
        except BaseException as error:
            log.exception("the ranker failed")
            self.error = error
            raise
        finally:
            if reader is not None:
                reader.close()
            self._step_down()
            self._election.close()
            self._publisher.close()
            if self._member is not None:
                self._member.close()

    def _step_down(self) -> None:
        self._leading.clear()
        self._ranking = None
        if self._member is not None:
            self._member.leave()
        with self._lock:
            requests, self._requests = self._requests, []
        for future in requests:
            future.set_exception(QueryError("this instance stopped ranking", 503))

    def _rank_and_answer(self, graph: CompactGraph, requests: list[Future[dict[str, Any]]]) -> bool:
        try:
            summary = self.rank(graph)
        except LinkGraphError as error:
            log.error("ranking failed: %s", error)
            for future in requests:
                future.set_exception(QueryError(f"ranking failed: {error}", 503))
            return False
        for future in requests:
            future.set_result(summary)
        return True

    def rank(self, graph: CompactGraph) -> dict[str, Any]:
        """Rank `graph` warm from the last vector and publish what changed; returns the summary."""
        began = time.perf_counter()
        previous = self._ranking
        ranking = build_ranking(
            graph,
            number=(previous.number + 1) if previous is not None else 1,
            computed_at=self._clock.now_ms(),
            seeds=self._seeds(),
            parameters=self._config.parameters,
            analysis=self._config.analysis,
            start=previous.scores if previous is not None else None,
        )
        changed = changed_scores(
            ranking.scores,
            previous.scores if previous is not None else None,
            self._config.change_ratio,
        )
        publishing = time.perf_counter()
        published = self._publisher.publish(ranking, changed)
        ranking.phases["publish"] = time.perf_counter() - publishing
        ranking.seconds = time.perf_counter() - began
        self._ranking = ranking
        metrics.RANKING_SECONDS.observe(ranking.seconds)
        metrics.RANKING_ITERATIONS.set(ranking.outcome.iterations)
        metrics.RANKER_GRAPH_BYTES.set(graph.held_bytes())
        log.info(
            "ranking %d: %d nodes, %d iterations, %d scores published in %.2fs",
            ranking.number,
            ranking.graph.nodes,
            ranking.outcome.iterations,
            published,
            ranking.seconds,
        )
        return {**ranking.summary(), "published": published}
