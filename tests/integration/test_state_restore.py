"""State partitions restored from their changelog, and out-of-order completion, driven in-process.

The loops here run in the test process, one cycle at a time, so the test decides exactly when
work finishes; the broker and the RocksDB stores are real.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from schemas.deadletter import DeadLetter  # noqa: F401  (the loop's dead-letter model)
from streamcrawl.batch import Batch, BatchHandler, Rows
from streamcrawl.handler import BaseHandler, Context, Deferred, Record
from streamcrawl.loop import ServiceLoop
from streamcrawl.recovery import Derived
from streamcrawl.service import build_loop, service_spec
from streamcrawl.settings import Settings
from streamcrawl.spec import Input
from tests.integration.ledger import Entry, LedgerHandler, ledger_spec
from tests.support import Deployment, TopicReader, produce_json

pytestmark = pytest.mark.kafka


def in_process_settings(deployment: Deployment, instance: str) -> Settings:
    base = deployment.settings(instance)
    return base.model_copy(
        update={"loop": base.loop.model_copy(update={"static_membership": False})}
    )


def cycle_until(
    loop: ServiceLoop, condition: Callable[[], bool], timeout_cycles: int = 600
) -> None:
    for _ in range(timeout_cycles):
        loop.cycle()
        if condition():
            return
    raise TimeoutError("condition not reached within the cycle budget")


@pytest.fixture
def loops() -> Iterator[list[ServiceLoop]]:
    """Loops a test opened; closed before the broker goes, even when the test fails."""
    opened: list[ServiceLoop] = []
    yield opened
    for loop in opened:
        loop.close()


def run_ledger(
    deployment: Deployment,
    instance: str,
    outputs_wanted: int,
    out: TopicReader,
    loops: list[ServiceLoop],
) -> ServiceLoop:
    """Run a ledger loop until its partition is restored and `outputs_wanted` outputs exist."""
    settings = in_process_settings(deployment, instance)
    loop = build_loop(
        ledger_spec(settings, ["in"]), LedgerHandler(deployment.topic("out")), settings
    )
    loops.append(loop)
    loop.subscribe()
    cycle_until(loop, lambda: bool(loop.restore_reports) and len(out.poll()) >= outputs_wanted)
    return loop


def close(loop: ServiceLoop, loops: list[ServiceLoop]) -> None:
    loops.remove(loop)
    loop.close()


def changelog_end(deployment: Deployment) -> int:
    consumer = Consumer({"bootstrap.servers": deployment.bootstrap, "group.id": "watermarks"})
    _, high = consumer.get_watermark_offsets(
        TopicPartition(deployment.topic("changelog.ledger"), 0), timeout=10
    )
    consumer.close()
    return int(high)


def accounts_of(loop: ServiceLoop) -> dict[bytes, list[int]]:
    store = loop.store(0)
    assert store is not None
    return {key: json.loads(value) for key, value in store.scan("accounts")}


def expected_accounts(count: int, accounts: int) -> dict[bytes, list[int]]:
    result: dict[bytes, list[int]] = {}
    for i in range(count):
        key = f"acct-{i % accounts}".encode()
        n, total = result.get(key, [0, 0])
        result[key] = [n + 1, total + i]
    return result


def produce_entries(deployment: Deployment, first: int, count: int, accounts: int) -> None:
    produce_json(
        deployment.bootstrap,
        deployment.topic("in"),
        [(f"acct-{i % accounts}", {"id": i, "amount": i}) for i in range(first, first + count)],
    )


def test_deleted_store_is_rebuilt_and_kept_store_replays_only_the_tail(
    kafka_bootstrap: str, tmp_path: Path, loops: list[ServiceLoop]
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=1)
    deployment.create_for_role("ledger", ("in",), ("out",))
    out = TopicReader(deployment.bootstrap, deployment.topic("out"))

    produce_entries(deployment, 0, 200, accounts=40)
    first = run_ledger(deployment, "x", 200, out, loops)
    assert first.restore_reports[0].full and first.restore_reports[0].records_read == 0
    assert accounts_of(first) == expected_accounts(200, 40)
    close(first, loops)
    changelog_after_first = changelog_end(deployment)

    # Another instance moves the partition on: x's kept store is now 40 changelog records behind.
    produce_entries(deployment, 200, 40, accounts=40)
    second = run_ledger(deployment, "y", 240, out, loops)
    close(second, loops)
    changelog_after_second = changelog_end(deployment)
    assert changelog_after_second > changelog_after_first

    kept = run_ledger(deployment, "x", 240, out, loops)
    report = kept.restore_reports[0]
    assert not report.full
    tail = changelog_after_second - changelog_after_first
    assert report.records_read == tail and report.records_applied == tail
    assert accounts_of(kept) == expected_accounts(240, 40)
    close(kept, loops)

    shutil.rmtree(tmp_path / "state" / "x")
    rebuilt = run_ledger(deployment, "x", 240, out, loops)
    report = rebuilt.restore_reports[0]
    assert report.full and report.records_read == changelog_after_second
    assert accounts_of(rebuilt) == expected_accounts(240, 40)
    close(rebuilt, loops)


def test_a_restore_skips_the_changelog_records_of_a_table_no_longer_named(
    kafka_bootstrap: str, tmp_path: Path, loops: list[ServiceLoop]
) -> None:
    """The changelog still holds records of a table an earlier version had (renamed since): a
    rebuild from it skips them instead of failing on a table the store does not have."""
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=1)
    deployment.create_for_role("ledger", ("in",), ("out",))
    out = TopicReader(deployment.bootstrap, deployment.topic("out"))
    produce_entries(deployment, 0, 50, accounts=10)
    first = run_ledger(deployment, "x", 50, out, loops)
    close(first, loops)
    produce_json(
        deployment.bootstrap,
        deployment.topic("changelog.ledger"),
        [("renamed-table\x00acct-1", {"old": True})],
    )
    shutil.rmtree(tmp_path / "state" / "x")
    rebuilt = run_ledger(deployment, "x", 50, out, loops)
    report = rebuilt.restore_reports[0]
    assert report.full and report.records_read == changelog_end(deployment)
    assert report.records_applied == report.records_read - 1
    assert accounts_of(rebuilt) == expected_accounts(50, 10)
    close(rebuilt, loops)


class HeldHandler(BaseHandler):
    """Finishes each record only when the test says so."""

    def __init__(self, output_topic: str) -> None:
        self.output_topic = output_topic
        self.held: dict[int, Deferred] = {}

    def handle(self, record: Record, ctx: Context) -> None:
        deferred = ctx.defer()
        deferred.produce(self.output_topic, record.key, json.dumps(record.offset).encode())
        self.held[record.offset] = deferred


def test_out_of_order_completion_commits_only_the_contiguous_watermark(
    kafka_bootstrap: str, tmp_path: Path, loops: list[ServiceLoop]
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=1)
    deployment.create_for_role("held", ("in",), ("out",))
    settings = in_process_settings(deployment, "h")
    spec = service_spec(settings, "held", (Input(deployment.topic("in"), lambda raw: raw),))
    handler = HeldHandler(deployment.topic("out"))
    loop = build_loop(spec, handler, settings)
    loops.append(loop)
    loop.subscribe()
    produce_json(deployment.bootstrap, deployment.topic("in"), [("k", i) for i in range(5)])
    cycle_until(loop, lambda: len(handler.held) == 5)

    checker = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": spec.group_id})

    def committed() -> int:
        [tp] = checker.committed([TopicPartition(deployment.topic("in"), 0)], timeout=10)
        return tp.offset

    def committed_reaches(offset: int) -> None:
        # A stateless service commits asynchronously: cycle until the broker shows the offset.
        cycle_until(loop, lambda: committed() == offset, timeout_cycles=200)

    for offset in (1, 2, 4):
        handler.held[offset].finish()
    for _ in range(5):
        loop.cycle()
    assert committed() < 0  # offset 0 still running: nothing may be committed
    handler.held[0].finish()
    committed_reaches(3)  # 0..2 done, 3 running, 4 done but above the gap
    for _ in range(5):
        loop.cycle()
    assert committed() == 3
    handler.held[3].finish()
    committed_reaches(5)
    out = TopicReader(deployment.bootstrap, deployment.topic("out"))
    out.read_until(lambda ms: len(ms) == 5, 30, "five outputs")
    assert sorted(out.values()) == [0, 1, 2, 3, 4]
    checker.close()


class BatchLedger(BatchHandler):
    """The ledger's totals, kept by a batch handler: a negative amount is rejected, an amount of
    13 raises, and each batch's outputs go out as rows."""

    def __init__(self, output_topic: str) -> None:
        self.output_topic = output_topic
        self.batch_sizes: list[int] = []

    def handle_batch(self, batch: Batch) -> None:
        self.batch_sizes.append(len(batch.records))
        keys: list[str | None] = []
        ids: list[bytes] = []
        for record in batch.records:
            entry: Entry = record.value
            if entry.amount < 0:
                batch.reject(record, "negative amount")
                continue
            try:
                if entry.amount == 13:
                    raise ValueError("unlucky amount")
            except ValueError as error:
                batch.failed(record, error)
                continue
            accounts = batch.table("accounts", record)
            account = (record.key or "").encode()
            raw = accounts.get(account)
            count, total = json.loads(raw) if raw else (0, 0)
            accounts.put(account, json.dumps([count + 1, total + entry.amount]).encode())
            keys.append(record.key)
            ids.append(json.dumps(entry.id).encode())
        batch.produce_rows(self.output_topic, Rows(keys, ids))


