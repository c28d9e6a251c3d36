"""Creating the registry's topics and reporting drift from it (`streamcrawl topics create|check`).

Creation is idempotent: existing topics are left alone (their drift is what `check` reports).
Drift is a missing topic, a partition count other than the registry's, or a topic config that
differs from the registry's value (cleanup policy, retention, max.message.bytes, compression).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
)

from schemas.registry import ALL_TOPICS
from schemas.topic import TopicSpec
from streamcrawl.exceptions import TopicMissingError
from streamcrawl.kafka import admin_config
from streamcrawl.settings import Settings

log = logging.getLogger(__name__)

METADATA_TIMEOUT_S = 30.0


def topic_name(settings: Settings, spec: TopicSpec) -> str:
    return spec.name(settings.kafka.topic_prefix)


def admin_client(settings: Settings) -> AdminClient:
    return AdminClient(admin_config(settings))


def partition_counts(
    settings: Settings, names: list[str], timeout_s: float = METADATA_TIMEOUT_S
) -> dict[str, int]:
    """How many partitions each topic has; TopicMissingError naming the first that is missing."""
    try:
        metadata = admin_client(settings).list_topics(timeout=timeout_s)
    except KafkaException as error:
        raise TopicMissingError(f"could not read the topics from the broker: {error}") from error
    counts = {}
    for name in names:
        topic = metadata.topics.get(name)
        if topic is None or topic.error is not None or not topic.partitions:
            missing = f"topic {name} does not exist (run `streamcrawl topics create`)"
            raise TopicMissingError(missing)
        counts[name] = len(topic.partitions)
    return counts


@dataclass
class TopicReport:
    missing: list[str] = field(default_factory=list)
    partition_drift: dict[str, tuple[int, int]] = field(default_factory=dict)
    """topic -> (expected, actual)"""
    config_drift: dict[str, dict[str, tuple[str, str | None]]] = field(default_factory=dict)
    """topic -> config name -> (expected, actual)"""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.partition_drift or self.config_drift)

    def lines(self) -> list[str]:
        out = [f"missing: {name}" for name in self.missing]
        out += [
            f"partitions: {name} has {actual}, registry says {expected}"
            for name, (expected, actual) in self.partition_drift.items()
        ]
        for name, configs in self.config_drift.items():
            out += [
                f"config: {name} {key}={actual!r}, registry says {expected!r}"
                for key, (expected, actual) in configs.items()
            ]
        return out


def create_topics(
    settings: Settings,
    specs: tuple[TopicSpec, ...] = ALL_TOPICS,
    admin: AdminClient | None = None,
    timeout_s: float = 30.0,
) -> list[str]:
    """Create every missing topic; returns the names created."""
    admin = admin or admin_client(settings)
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    wanted = [
        NewTopic(
            topic_name(settings, spec),
            num_partitions=spec.partition_count(settings.kafka.partitions),
            replication_factor=settings.kafka.replication_factor,
            config=spec.broker_config(),
        )
        for spec in specs
        if topic_name(settings, spec) not in existing
    ]
    created: list[str] = []
    if not wanted:
        return created
    for name, future in admin.create_topics(wanted, request_timeout=timeout_s).items():
        try:
            future.result(timeout=timeout_s)
            created.append(name)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    wait_for_leaders(admin, created, timeout_s)
    log.info("created topics: %s", ", ".join(created) or "none")
    return created


def wait_for_leaders(admin: AdminClient, names: list[str], timeout_s: float) -> None:
    """Block until every partition of the named topics has a leader (new topics need a moment)."""
    deadline = time.monotonic() + timeout_s
    pending = set(names)
    while pending:
        metadata = admin.list_topics(timeout=timeout_s).topics
        for name in list(pending):
            topic = metadata.get(name)
            if (
                topic is not None
                and topic.error is None
                and topic.partitions
                and all(p.leader >= 0 for p in topic.partitions.values())
            ):
                pending.discard(name)
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"topics without leaders after {timeout_s}s: {sorted(pending)}")
        if pending:
            time.sleep(0.05)


def check_topics(
    settings: Settings,
    specs: tuple[TopicSpec, ...] = ALL_TOPICS,
    admin: AdminClient | None = None,
    timeout_s: float = 30.0,
) -> TopicReport:
    admin = admin or admin_client(settings)
    metadata = admin.list_topics(timeout=timeout_s).topics
    report = TopicReport()
    present: list[TopicSpec] = []
    for spec in specs:
        name = topic_name(settings, spec)
        if name not in metadata:
            report.missing.append(name)
            continue
        present.append(spec)
        expected = spec.partition_count(settings.kafka.partitions)
        actual = len(metadata[name].partitions)
        if actual != expected:
            report.partition_drift[name] = (expected, actual)
    if not present:
        return report
    resources = [ConfigResource("topic", topic_name(settings, spec)) for spec in present]
    results = admin.describe_configs(resources, request_timeout=timeout_s)
    by_name = {resource.name: future for resource, future in results.items()}
    for spec in present:
        name = topic_name(settings, spec)
        entries = by_name[name].result(timeout=timeout_s)
        drift = {}
        for key, expected_value in spec.broker_config().items():
            entry = entries.get(key)
            actual_value = entry.value if entry is not None else None
            if actual_value != expected_value:
                drift[key] = (expected_value, actual_value)
        if drift:
            report.config_drift[name] = drift
    return report
