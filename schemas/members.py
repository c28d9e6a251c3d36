"""`members`: who is running, where its HTTP side server is, what it holds and whether it is ready.

Producer: every service instance, with its side-server and API addresses, on start, on every
assignment change, periodically (a heartbeat), and a tombstone on clean shutdown. Consumers:
`streamcrawl status`, the CLI's queries and query routing in the link graph.
Key: role/instance, compacted; one partition, since it is tiny and read whole.
"""

from __future__ import annotations

from schemas.base import EpochMillis, InternalModel
from schemas.topic import DAY_MS, TopicSpec

TOPIC = TopicSpec(
    suffix="members",
    key="role/instance",
    cleanup="compact",
    partitions=1,
    extra_config={"delete.retention.ms": str(DAY_MS), "segment.ms": str(DAY_MS)},
)


def key(role: str, instance: str) -> str:
    return f"{role}/{instance}"


class Member(InternalModel):
    role: str
    instance: str
    http_address: str
    """The side server: /metrics, /healthz, /readyz."""
    api_address: str | None = None
    """The role's own HTTP API (crawl control, graph or page queries), when it serves one."""
    partitions: list[str]
    """Assigned input partitions as `topic:partition`."""
    ready: bool
    updated_at: EpochMillis
    heartbeat_ms: int
    """How often this member republishes itself; a record older than a few beats is stale."""
