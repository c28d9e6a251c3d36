"""confluent-kafka, wrapped once: client configs, a producer with delivery futures, error sorting.

Every librdkafka property from settings passes through untouched; on top of it the kernel sets what
the design requires: idempotent producers with acks=all, zstd, the `murmur2_random` partitioner (so
keys land where Java clients put them), size limits derived from the topic registry, consumers that
start at the earliest offset and never store offsets on their own. Every client logs through
:data:`CLIENT_LOG` (JSON lines like the rest, repeats collapsed by `streamcrawl.logs.RepeatFilter`),
never straight to stderr.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from pydantic import BaseModel

from schemas import registry
from schemas.exceptions import DecodeError
from schemas.serde import decode
from streamcrawl.exceptions import DeliveryError, FatalKafkaError
from streamcrawl.logs import RepeatFilter
from streamcrawl.settings import Settings

CLIENT_LOG = logging.getLogger("streamcrawl.kafka.client")
"""librdkafka's messages and the errors its clients report."""
CLIENT_LOG.addFilter(RepeatFilter())

Headers = list[tuple[str, bytes]]

_IGNORABLE = {
    KafkaError._PARTITION_EOF,
    KafkaError._NO_OFFSET,
}


def admin_config(settings: Settings) -> dict[str, Any]:
    return {"logger": CLIENT_LOG, **settings.kafka.librdkafka()}


def coordinates(message: Message) -> tuple[str, int, int]:
    """Topic, partition and offset of a consumed (non-error) message."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    if topic is None or partition is None or offset is None:
        raise FatalKafkaError("consumed a message without topic, partition or offset")
    return topic, partition, offset


def message_headers(message: Message) -> Headers:
    """Headers as (name, bytes) pairs whatever form librdkafka returned them in."""
    raw = message.headers() or []
    pairs = list(raw.items()) if isinstance(raw, dict) else list(raw)
    return [
        (name, value if isinstance(value, bytes) else (value or "").encode())
        for name, value in pairs
    ]


def producer_config(settings: Settings, *, transactional_id: str | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": "zstd",
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        "client.id": f"streamcrawl-{settings.instance_id}",
        "logger": CLIENT_LOG,
        **registry.producer_limits(),
    }
    if transactional_id:
        config["transactional.id"] = transactional_id
    config.update(settings.kafka.librdkafka())
    return config


def consumer_config(
    settings: Settings,
    group_id: str,
    *,
    assignor: str = "cooperative-sticky",
    static_member: bool,
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "partition.assignment.strategy": assignor,
        "session.timeout.ms": settings.loop.session_timeout_ms,
        "heartbeat.interval.ms": settings.loop.heartbeat_interval_ms,
        "client.id": f"streamcrawl-{settings.instance_id}",
        "logger": CLIENT_LOG,
        "enable.partition.eof": False,
        **registry.consumer_limits(),
    }
    if static_member:
        config["group.instance.id"] = f"{group_id}.{settings.instance_id}"
    config.update(settings.kafka.librdkafka())
    return config


def table_consumer_config(settings: Settings) -> dict[str, Any]:
    """A consumer that reads whole topics by assignment; its group id is never committed to."""
    config: dict[str, Any] = {
        "group.id": f"streamcrawl-table-{settings.instance_id}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "client.id": f"streamcrawl-table-{settings.instance_id}",
        "logger": CLIENT_LOG,
        **registry.consumer_limits(),
    }
    config.update(settings.kafka.librdkafka())
    return config


_TRANSIENT = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
}


def is_transient(error: KafkaError) -> bool:
    """Worth retrying: a new topic's leader is being elected, a broker restarts, a timeout."""
    return bool(error.retriable()) or error.code() in _TRANSIENT


