"""Publishing a ranking's changed scores to `scores` (key URL, partitioned by the URL's host).

A score is published when the page is new to the ranker or its PageRank moved by more than
``change_ratio`` of its previous value. One ranking can change hundreds of thousands of scores, so
this producer is librdkafka's own, fed in a tight loop with one delivery callback that counts
failures, then flushed (the kernel's `KafkaProducer` makes a future per message, which costs more
than the encoding here); its configuration is the kernel's `producer_config`.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
from confluent_kafka import KafkaError, Message, Producer

from linkgraph import metrics
from linkgraph.exceptions import LinkGraphError
from linkgraph.ranking import Ranking
from schemas.base import SCHEMA_VERSION
from schemas.partitioning import partition_for_key

FLUSH_TIMEOUT_S = 120.0


class PublishError(LinkGraphError):
    """Some scores were not delivered; the next ranking publishes them again."""


def changed_scores(
    scores: npt.NDArray[np.float64], previous: npt.NDArray[np.float64] | None, change_ratio: float
) -> npt.NDArray[np.int64]:
    if previous is None or previous.size == 0:
        return np.arange(scores.size)
    known = min(previous.size, scores.size)
    moved = np.abs(scores[:known] - previous[:known]) > change_ratio * previous[:known]
    return np.concatenate([np.flatnonzero(moved), np.arange(known, scores.size)])


class ScorePublisher:
    def __init__(self, config: dict[str, Any], topic: str, partitions: int) -> None:
        self._producer = Producer(config)
        self._topic = topic
        self._partitions = partitions
        self._failures = 0

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._failures += 1

    def publish(self, ranking: Ranking, nodes: npt.NDArray[np.int64]) -> int:
        """Produce the scores of `nodes` and wait for their delivery; returns how many."""
        self._failures = 0
        urls, hosts, host_of = ranking.urls, ranking.hosts, ranking.graph.host
        scores = ranking.scores
        partition_of: dict[int, int] = {}
        computed_at = ranking.computed_at
        produce, poll = self._producer.produce, self._producer.poll
        for node in nodes.tolist():
            host_code = int(host_of[node])
            partition = partition_of.get(host_code)
            if partition is None:
                partition = partition_of[host_code] = partition_for_key(
                    hosts[host_code].encode(), self._partitions
                )
            url = urls.url(node)
            value = orjson.dumps(
                {
                    "v": SCHEMA_VERSION,
                    "url": url,
                    "host": hosts[host_code],
                    "pagerank": float(scores[node]),
                    "computed_at": computed_at,
                }
            )
            while True:
                try:
                    produce(self._topic, value, url, partition, self._delivered)
                    break
                except BufferError:
                    poll(0.05)
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        remaining = self._producer.flush(FLUSH_TIMEOUT_S)
        while remaining and time.monotonic() < deadline:
            remaining = self._producer.flush(1.0)
        if remaining or self._failures:
            raise PublishError(f"{remaining + self._failures} scores not delivered")
        metrics.SCORES_PUBLISHED.inc(int(nodes.size))
        return int(nodes.size)

    def close(self) -> None:
        self._producer.flush(10.0)