def test_a_batch_handler_gets_a_cycle_at_once_and_the_kernel_dead_letters_its_rejects(
    kafka_bootstrap: str, tmp_path: Path, loops: list[ServiceLoop]
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=1)
    deployment.create_for_role("ledger", ("in",), ("out",))
    out = TopicReader(deployment.bootstrap, deployment.topic("out"))
    amounts = [5, -1, 13, *range(20, 60)]
    produce_json(
        deployment.bootstrap,
        deployment.topic("in"),
        [(f"acct-{i % 4}", {"id": i, "amount": amount}) for i, amount in enumerate(amounts)],
    )
    expected: dict[bytes, list[int]] = {}
    for i, amount in enumerate(amounts):
        if amount >= 0 and amount != 13:
            n, total = expected.get(f"acct-{i % 4}".encode(), [0, 0])
            expected[f"acct-{i % 4}".encode()] = [n + 1, total + amount]

    def run(instance: str) -> tuple[ServiceLoop, BatchLedger]:
        settings = in_process_settings(deployment, instance)
        handler = BatchLedger(deployment.topic("out"))
        loop = build_loop(ledger_spec(settings, ["in"]), handler, settings)
        loops.append(loop)
        loop.subscribe()
        cycle_until(loop, lambda: bool(loop.restore_reports) and len(out.poll()) >= 41)
        return loop, handler

    loop, handler = run("x")
    assert accounts_of(loop) == expected
    assert sum(handler.batch_sizes) == len(amounts) and len(handler.batch_sizes) < len(amounts)
    assert sorted(out.values()) == [i for i, a in enumerate(amounts) if a >= 0 and a != 13]
    letters = TopicReader(deployment.bootstrap, deployment.topic("deadletter"))
    letters.read_until(lambda ms: len(ms) == 2, 30, "two dead letters")
    by_offset = {letter["offset"]: letter for letter in letters.values()}
    assert by_offset[1]["error"] == "negative amount"
    assert by_offset[2]["error"] == "handler error: ValueError: unlucky amount"
    for offset in (1, 2):  # the raw message as payload, as for a per-record handler
        assert (
            base64.urlsafe_b64decode(by_offset[offset]["payload"])
            == json.dumps({"id": offset, "amount": amounts[offset]}).encode()
        )
    close(loop, loops)

    shutil.rmtree(tmp_path / "state" / "x")
    rebuilt, _ = run("x")
    assert rebuilt.restore_reports[0].full and accounts_of(rebuilt) == expected
    close(rebuilt, loops)


