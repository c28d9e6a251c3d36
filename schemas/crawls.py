"""`crawls`: the compacted table of every crawl's configuration and status.

Producer: only the frontier instance that owns the crawl id's `seeds` partition. Consumers: every
frontier instance reads it whole, outside any group (a table), and the API and CLI read it for
status. Key: crawl id, so compaction keeps each crawl's latest state.
"""

from __future__ import annotations

from typing import Literal

from schemas.base import EpochMillis, InternalModel
from schemas.seeds import CrawlRequest
from schemas.topic import MIB, TopicSpec

TOPIC = TopicSpec(suffix="crawls", key="crawl_id", cleanup="compact", max_message_bytes=4 * MIB)

CrawlStatus = Literal["active", "paused", "cancelled", "done"]


def key(crawl_id: str) -> str:
    return crawl_id


class CrawlState(InternalModel):
    crawl_id: str
    request: CrawlRequest
    status: CrawlStatus = "active"
    created_at: EpochMillis
    updated_at: EpochMillis
    owner_partition: int