def watermarks(consumer: Consumer, partition: TopicPartition, timeout_s: float) -> tuple[int, int]:
    """Low and high watermark of a partition, retrying transient errors until the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = consumer.get_watermark_offsets(partition, timeout=timeout_s)
            return int(low), int(high)
        except KafkaException as exception:
            error = exception.args[0] if exception.args else None
            if not isinstance(error, KafkaError) or not is_transient(error):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def is_fatal(error: KafkaError) -> bool:
    """No retry of this client can fix it. `_FATAL` is how a consumer hears it was fenced (a static
    member whose group.instance.id rejoined under a new member id, as after a broker restart): the
    process must exit so a supervisor restarts it with a fresh client."""
    return bool(error.fatal()) or error.code() in (
        KafkaError._FATAL,
        KafkaError._FENCED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError._INVALID_ARG,
    )


def check_consumer_error(error: KafkaError) -> None:
    """Sort a consumer-side error: raise when fatal, log when transient, ignore the ignorable."""
    if error.code() in _IGNORABLE:
        return
    if is_fatal(error):
        raise FatalKafkaError(str(error))
    CLIENT_LOG.warning("kafka consumer error (retrying): %s", error)


class DeliveryFuture(Future[Message]):
    """Resolves with the delivered Message, or fails with DeliveryError."""


class DeliveryReport:
    """The delivery callback of one batch of sends: what failed, and the highest offset delivered
    per partition of one tracked topic (a changelog). One object serves the whole batch, so a send
    costs no future and no closure."""

    def __init__(self, tracked_topic: str | None = None) -> None:
        self.tracked_topic = tracked_topic
        self.failures: list[str] = []
        self.highest: dict[int, int] = {}

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failures.append(f"{message.topic()}: {error}")
            return
        if message.topic() != self.tracked_topic:
            return
        partition, offset = message.partition(), message.offset()
        if partition is None or offset is None:
            return
        if offset > self.highest.get(partition, -1):
            self.highest[partition] = offset

    def raise_if_failed(self) -> None:
        if self.failures:
            more = f" (and {len(self.failures) - 1} more)" if len(self.failures) > 1 else ""
            raise DeliveryError(f"not delivered: {self.failures[0]}{more}")


class KafkaProducer:
    """An idempotent producer whose sends return futures; a full queue is backpressure, not loss."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._fatal: KafkaError | None = None
        self._producer = Producer({**config, "error_cb": self._on_error})

    @classmethod
    def from_settings(cls, settings: Settings) -> KafkaProducer:
        return cls(producer_config(settings))

    def _on_error(self, error: KafkaError) -> None:
        if is_fatal(error):
            self._fatal = error
            CLIENT_LOG.error("fatal kafka producer error: %s", error)
        elif error.code() not in _IGNORABLE:
            CLIENT_LOG.warning("kafka producer error (librdkafka retries): %s", error)

    def _raise_if_fatal(self) -> None:
        if self._fatal is not None:
            raise FatalKafkaError(str(self._fatal))

    def produce(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: Headers | None = None,
    ) -> DeliveryFuture:
        """Queue one message; the future resolves when the broker has it (acks=all)."""
        self._raise_if_fatal()
        future = DeliveryFuture()

        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                future.set_exception(DeliveryError(f"{topic}: {error}"))
                return
            future.set_result(message)

        self.send(topic, key, value, partition=partition, headers=headers, report=delivered)
        self._producer.poll(0)
        return future

    def send(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: Headers | None = None,
        report: Callable[[KafkaError | None, Message], None],
    ) -> None:
        """Queue one message whose delivery `report` hears about (from `poll` or `flush`)."""
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": report}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                return
            except BufferError:
                # The local queue is full: serve deliveries until there is room.
                self._producer.poll(0.1)
                self._raise_if_fatal()
            except KafkaException as error:
                raise DeliveryError(f"{topic}: {error}") from error

    def poll(self, timeout_s: float = 0.0) -> None:
        self._producer.poll(timeout_s)
        self._raise_if_fatal()

    def flush(self, timeout_s: float) -> None:
        """Wait until every queued message is delivered or failed; raise if any remains."""
        deadline = time.monotonic() + timeout_s
        remaining = self._producer.flush(timeout_s)
        while remaining and time.monotonic() < deadline:
            remaining = self._producer.flush(max(0.0, deadline - time.monotonic()))
        self._raise_if_fatal()
        if remaining:
            raise DeliveryError(f"{remaining} messages not delivered within {timeout_s}s")

    def close(self, timeout_s: float = 10.0) -> None:
        remaining = self._producer.flush(timeout_s)
        if remaining:
            CLIENT_LOG.error("%d messages undelivered at producer close", remaining)


CrawlRecord = TypeVar("CrawlRecord", bound=BaseModel)
"""A model with a ``crawl_id`` (an ExtractedItem, a FetchOutcome)."""

StoredRecord = tuple[bytes | None, bytes | None, tuple[str, int, int]]
"""A record read back from a topic: key, value, and where it lies (topic, partition, offset)."""


def read_to_end(settings: Settings, topic: str, timeout_s: float = 30.0) -> Iterator[StoredRecord]:
    """Every record of ``topic`` from its start to the end it had when this started, partition
    by partition, never followed (what `streamcrawl deadletters`, `items` and `log` show). Raises
    TimeoutError when no record arrives for ``timeout_s`` before the end."""
    consumer = Consumer(table_consumer_config(settings))
    try:
        partitions = consumer.list_topics(topic, timeout=timeout_s).topics[topic].partitions
        ends: dict[int, int] = {}
        starts = []
        for partition in sorted(partitions):
            low, high = watermarks(consumer, TopicPartition(topic, partition), timeout_s)
            if high > low:
                ends[partition] = high
                starts.append(TopicPartition(topic, partition, low))
        if not starts:
            return
        consumer.assign(starts)
        yield from _until_the_ends(consumer, topic, ends, timeout_s)
    finally:
        consumer.close()


def crawl_records_to_end(
    settings: Settings, topic: str, schema: type[CrawlRecord], crawl_id: str
) -> Iterator[CrawlRecord]:
    """`read_to_end` of ``topic``, each value decoded as ``schema`` and kept when it is of the
    crawl (what `streamcrawl items` and `log` read); a record that is not one is skipped."""
    for _, value, _ in read_to_end(settings, topic):
        try:
            record = decode(schema, value)
        except DecodeError:
            continue
        if getattr(record, "crawl_id", None) == crawl_id:
            yield record


def _until_the_ends(
    consumer: Consumer, topic: str, ends: dict[int, int], timeout_s: float
) -> Iterator[StoredRecord]:
    waiting = dict(ends)
    deadline = time.monotonic() + timeout_s
    while waiting:
        # A short wait: consume() returns early only on a full batch.
        batch = consumer.consume(1000, 0.1)
        if batch:
            deadline = time.monotonic() + timeout_s
        else:
            # Past its end with nothing to deliver (the last offsets may hold no record).
            for position in consumer.position([TopicPartition(topic, p) for p in waiting]):
                if position.offset >= waiting[position.partition]:
                    waiting.pop(position.partition)
            if waiting and time.monotonic() > deadline:
                raise TimeoutError(
                    f"no record of {topic} arrived for {timeout_s:.0f} s before its end"
                )
        for message in batch:
            error = message.error()
            if error is not None:
                check_consumer_error(error)
                continue
            at = coordinates(message)
            partition, offset = at[1], at[2]
            if partition in waiting and offset < waiting[partition]:
                yield message.key(), message.value(), at
            if offset >= ends.get(partition, 0) - 1:
                waiting.pop(partition, None)