class RankedLedger(BatchHandler):
    """The ledger's totals plus a derived table, `ranks`: one key per account, total first, so
    accounts can be listed by total. `ranks` is rebuilt on restore, never in the changelog."""

    derived_tables = frozenset({"ranks"})

    def __init__(self, output_topic: str) -> None:
        self.output_topic = output_topic

    @staticmethod
    def derive(table: str, key: bytes, old: bytes | None, new: bytes | None) -> Derived:
        if table != "accounts":
            return []
        writes: Derived = []
        if old is not None:
            writes.append(("ranks", b"%08d:%s" % (json.loads(old)[1], key), None))
        if new is not None:
            writes.append(("ranks", b"%08d:%s" % (json.loads(new)[1], key), b""))
        return writes

    def handle_batch(self, batch: Batch) -> None:
        keys: list[str | None] = []
        ids: list[bytes] = []
        for record in batch.records:
            entry: Entry = record.value
            account = (record.key or "").encode()
            accounts = batch.table("accounts", record)
            ranks = batch.table("ranks", record)
            raw = accounts.get(account)
            count, total = json.loads(raw) if raw else (0, 0)
            if raw:
                ranks.delete(b"%08d:%s" % (total, account))
            count, total = count + 1, total + entry.amount
            accounts.put(account, json.dumps([count, total]).encode())
            ranks.put(b"%08d:%s" % (total, account), b"")
            keys.append(record.key)
            ids.append(json.dumps(entry.id).encode())
        batch.produce_rows(self.output_topic, Rows(keys, ids))


