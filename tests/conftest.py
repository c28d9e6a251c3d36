"""Session fixtures: one real Kafka broker per test session, uuid-named topics and groups.

The broker comes from `broker_source` (env, Docker, or a local Apache Kafka JVM); its output goes
to files, never to the terminal.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Protocol

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import settings

from tests.broker_source import session_broker

_TOPIC_READY_S = 30.0

# A loaded 2-core CI machine makes per-example deadlines flaky; CI sets HYPOTHESIS_PROFILE=ci.
settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

logger = logging.getLogger(__name__)


class TopicFactory(Protocol):
    """Creates a uuid-named topic and returns its name once every partition has a leader."""

    def __call__(self, partitions: int = 1, config: Mapping[str, str] | None = None) -> str: ...


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The bootstrap address of the session's broker, started once and stopped at the end."""
    with session_broker(tmp_path_factory.mktemp("kafka")) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def kafka_admin(kafka_bootstrap: str) -> AdminClient:
    """An AdminClient on the session broker; librdkafka's log lines go to `logging`."""
    return AdminClient({"bootstrap.servers": kafka_bootstrap}, logger=logger)


@pytest.fixture
def topic_factory(kafka_admin: AdminClient) -> Iterator[TopicFactory]:
    """Make topics for one test; they are deleted afterwards, best effort."""
    created: list[str] = []

    def create(partitions: int = 1, config: Mapping[str, str] | None = None) -> str:
        name = f"test-{uuid.uuid4().hex}"
        topic = NewTopic(
            name, num_partitions=partitions, replication_factor=1, config=dict(config or {})
        )
        kafka_admin.create_topics([topic])[name].result(timeout=_TOPIC_READY_S)
        created.append(name)
        _wait_for_topic(kafka_admin, name, partitions)
        return name

    yield create
    _delete_topics(kafka_admin, created)


@pytest.fixture
def group_id() -> str:
    """A consumer group id no other test uses."""
    return f"test-group-{uuid.uuid4().hex}"


def _wait_for_topic(admin: AdminClient, name: str, partitions: int) -> None:
    """Block until metadata shows `name` with `partitions` partitions that all have a leader."""
    deadline = time.monotonic() + _TOPIC_READY_S
    while True:
        topic = admin.list_topics(topic=name, timeout=5).topics.get(name)
        if (
            topic is not None
            and topic.error is None
            and len(topic.partitions) == partitions
            and all(partition.leader >= 0 for partition in topic.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} not ready after {_TOPIC_READY_S:.0f} s")
        time.sleep(0.05)  # metadata propagates within a few ms; the deadline bounds the wait


def _delete_topics(admin: AdminClient, names: list[str]) -> None:
    """Delete test topics; a failure is logged, not raised, since the test itself is done."""
    if not names:
        return
    for name, future in admin.delete_topics(names).items():
        try:
            future.result(timeout=15)
        except (KafkaException, TimeoutError) as error:
            logger.warning("could not delete test topic %s: %s", name, error)
