"""The test broker works end to end, and a `LocalBroker` keeps its data across a restart."""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamcrawl.broker import LocalBroker, default_libs_dir, free_ports

logger = logging.getLogger(__name__)

pytestmark = pytest.mark.kafka

needs_jvm = pytest.mark.skipif(
    shutil.which("java") is None or shutil.which("mvn") is None,
    reason="a LocalBroker needs java and mvn on PATH",
)


def _produce(bootstrap: str, topic: str, key: bytes, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap}, logger=logger)
    producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0, "message not delivered within 30 s"


def _consume_one(bootstrap: str, topic: str, group: str, protocol: str = "classic") -> Message:
    """The first message on `topic` for a new consumer group, within a 30 s deadline."""
    config: dict[str, str | int | float | bool] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "classic":
        config["session.timeout.ms"] = 6000  # the consumer protocol sets it on the broker
    consumer = Consumer(config, logger=logger)
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return message
            assert message is None or message.error() is None, message.error()
        raise AssertionError(f"no message on {topic} within 30 s")
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_produce_and_consume(
    kafka_bootstrap: str, topic_factory: Callable[..., str], group_id: str, protocol: str
) -> None:
    """A message produced to a fresh 3-partition topic reaches a new consumer group."""
    topic = topic_factory(partitions=3)
    _produce(kafka_bootstrap, topic, b"example.com", b"https://example.com/")

    message = _consume_one(kafka_bootstrap, topic, group_id, protocol)

    assert message.topic() == topic
    assert message.key() == b"example.com"
    assert message.value() == b"https://example.com/"


@needs_jvm
def test_local_broker_keeps_topics_across_restart(tmp_path: Path) -> None:
    """Stop and start a LocalBroker on its own data dir: the topic and its message survive."""
    port, controller_port = free_ports(2)
    broker = LocalBroker(tmp_path / "kafka", port, controller_port, default_libs_dir())
    topic = f"test-restart-{uuid.uuid4().hex}"
    try:
        bootstrap = broker.start()
        first_start_s = broker.last_start_s
        assert broker.ignored_settings == []
        admin = AdminClient({"bootstrap.servers": bootstrap}, logger=logger)
        new_topic = NewTopic(topic, num_partitions=2, replication_factor=1)
        admin.create_topics([new_topic])[topic].result(timeout=30)
        _produce(bootstrap, topic, b"k", b"before restart")

        broker.stop()
        assert not broker.status().running
        assert not broker.pid_path.exists()
        broker.start()
        restart_s = broker.last_start_s
        assert broker.status().running

        metadata = AdminClient({"bootstrap.servers": bootstrap}, logger=logger).list_topics(
            timeout=10
        )
        assert topic in metadata.topics
        assert len(metadata.topics[topic].partitions) == 2
        message = _consume_one(bootstrap, topic, f"test-group-{uuid.uuid4().hex}")
        assert message.value() == b"before restart"
    finally:
        broker.stop()
    assert first_start_s is not None and restart_s is not None
    print(f"\nLocalBroker start: first {first_start_s:.1f} s, restart {restart_s:.1f} s")
