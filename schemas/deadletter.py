"""`deadletter`: messages a stage could not process, with where they came from and why.

Producers: every service (a message that fails to decode or validate, a URL that exhausted its
retries). Consumers: operators and their tools. Key: the original key. Long retention: an operator
must be able to inspect and replay. The payload is cut to 64 KiB; its full sha256 and size are kept
so a cut payload can still be matched against its source. In JSON the payload is URL-safe base64
(`base64.urlsafe_b64decode` reads it; the standard decoder silently drops `-` and `_`).
"""

from __future__ import annotations

import hashlib

from pydantic import ConfigDict

from schemas.base import EpochMillis, InternalModel, now_millis
from schemas.topic import DAY_MS, MIB, TopicSpec

TOPIC = TopicSpec(
    suffix="deadletter", key="original key", retention_ms=30 * DAY_MS, max_message_bytes=1 * MIB
)

MAX_PAYLOAD_BYTES = 64 * 1024


class DeadLetter(InternalModel):
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    stage: str
    topic: str
    partition: int
    offset: int
    error: str
    payload: bytes
    payload_sha256: str
    payload_size: int
    truncated: bool
    at: EpochMillis


def dead_letter(
    stage: str, topic: str, partition: int, offset: int, error: str, payload: bytes | None
) -> DeadLetter:
    """Build a DeadLetter, cutting the payload to 64 KiB and keeping its hash and size."""
    raw = payload or b""
    return DeadLetter(
        stage=stage,
        topic=topic,
        partition=partition,
        offset=offset,
        error=error[:4096],
        payload=raw[:MAX_PAYLOAD_BYTES],
        payload_sha256=hashlib.sha256(raw).hexdigest(),
        payload_size=len(raw),
        truncated=len(raw) > MAX_PAYLOAD_BYTES,
        at=now_millis(),
    )
