"""`scores`: page ranks that changed by more than a threshold, for priority strategies.

Producer: the link-graph ranker. Consumer: the frontier partition holding the URL's host. Key: the
URL (compaction keeps each page's latest score); partitioned by the URL's host with the kernel's
murmur2 so it lands with the host's `urls` and `outcomes`.
"""

from __future__ import annotations

from schemas.base import EpochMillis, InternalModel
from schemas.partitioning import partition_for_key
from schemas.topic import TopicSpec

TOPIC = TopicSpec(suffix="scores", key="url", cleanup="compact", co_partitioned=True)


def key(url: str) -> str:
    return url


def partition(host: str, partitions: int) -> int:
    return partition_for_key(host.encode("utf-8"), partitions)


class PageScore(InternalModel):
    url: str
    host: str
    pagerank: float
    computed_at: EpochMillis
