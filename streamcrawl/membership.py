"""Publishing this instance to `members`: role, instance, side-server address, partitions, ready.

Records are republished on change and every heartbeat, and a tombstone is written on clean
shutdown; a record older than a few heartbeats belongs to an instance that died.
"""

from __future__ import annotations

import time

from schemas import members
from schemas.base import now_millis
from schemas.serde import encode
from streamcrawl.kafka import KafkaProducer

STALE_AFTER_BEATS = 3


class MemberPublisher:
    def __init__(
        self,
        producer: KafkaProducer,
        topic: str,
        role: str,
        instance: str,
        http_address: str,
        heartbeat_s: float = 5.0,
        api_address: str | None = None,
    ) -> None:
        self._producer = producer
        self._topic = topic
        self._role = role
        self._instance = instance
        self._http_address = http_address
        self._api_address = api_address
        self._heartbeat_s = heartbeat_s
        self._last: tuple[tuple[str, ...], bool] | None = None
        self._last_at = 0.0

    def publish(self, partitions: list[str], ready: bool) -> None:
        """Publish when something changed or a heartbeat is due; cheap to call every cycle."""
        state = (tuple(partitions), ready)
        now = time.monotonic()
        if state == self._last and now - self._last_at < self._heartbeat_s:
            return
        record = members.Member(
            role=self._role,
            instance=self._instance,
            http_address=self._http_address,
            api_address=self._api_address,
            partitions=partitions,
            ready=ready,
            updated_at=now_millis(),
            heartbeat_ms=int(self._heartbeat_s * 1000),
        )
        self._producer.produce(self._topic, members.key(self._role, self._instance), encode(record))
        self._last, self._last_at = state, now

    def leave(self) -> None:
        self._producer.produce(self._topic, members.key(self._role, self._instance), None)

    def close(self) -> None:
        self._producer.close()


def stale_at_ms(member: members.Member) -> int:
    """When the member's record stops counting as live unless it beats again."""
    return member.updated_at + STALE_AFTER_BEATS * member.heartbeat_ms


def is_live(member: members.Member, now_ms: int | None = None) -> bool:
    return (now_ms if now_ms is not None else now_millis()) <= stale_at_ms(member)
