"""`progress`: cumulative counters of one frontier partition for one crawl.

Producer: each frontier partition, on change and periodically. Consumers: the CLI, the API and
dashboards, which sum the latest record of every partition; a crawl is done when two consecutive
snapshots of every partition show nothing queued or leased and every expected ParseReport admitted
(DESIGN section 3, step 8). Key: crawl_id/partition, compacted.
"""

from __future__ import annotations

from schemas.base import EpochMillis, InternalModel
from schemas.topic import TopicSpec

TOPIC = TopicSpec(suffix="progress", key="crawl_id/partition", cleanup="compact")


def key(crawl_id: str, partition: int) -> str:
    return f"{crawl_id}/{partition}"


class PartitionProgress(InternalModel):
    crawl_id: str
    partition: int
    snapshot: int
    """Increases with every record of this partition, so readers can tell two snapshots apart."""
    at: EpochMillis
    counters: dict[str, int]
