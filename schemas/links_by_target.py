"""`links.by-target`: one in-link per record, re-keyed by target for the reverse index.

Producer and consumer: the link-graph service, which re-keys each forward edge so the instance that
owns a target owns all its in-links and anchor texts. Key: to_url + TAB + from_url (compaction keeps
one record per edge), partitioned by to_url alone with the kernel's murmur2 so every edge of one
target lands on one partition. Value: an `InLinkValue`, the edge's fields without its ends, which
the key holds (a quarter to a third fewer bytes than repeating both URLs). A value with both ends
(`InLink`, what versions before this one sent, still in a compacted topic) is read as it is.
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


def ends(key: str) -> tuple[str, str] | None:
    """`key`'s to_url and from_url; None when it is not two URLs joined by a TAB."""
    to_url, separator, from_url = key.partition("\t")
    return (to_url, from_url) if separator and to_url and from_url else None


class InLinkValue(InternalModel):
    """The value: the edge's fields, in the forward record's order; its ends are the key's."""

    anchor_text: str = ""
    context_window: str = ""
    link_type: LinkType
    position: LinkPosition = "CONTENT"
    discovered_at: EpochMillis
    last_seen_at: EpochMillis
    rel: list[str] = Field(default_factory=list)
    gone: bool = False
    """The source no longer links here (kept, not forgotten)."""


class InLink(InternalModel):
    """An in-link whole: its ends (from the key) and its edge (`InLinkValue`)."""

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
