"""What a topic is: its name suffix, key rule, partitioning and retention, in one record.

Each topic module in this package defines one `TopicSpec` named `TOPIC`; `schemas.registry` collects
them. Names get a configurable prefix (default `crawl.`). A spec whose `partitions` is None takes
the deployment's partition count, which all co-partitioned topics share (DESIGN section 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

KIB = 1024
MIB = 1024 * KIB
DAY_MS = 24 * 60 * 60 * 1000

Cleanup = Literal["delete", "compact"]


@dataclass(frozen=True)
class TopicSpec:
    """One Kafka topic as the registry creates it."""

    suffix: str
    key: str
    """What the record key is, in words (for docs and `topics check`)."""
    cleanup: Cleanup = "delete"
    retention_ms: int = 7 * DAY_MS
    max_message_bytes: int = 1 * MIB
    compression: Literal["producer", "zstd", "lz4", "snappy", "gzip"] = "producer"
    partitions: int | None = None
    """None: the deployment's partition count (`kafka.partitions`)."""
    co_partitioned: bool = False
    """Keyed by host and read together by the frontier: must share partition count and placement."""
    extra_config: dict[str, str] = field(default_factory=dict)

    def name(self, prefix: str) -> str:
        return f"{prefix}{self.suffix}"

    def partition_count(self, default: int) -> int:
        return self.partitions if self.partitions is not None else default

    def broker_config(self) -> dict[str, str]:
        """The topic-level configs the registry sets and `topics check` compares."""
        config = {
            "cleanup.policy": self.cleanup,
            "max.message.bytes": str(self.max_message_bytes),
            "compression.type": self.compression,
        }
        if self.cleanup == "delete":
            config["retention.ms"] = str(self.retention_ms)
        config.update(self.extra_config)
        return config
