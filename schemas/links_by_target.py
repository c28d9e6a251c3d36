"""`links.by-target`: one in-link per record, re-keyed by target for the reverse index.

Producer and consumer: the link-graph service, which re-keys each forward edge so the instance that
owns a target owns all its in-links and anchor texts. Key: to_url + TAB + from_url (compaction keeps
one record per edge), partitioned by to_url alone with the kernel's murmur2 so every edge of one
target lands on one partition.
"""

from __future__ import annotations

from pydantic import Field

from schemas.base import EpochMillis, InternalModel
from schemas.links import LinkPosition, LinkType
from schemas.partitioning import partition_for_key
from schemas.topic import TopicSpec

TOPIC = TopicSpec(suffix="links.by-target", key="to_url\\tfrom_url", cleanup="compact")


def key(to_url: str, from_url: str) -> str:
    return f"{to_url}\t{from_url}"


def partition(to_url: str, partitions: int) -> int:
    return partition_for_key(to_url.encode("utf-8"), partitions)


class InLink(InternalModel):
    from_url: str
    to_url: str
    anchor_text: str = ""
    context_window: str = ""
    link_type: LinkType
    position: LinkPosition = "CONTENT"
    rel: list[str] = Field(default_factory=list)
    discovered_at: EpochMillis
    last_seen_at: EpochMillis
    gone: bool = False
    """The source no longer links here (kept, not forgotten)."""
