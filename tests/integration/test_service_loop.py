"""The kernel's service loop against a real broker, with the ledger service as separate processes.

Covers: a message through the loop; poison messages dead-lettered with coordinates; a crash at each
named crash point losing nothing (and, thanks to the changelog source filter, counting nothing
twice); an output the broker refuses stopping the service before the commit; SIGTERM draining
and committing; co-partitioned state moving between instances; an instance fenced by another with
its id exiting with its error as one JSON line, in a log of nothing but JSON lines.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Message
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from schemas import members
from schemas.deadletter import DeadLetter
from schemas.serde import decode
from streamcrawl.crashpoints import CRASH_EXIT_CODE, POINTS
from tests.support import Deployment, ServiceProcess, TopicReader, produce_json

pytestmark = pytest.mark.kafka

LEDGER = "tests.integration.ledger"


@pytest.fixture
def deployment(kafka_bootstrap: str, tmp_path: Path) -> Deployment:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=1)
    deployment.create_for_role("ledger", ("in",), ("out",))
    return deployment


def ledger(
    deployment: Deployment, started: list[ServiceProcess], instance: str, **env: str
) -> ServiceProcess:
    process = ServiceProcess(
        LEDGER,
        deployment.env(instance, **env),
        deployment.root / "logs" / f"{instance}.log",
    )
    started.append(process.start())
    return process


def entries(first: int, count: int, accounts: int = 3) -> list[tuple[str, dict[str, int]]]:
    return [(f"acct-{i % accounts}", {"id": i, "amount": i}) for i in range(first, first + count)]


def ids_seen(messages: list[Message]) -> set[int]:
    return {json.loads(m.value())["id"] for m in messages}


def final_counts(messages: list[Message]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for message in messages:
        key = message.key().decode()
        counts[key] = max(counts.get(key, 0), json.loads(message.value())["count"])
    return counts


def test_a_message_goes_through_the_loop(
    deployment: Deployment, started: list[ServiceProcess]
) -> None:
    ledger(deployment, started, "a")
    produce_json(deployment.bootstrap, deployment.topic("in"), [("acct-1", {"id": 1, "amount": 5})])
    out = TopicReader(deployment.bootstrap, deployment.topic("out"))
    messages = out.read_until(lambda ms: len(ms) >= 1, 60, "one output")
    assert json.loads(messages[0].value()) == {"id": 1, "count": 1, "sum": 5, "partition": 0}
    assert messages[0].key() == b"acct-1"


def test_poison_message_is_dead_lettered_and_the_next_one_processed(
    deployment: Deployment, started: list[ServiceProcess]
) -> None:
    ledger(deployment, started, "a")
    topic = deployment.topic("in")
    produce_json(deployment.bootstrap, topic, [("acct-1", {"id": 1, "amount": 1})])
    produce_json(deployment.bootstrap, topic, [("acct-1", b"{not json")], raw=True)
    produce_json(deployment.bootstrap, topic, [("acct-1", {"id": 2, "amount": "many"})])
    produce_json(deployment.bootstrap, topic, [("acct-1", {"id": 3, "amount": 2})])
    out = TopicReader(deployment.bootstrap, deployment.topic("out"))
    out.read_until(lambda ms: ids_seen(ms) >= {1, 3}, 60, "both good entries")
    assert ids_seen(out.messages) == {1, 3}
    dead = TopicReader(deployment.bootstrap, deployment.topic("deadletter"))
    dead.read_until(lambda ms: len(ms) >= 2, 30, "two dead letters")
    letters = [decode(DeadLetter, m.value()) for m in dead.messages]
    assert [(d.topic, d.partition, d.offset) for d in letters] == [(topic, 0, 1), (topic, 0, 2)]
    assert letters[0].payload == b"{not json" and "JSON" in letters[0].error
    assert "amount" in letters[1].error
    assert all(
        d.stage == "ledger" and m.key() == b"acct-1"
        for d, m in zip(letters, dead.messages, strict=True)
    )


@pytest.mark.parametrize("point", POINTS)
def test_crash_at_each_point_loses_nothing_and_counts_once(
    deployment: Deployment, started: list[ServiceProcess], point: str
) -> None:
    first = ledger(
        deployment,
        started,
        "a",
        STREAMCRAWL_CRASH_AT=f"{point}:3",
        STREAMCRAWL_LOOP__BATCH_SIZE="10",
    )
    produce_json(deployment.bootstrap, deployment.topic("in"), entries(0, 60))
    assert first.wait(60) == CRASH_EXIT_CODE, first.log_tail()
    ledger(deployment, started, "a")
    produce_json(deployment.bootstrap, deployment.topic("in"), entries(60, 30))
    out = TopicReader(deployment.bootstrap, deployment.topic("out"))
    out.read_until(lambda ms: ids_seen(ms) == set(range(90)), 90, "every entry's output")
    expected = Counter(key for key, _ in entries(0, 90))
    assert final_counts(out.messages) == dict(expected)


def test_sigterm_drains_and_commits_so_nothing_is_reprocessed(
    deployment: Deployment, started: list[ServiceProcess]
) -> None:
    first = ledger(deployment, started, "a")
    produce_json(deployment.bootstrap, deployment.topic("in"), entries(0, 50))
    out = TopicReader(deployment.bootstrap, deployment.topic("out"))
    out.read_until(lambda ms: ids_seen(ms) == set(range(50)), 60, "first outputs")
    first.terminate()
    assert first.wait(60) == 0, first.log_tail()
    ledger(deployment, started, "a")
    produce_json(deployment.bootstrap, deployment.topic("in"), entries(50, 10))
    out.read_until(lambda ms: ids_seen(ms) == set(range(60)), 60, "second outputs")
    dead = TopicReader(deployment.bootstrap, deployment.topic("members"))
    dead.read_until(lambda ms: any(m.value() is None for m in ms), 30, "a member tombstone")
    # Nothing reprocessed: exactly one output per entry.
    assert len(out.messages) == 60
    assert final_counts(out.messages) == dict(Counter(key for key, _ in entries(0, 60)))


def test_an_output_the_broker_refuses_stops_the_service_before_its_input_is_committed(
    deployment: Deployment, started: list[ServiceProcess]
) -> None:
    out_topic = deployment.topic("out")
    admin = AdminClient({"bootstrap.servers": deployment.bootstrap})

    def set_max_message_bytes(limit: int) -> None:
        resource = ConfigResource(
            ResourceType.TOPIC,
            out_topic,
            incremental_configs=[
                ConfigEntry(
                    "max.message.bytes",
                    str(limit),
                    incremental_operation=AlterConfigOpType.SET,
                )
            ],
        )
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)

    set_max_message_bytes(16)  # smaller than any record batch: every send fails permanently
    first = ledger(deployment, started, "a")
    produce_json(deployment.bootstrap, deployment.topic("in"), entries(0, 5))
    assert first.wait(90) != 0, first.log_tail()
    assert "not delivered" in first.log_tail(200)
    set_max_message_bytes(1_048_576)
    ledger(deployment, started, "a")
    out = TopicReader(deployment.bootstrap, out_topic)
    out.read_until(lambda ms: ids_seen(ms) == set(range(5)), 90, "every entry after the fix")
    assert final_counts(out.messages) == dict(Counter(key for key, _ in entries(0, 5)))


def test_co_partitioned_state_moves_with_its_partitions(
    kafka_bootstrap: str, tmp_path: Path, started: list[ServiceProcess]
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=6)
    deployment.create_for_role("ledger", ("in", "in2"), ("out",))
    env = {"LEDGER_INPUTS": "in,in2"}
    out = TopicReader(deployment.bootstrap, deployment.topic("out"))
    sent: list[tuple[str, dict[str, int]]] = []

    def send(first: int, count: int) -> None:
        batch = entries(first, count, accounts=24)
        half = count // 2
        produce_json(deployment.bootstrap, deployment.topic("in"), batch[:half])
        produce_json(deployment.bootstrap, deployment.topic("in2"), batch[half:])
        sent.extend(batch)
        wanted = {value["id"] for _, value in sent}
        out.read_until(lambda ms: ids_seen(ms) >= wanted, 120, f"outputs up to {first + count}")

    a = ledger(deployment, started, "a", **env)
    send(0, 120)
    ledger(deployment, started, "b", **env)
    ledger(deployment, started, "c", **env)
    member_reader = TopicReader(deployment.bootstrap, deployment.topic("members"))
    member_reader.read_until(
        lambda ms: _instances_holding(ms) >= {"b", "c"}, 90, "b and c assigned"
    )
    send(120, 120)
    a.kill()
    send(240, 120)
    ledger(deployment, started, "d", **env)
    member_reader.read_until(lambda ms: "d" in _instances_holding(ms), 90, "d assigned")
    send(360, 120)
    assert final_counts(out.messages) == dict(Counter(key for key, _ in sent))
    for message in member_reader.messages:
        if message.value() is None:
            continue
        member = decode(members.Member, message.value())
        by_topic: dict[str, set[int]] = {}
        for held in member.partitions:
            topic, _, partition = held.rpartition(":")
            by_topic.setdefault(topic, set()).add(int(partition))
        numbers = list(by_topic.values())
        assert all(n == numbers[0] for n in numbers), member


def _instances_holding(messages: list[Message]) -> set[str]:
    latest: dict[str, members.Member | None] = {}
    for message in messages:
        key = message.key().decode()
        latest[key] = decode(members.Member, message.value()) if message.value() else None
    return {m.instance for m in latest.values() if m is not None and m.partitions}


def test_a_fenced_instance_exits_with_its_error_in_a_log_of_json_lines(
    deployment: Deployment, started: list[ServiceProcess]
) -> None:
    first = ledger(deployment, started, "a")
    produce_json(deployment.bootstrap, deployment.topic("in"), entries(0, 1))
    out = TopicReader(deployment.bootstrap, deployment.topic("out"))
    out.read_until(lambda ms: len(ms) >= 1, 60, "the first instance's output")
    # The same instance id, as a second copy of a StatefulSet pod would have: the broker fences
    # the first static member (its own state directory, so it gets as far as joining).
    namesake = ServiceProcess(
        LEDGER,
        deployment.env("a", STREAMCRAWL_STATE__DIRECTORY=str(deployment.root / "state-again")),
        deployment.root / "logs" / "a-again.log",
    )
    started.append(namesake.start())
    assert first.wait(90) == 1, first.log_tail()
    lines = first.log_path.read_text().splitlines()
    entries_logged = [json.loads(line) for line in lines]  # librdkafka's own lines too
    [stop] = [e for e in entries_logged if e["msg"] == "ledger stopped by an error"]
    assert stop["level"] == "error"
    assert "FatalKafkaError" in stop["exc"] and "fenced" in stop["exc"].lower()