def test_a_derived_table_has_no_changelog_and_is_rebuilt_in_full_and_tail_restores(
    kafka_bootstrap: str, tmp_path: Path, loops: list[ServiceLoop]
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=1)
    deployment.create_for_role("ledger", ("in",), ("out",))
    out = TopicReader(deployment.bootstrap, deployment.topic("out"))

    def run(instance: str, outputs: int) -> ServiceLoop:
        settings = in_process_settings(deployment, instance)
        spec = ledger_spec(settings, ["in"])
        spec = replace(spec, tables=("accounts", "ranks"))
        loop = build_loop(spec, RankedLedger(deployment.topic("out")), settings)
        loops.append(loop)
        loop.subscribe()
        cycle_until(loop, lambda: bool(loop.restore_reports) and len(out.poll()) >= outputs)
        return loop

    def ranks(loop: ServiceLoop) -> list[bytes]:
        store = loop.store(0)
        assert store is not None
        return [key for key, _ in store.scan("ranks")]

    def expected(count: int) -> list[bytes]:
        return sorted(
            b"%08d:%s" % (total, key) for key, (_, total) in expected_accounts(count, 5).items()
        )

    produce_entries(deployment, 0, 30, accounts=5)
    first = run("x", 30)
    assert ranks(first) == expected(30)
    close(first, loops)
    produce_entries(deployment, 30, 30, accounts=5)  # every account's total moves on
    second = run("y", 60)
    assert second.restore_reports[0].full and ranks(second) == expected(60)
    close(second, loops)
    changelog = TopicReader(deployment.bootstrap, deployment.topic("changelog.ledger"))
    changelog.read_until(lambda ms: len(ms) >= 10, 30, "changelog records")
    assert {m.key().split(b"\x00")[0] for m in changelog.messages} == {b"accounts"}

    kept = run("x", 60)  # x's store is 30 entries behind: a tail replay moves its ranks
    assert not kept.restore_reports[0].full
    assert accounts_of(kept) == expected_accounts(60, 5) and ranks(kept) == expected(60)
    close(kept, loops)
