"""The loop's rejoin watchdog: partitions lost and never given back end the process, so that a
supervisor starts a fresh consumer (librdkafka can go silent after a session timeout with
static membership). No broker: the consumer is never polled, only handed to the callbacks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from streamcrawl.exceptions import FatalKafkaError
from streamcrawl.loop import ServiceLoop
from streamcrawl.service import build_loop
from streamcrawl.settings import Settings
from tests.integration.ledger import LedgerHandler, ledger_spec


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[ServiceLoop]:
    settings = Settings(
        kafka={"bootstrap_servers": "127.0.0.1:9", "topic_prefix": "unit."},
        state={"directory": tmp_path / "state"},
        loop={"rejoin_timeout_s": 30},
        instance_id="unit",
    )
    spec = ledger_spec(settings, ["in"])
    built = build_loop(spec, LedgerHandler("unit.out"), settings)
    yield built
    built.close()


def consumer_of(loop: ServiceLoop) -> Consumer:
    return loop._consumer  # the callbacks take it, as librdkafka hands it to them


def test_lost_partitions_never_given_back_stop_the_loop(loop: ServiceLoop) -> None:
    lost = [TopicPartition("unit.in", 0)]
    loop._on_assign(consumer_of(loop), lost)
    loop._on_lost(consumer_of(loop), lost)
    loop._check_rejoined()  # within the timeout: nothing yet
    assert loop._lost_at is not None
    loop._lost_at = time.monotonic() - 31
    with pytest.raises(FatalKafkaError, match="never rejoined"):
        loop._check_rejoined()


def test_a_rejoin_even_with_nothing_assigned_clears_the_watchdog(loop: ServiceLoop) -> None:
    lost = [TopicPartition("unit.in", 0)]
    loop._on_assign(consumer_of(loop), lost)
    loop._on_lost(consumer_of(loop), lost)
    loop._lost_at = time.monotonic() - 31
    loop._on_assign(consumer_of(loop), [])  # cooperative-sticky rejoins call on_assign([])
    loop._check_rejoined()
    assert loop.assignment() == []
