"""Every topic of the system, and the client limits that follow from them.

`streamcrawl topics create` makes these topics (idempotently) and `streamcrawl topics check` reports
drift from them. Changelog topics belong to stateful services; `changelog_topic` describes them so
the registry can create them too. The producer's `message.max.bytes` and the consumer's fetch limits
are derived from the largest `max.message.bytes` here, since librdkafka checks a message's size
before compression.
"""

from __future__ import annotations

from schemas import (
    budget,
    crawls,
    deadletter,
    fetch,
    items,
    links,
    links_by_target,
    members,
    outcomes,
    pages,
    progress,
    scores,
    seeds,
    urls,
)
from schemas.topic import MIB, TopicSpec

TOPICS: tuple[TopicSpec, ...] = (
    seeds.TOPIC,
    crawls.TOPIC,
    budget.TOPIC,
    urls.TOPIC,
    fetch.TOPIC,
    outcomes.TOPIC,
    pages.TOPIC,
    links.TOPIC,
    links_by_target.TOPIC,
    items.TOPIC,
    scores.TOPIC,
    progress.TOPIC,
    members.TOPIC,
    deadletter.TOPIC,
)

CHANGELOG_MAX_MESSAGE_BYTES = 4 * MIB
RECORD_OVERHEAD_BYTES = 64 * 1024


def changelog_topic(role: str, partitions: int | None = None) -> TopicSpec:
    """The compacted changelog of a role's state; partition p backs state partition p.

    Its partition count must equal the role's input partition count (None: the deployment's).
    """
    return TopicSpec(
        suffix=f"changelog.{role}",
        key="table NUL state key",
        cleanup="compact",
        max_message_bytes=CHANGELOG_MAX_MESSAGE_BYTES,
        partitions=partitions,
    )


STATEFUL_ROLES = ("frontier", "linkgraph", "storage")
"""Roles that keep per-partition state, each with one changelog topic."""

CHANGELOGS: tuple[TopicSpec, ...] = tuple(changelog_topic(role) for role in STATEFUL_ROLES)

ALL_TOPICS: tuple[TopicSpec, ...] = TOPICS + CHANGELOGS
"""What `streamcrawl topics create` makes and `topics check` compares."""


def largest_message_bytes(specs: tuple[TopicSpec, ...] = TOPICS) -> int:
    return max(spec.max_message_bytes for spec in specs)


def producer_limits(specs: tuple[TopicSpec, ...] = TOPICS) -> dict[str, str]:
    """librdkafka producer limits: a message as large as the largest topic allows fits."""
    return {"message.max.bytes": str(largest_message_bytes(specs) + RECORD_OVERHEAD_BYTES)}


def consumer_limits(specs: tuple[TopicSpec, ...] = TOPICS) -> dict[str, str]:
    """librdkafka consumer limits: one partition fetch can return the largest message."""
    largest = largest_message_bytes(specs) + RECORD_OVERHEAD_BYTES
    fetch_max = max(largest, 52_428_800)
    return {
        "max.partition.fetch.bytes": str(largest),
        "fetch.max.bytes": str(fetch_max),
        "receive.message.max.bytes": str(fetch_max + 1_000_000),
    }
