"""`streamcrawl topics create|check`, `status`, `pause|resume|cancel`, the side server, tables and
the partitioner, against the real broker."""

from __future__ import annotations

import base64
import json
import random
import string
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)

from schemas import crawls, members, progress, seeds
from schemas.base import now_millis
from schemas.deadletter import dead_letter
from schemas.outcomes import FetchOutcome
from schemas.partitioning import partition_for_key
from schemas.registry import ALL_TOPICS, producer_limits
from schemas.seeds import CrawlCommand, CrawlRequest
from schemas.serde import decode, encode
from streamcrawl.cli import main
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.kafka import table_consumer_config
from streamcrawl.settings import Settings
from streamcrawl.table import TopicTable
from streamcrawl.up_cli import refuse_a_running_stack
from tests.support import REPO, Deployment, ServiceProcess, TopicReader, produce_json, wait_for

pytestmark = pytest.mark.kafka


@pytest.fixture
def deployment(kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=3)
    for name, value in deployment.env("cli").items():
        if name.startswith("STREAMCRAWL_"):
            monkeypatch.setenv(name, value)
    return deployment


def crawl_state(
    request: CrawlRequest, status: crawls.CrawlStatus = "active", created_at: int = 1
) -> crawls.CrawlState:
    """The state a crawl's owner writes to `crawls` (the tests play the frontier)."""
    return crawls.CrawlState(
        crawl_id=request.crawl_id,
        request=request,
        status=status,
        created_at=created_at,
        updated_at=created_at + 1,
        owner_partition=0,
    )


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_topics_create_is_idempotent_and_check_reports_drift(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_cli(capsys, "topics", "check")
    assert code == 1 and f"missing: {deployment.topic('urls')}" in out

    code, out = run_cli(capsys, "topics", "create")
    assert code == 0 and f"created {len(ALL_TOPICS)} topics" in out
    code, out = run_cli(capsys, "topics", "create")
    assert code == 0 and "created 0 topics" in out
    code, out = run_cli(capsys, "topics", "check")
    assert code == 0 and "topics match the registry" in out

    admin = AdminClient({"bootstrap.servers": deployment.bootstrap})
    admin.create_partitions([NewPartitions(deployment.topic("fetch"), 5)])[
        deployment.topic("fetch")
    ].result(30)
    resource = ConfigResource(
        "topic",
        deployment.topic("pages"),
        incremental_configs=[
            ConfigEntry("max.message.bytes", "1048576", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    wait_for(lambda: main(["topics", "check"]) == 1, 30, "drift visible to topics check")
    capsys.readouterr()
    code, out = run_cli(capsys, "topics", "check")
    assert code == 1
    assert f"partitions: {deployment.topic('fetch')} has 5, registry says 3" in out
    assert f"config: {deployment.topic('pages')} max.message.bytes='1048576'" in out


def test_status_needs_broker_topics_and_a_ready_instance_of_every_running_role(
    deployment: Deployment, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out = run_cli(capsys, "status", "--json")
    assert code == 1 and json.loads(out)["broker"] is True and not json.loads(out)["topics_ok"]

    assert main(["topics", "create"]) == 0
    deployment.create_for_role("ledger", ("in",), ("out",))
    capsys.readouterr()
    code, out = run_cli(capsys, "status", "--json")
    assert code == 0, out
    assert json.loads(out)["roles"] == {}

    ledger = ServiceProcess(
        "tests.integration.ledger",
        deployment.env("status-a"),
        deployment.root / "ledger.log",
    ).start()
    try:
        readers = TopicReader(deployment.bootstrap, deployment.topic("members"))
        readers.read_until(
            lambda ms: any(m.value() and decode(members.Member, m.value()).ready for m in ms),
            60,
            "a ready ledger member",
        )
        code, out = run_cli(capsys, "status", "--json")
        report = json.loads(out)
        assert code == 0, out
        [instance] = report["roles"]["ledger"]["instances"]
        assert instance["ready"] and instance["instance"] == "status-a"

        base = f"http://{instance['http']}"
        metrics = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
        for name in (
            "streamcrawl_ledger_messages_in_total",
            "streamcrawl_ledger_consumer_lag_messages",
            "streamcrawl_ledger_dead_letters_total",
            "streamcrawl_ledger_processing_seconds",
            "streamcrawl_ledger_ready 1.0",
        ):
            assert name in metrics, name
        assert urllib.request.urlopen(f"{base}/healthz", timeout=10).status == 200
        assert urllib.request.urlopen(f"{base}/readyz", timeout=10).status == 200

        ledger.terminate()
        assert ledger.wait(60) == 0
        wait_for(lambda: main(["status"]) == 0, 30, "status after a clean stop")
        capsys.readouterr()
        code, out = run_cli(capsys, "status", "--json")
        assert json.loads(out)["roles"] == {}  # the stopped instance left with a tombstone
    finally:
        ledger.kill()


def test_pause_resume_and_cancel_reach_the_owner_and_wait_for_its_status(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    """The test plays the crawl's owner: it writes `crawls` as a frontier would, and reads the
    commands the CLI sends to `seeds`."""
    assert main(["topics", "create"]) == 0
    producer = Producer({"bootstrap.servers": deployment.bootstrap})
    sent = TopicReader(deployment.bootstrap, deployment.topic("seeds"))

    def owner_sets(status: crawls.CrawlStatus) -> None:
        request = CrawlRequest(seeds=["https://example.com/"], crawl_id="c1")
        state = crawl_state(request, status)
        producer.produce(deployment.topic("crawls"), encode(state), crawls.key("c1"))
        assert producer.flush(30) == 0

    def commands() -> list[tuple[bytes | None, object]]:
        return [(m.key(), decode(seeds.SEED_MESSAGE, m.value())) for m in sent.poll()]

    try:
        capsys.readouterr()
        code, out = run_cli(capsys, "pause", "c1")
        assert code == 1 and "no crawl c1" in out
        owner_sets("active")
        code, out = run_cli(capsys, "resume", "c1")
        assert code == 0 and "crawl c1 is already active" in out
        code, out = run_cli(capsys, "pause", "c1", "--no-wait")
        assert code == 0 and "pause sent to crawl c1" in out
        sent.read_until(lambda messages: len(messages) == 1, 30, "the pause command")
        assert commands() == [(b"c1", CrawlCommand(crawl_id="c1", action="pause"))]

        # Without --no-wait the CLI waits for the owner to apply the command.
        codes: list[int] = []
        waiting = threading.Thread(target=lambda: codes.append(main(["cancel", "c1"])))
        waiting.start()
        sent.read_until(lambda messages: len(messages) == 2, 30, "the cancel command")
        assert commands()[1] == (b"c1", CrawlCommand(crawl_id="c1", action="cancel"))
        assert waiting.is_alive(), "it waits for the crawl's status"
        owner_sets("cancelled")
        waiting.join(60)
        assert codes == [0] and "crawl c1 is cancelled" in capsys.readouterr().out

        code, out = run_cli(capsys, "resume", "c1")
        assert code == 1 and "crawl c1 is cancelled: nothing to resume" in out
        assert len(sent.poll(1.0)) == 2, "nothing sent to a cancelled crawl"
    finally:
        sent.close()


def test_seed_publishes_a_seed_list_once_per_crawl_id_and_says_when_the_broker_refuses_it(
    deployment: Deployment, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """60,000 seeds (3.3 MB of article URLs) go as one request. A taken crawl id, which the
    crawl's owner would ignore, and a request the broker refuses are errors, not a crawl id
    printed for a crawl that never starts."""
    assert main(["topics", "create"]) == 0
    articles = [
        f"https://en.wikipedia.org/wiki/Article_{n:06d}_{n * 7919 % 100_003}" for n in range(60_000)
    ]
    listed = tmp_path / "articles.txt"
    listed.write_text("# seed 004\n" + "\n".join(articles) + "\n", encoding="utf-8")
    sent = TopicReader(deployment.bootstrap, deployment.topic("seeds"))
    owner = Producer(
        {"bootstrap.servers": deployment.bootstrap, "compression.type": "zstd", **producer_limits()}
    )
    try:
        capsys.readouterr()
        code, out = run_cli(capsys, "seed", f"--seeds-file={listed}", "--crawl-id=articles")
        assert (code, out) == (0, "articles\n")
        (message,) = sent.read_until(lambda messages: len(messages) == 1, 30, "the request")
        request = decode(seeds.SEED_MESSAGE, message.value())
        assert isinstance(request, CrawlRequest) and request.seeds == articles

        # The owner has started it (the test writes `crawls` as a frontier would).
        state = crawl_state(request)
        owner.produce(deployment.topic("crawls"), encode(state), crawls.key("articles"))
        assert owner.flush(30) == 0
        code = main(["seed", "https://example.org/", "--crawl-id=articles"])
        error = capsys.readouterr().err
        assert code == 2
        assert "crawl articles exists already (active): give the new one another" in error

        # A seeds topic that takes 1 KiB a message refuses a request of 2 KiB compressed.
        admin = AdminClient({"bootstrap.servers": deployment.bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, deployment.topic("seeds"))
        limit = ConfigEntry(
            "max.message.bytes", "1024", incremental_operation=AlterConfigOpType.SET
        )
        resource.add_incremental_config(limit)
        for done in admin.incremental_alter_configs([resource]).values():
            done.result(30)
        noise = random.Random(4)
        alphabet = string.ascii_letters + string.digits
        tokens = [
            f"https://example.org/{''.join(noise.choices(alphabet, k=100))}" for _ in range(40)
        ]
        code = main(["seed", *tokens, "--crawl-id=tokens"])
        error = capsys.readouterr().err
        assert code == 2
        size = len(encode(CrawlRequest(seeds=tokens, crawl_id="tokens")))
        assert f"the broker refused the crawl request ({size:,} bytes before compression)" in error
        assert "MSG_SIZE_TOO_LARGE" in error
        assert len(sent.poll(1.0)) == 1, "nothing more reached seeds"
    finally:
        sent.close()


def test_up_refuses_to_start_a_second_stack_but_not_after_a_killed_one(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second `up` or `demo` would start `fetcher-0` again and fence the running one out of its
    group; a stack killed a moment ago left members that only go stale."""
    assert main(["topics", "create"]) == 0
    settings = Settings()
    producer = Producer({"bootstrap.servers": deployment.bootstrap})

    def beat(instance: str) -> None:
        member = members.Member(
            role="fetcher",
            instance=instance,
            http_address="127.0.0.1:1",
            partitions=[],
            ready=True,
            updated_at=now_millis(),
            heartbeat_ms=1000,
        )
        producer.produce(
            deployment.topic("members"), encode(member), members.key("fetcher", instance)
        )
        assert producer.flush(30) == 0

    refuse_a_running_stack(settings)  # nothing runs: no wait

    beat("fetcher-0")  # then killed: it never beats again
    started = time.monotonic()
    refuse_a_running_stack(settings)
    assert 1.0 < time.monotonic() - started < 10.0, "it waited for the record to go stale"

    running = threading.Event()

    def keep_beating() -> None:
        while not running.wait(0.3):
            beat("fetcher-1")

    beating = threading.Thread(target=keep_beating)
    beat("fetcher-1")
    beating.start()
    try:
        with pytest.raises(StreamcrawlError) as refused:
            refuse_a_running_stack(settings)
    finally:
        running.set()
        beating.join()
    assert "another stack runs on" in str(refused.value) and "(fetcher-1)" in str(refused.value)


def test_crawls_lists_every_crawl_oldest_first_with_its_counters_summed_over_partitions(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    """The test plays the frontiers: a state per crawl on `crawls`, counters per partition on
    `progress` (the latest snapshot of each partition counts, as for `crawl`)."""
    assert main(["topics", "create"]) == 0
    capsys.readouterr()
    assert run_cli(capsys, "crawls") == (0, "no crawls\n")

    def state(crawl_id: str, status: crawls.CrawlStatus, created_at: int, *urls: str) -> bytes:
        request = CrawlRequest(seeds=list(urls), crawl_id=crawl_id)
        return encode(crawl_state(request, status, created_at))

    def snapshot(crawl_id: str, partition: int, number: int, **counters: int) -> bytes:
        return encode(
            progress.PartitionProgress(
                crawl_id=crawl_id, partition=partition, snapshot=number, at=1, counters=counters
            )
        )

    a, b = "https://a.example/", "https://b.example/"
    produce_json(
        deployment.bootstrap,
        deployment.topic("crawls"),
        [
            ("newer", state("newer", "active", 1_796_000_000_000, a)),
            ("older", state("older", "done", 1_795_000_000_000, a, b, "https://c.example/")),
        ],
        raw=True,
    )
    produce_json(
        deployment.bootstrap,
        deployment.topic("progress"),
        [
            ("newer/0", snapshot("newer", 0, 1, fetched=1)),
            ("newer/0", snapshot("newer", 0, 2, fetched=5, queued=7, delayed=2)),
            ("newer/1", snapshot("newer", 1, 1, fetched=3, leased=1, dead=1)),
            ("older/2", snapshot("older", 2, 9, fetched=40, dead=4)),
        ],
        raw=True,
    )

    code, out = run_cli(capsys, "crawls")
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == [
        "crawl", "status", "created", "(UTC)", "fetched", "queued", "leased", "delayed", "dead",
        "seeds",
    ]  # fmt: skip
    assert [row.split() for row in rows] == [
        ["older", "done", "2026-11-18", "11:06:40", "40", "0", "0", "0", "4", a, "(+2)"],
        ["newer", "active", "2026-11-30", "00:53:20", "8", "7", "1", "2", "1", a],
    ]

    code, out = run_cli(capsys, "crawls", "--status", "active", "--json")
    (listed,) = json.loads(out)
    assert listed["crawl_id"] == "newer" and listed["seeds"] == [a]
    assert listed["counters"] == {"fetched": 8, "queued": 7, "delayed": 2, "leased": 1, "dead": 1}
    assert run_cli(capsys, "crawls", "--status", "paused") == (0, "no crawls paused\n")


def test_watch_follows_a_crawl_already_submitted_and_sums_its_urls_by_last_outcome(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    """The test plays the frontier: the crawl's state and a progress snapshot from each of two
    partitions, whose ``outcome_<label>`` counters the summary sums (a label down to 0, a URL
    that moved on to another outcome, is not shown), and another crawl's, which it leaves out."""
    assert main(["topics", "create"]) == 0
    capsys.readouterr()
    created = now_millis()
    request = CrawlRequest(seeds=["https://example.org/"], crawl_id="w")
    produce_json(
        deployment.bootstrap,
        deployment.topic("crawls"),
        [("w", encode(crawl_state(request, "done", created)))],
        raw=True,
    )

    def snapshot(crawl_id: str, partition: int, **counters: int) -> tuple[str, bytes]:
        value = progress.PartitionProgress(
            crawl_id=crawl_id, partition=partition, snapshot=1, at=created, counters=counters
        )
        return f"{crawl_id}/{partition}", encode(value)

    produce_json(
        deployment.bootstrap,
        deployment.topic("progress"),
        [
            snapshot("w", 0, fetched=2, outcome_200=2, outcome_503=0),
            snapshot("w", 1, fetched=1, dead=1, outcome_200=1, outcome_404=1),
            snapshot("other", 0, fetched=5, outcome_500=5),
        ],
        raw=True,
    )

    code, out = run_cli(capsys, "watch", "w")
    assert code == 0, out
    assert "status: done" in out
    assert "URLs by last outcome: 200=3, 404=1\n" in out
    assert run_cli(capsys, "watch", "nope") == (
        1,
        "no crawl nope (not started, or its owner has not read it yet)\n",
    )


def test_following_a_crawl_that_ended_with_fetches_leased_waits_for_their_outcomes(
    deployment: Deployment,
) -> None:
    """A crawl ended by its max duration still has fetches out; its summary counts them once
    their outcomes are in (the frontier's next snapshot: nothing leased), not before."""
    assert main(["topics", "create"]) == 0
    request = CrawlRequest(seeds=["https://example.org/"], crawl_id="late", max_duration_ms=1000)
    ended = crawl_state(request, "done", now_millis()).model_copy(
        update={"ended_by": "max_duration"}
    )
    produce_json(
        deployment.bootstrap, deployment.topic("crawls"), [("late", encode(ended))], raw=True
    )

    def snapshot(number: int, **counters: int) -> tuple[str, bytes]:
        value = progress.PartitionProgress(
            crawl_id="late", partition=0, snapshot=number, at=now_millis(), counters=counters
        )
        return "late/0", encode(value)

    progress_topic = deployment.topic("progress")
    produce_json(deployment.bootstrap, progress_topic, [snapshot(1, fetched=5, leased=2)], raw=True)
    command = subprocess.Popen(
        [sys.executable, "-m", "streamcrawl.cli", "watch", "late"],
        cwd=REPO,
        env=deployment.env("cli"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert command.stdout is not None
    shown = []
    for line in command.stdout:  # one progress line a second until the leases report back
        shown.append(line)
        if " done fetched=5 " in line and " leased=2 " in line:
            break
    assert command.poll() is None, "".join(shown)
    produce_json(deployment.bootstrap, progress_topic, [snapshot(2, fetched=7, leased=0)], raw=True)
    rest, _ = command.communicate(timeout=60)
    assert command.returncode == 0, rest
    assert "pages fetched: 7 " in rest
    assert "status: done (its max duration was reached" in rest


def test_deadletters_lists_a_crawls_dead_urls_and_counts_them_by_stage_and_reason(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    """The frontier's dead URLs carry their outcome (crawl and URL); a parser's poison page
    does not; something that is no DeadLetter at all is shown, not skipped."""
    assert main(["topics", "create"]) == 0
    capsys.readouterr()

    def outcome(crawl_id: str, url: str, status: int) -> bytes:
        return encode(
            FetchOutcome(
                crawl_id=crawl_id,
                url=url,
                host="example.org",
                lease_id=f"lease-{url}",
                kind="permanent",
                status=status,
                fetched_at=now_millis(),
            )
        )

    source = deployment.topic("outcomes")
    letters = [
        (
            "example.org",
            dead_letter(
                "frontier",
                source,
                0,
                7,
                "permanent: status 404",
                outcome("c1", "https://example.org/gone", 404),
            ),
        ),
        (
            "example.org",
            dead_letter(
                "frontier",
                source,
                0,
                9,
                "retries_exhausted: status 503",
                outcome("c1", "https://example.org/busy", 503),
            ),
        ),
        (
            "example.org",
            dead_letter(
                "frontier",
                source,
                1,
                3,
                "permanent: status 410",
                outcome("c2", "https://example.org/other", 410),
            ),
        ),
        (
            "https://example.org/p",
            dead_letter(
                "parser",
                deployment.topic("pages"),
                2,
                5,
                "undecodable: page envelope has no newline",
                b"\x00binary",
            ),
        ),
    ]
    produce_json(
        deployment.bootstrap,
        deployment.topic("deadletter"),
        [(key, encode(letter)) for key, letter in letters] + [("junk", b"not a letter")],
        raw=True,
    )

    code, out = run_cli(capsys, "deadletters", "--crawl-id", "c1")
    assert code == 0
    lines = out.splitlines()
    assert [line.split("  ", 1)[1] for line in lines[:2]] == [
        "frontier  https://example.org/gone  permanent: status 404",
        "frontier  https://example.org/busy  retries_exhausted: status 503",
    ]
    assert lines[2] == ("2 dead letters of crawl c1; frontier: permanent=1, retries_exhausted=1")

    code, out = run_cli(capsys, "deadletters", "--limit", "1")
    lines = out.splitlines()
    assert "not a dead letter" in lines[0] and len(lines) == 2
    assert lines[1] == (
        "5 dead letters, the last 1 listed; ?: not a dead letter=1; "
        "frontier: permanent=2, retries_exhausted=1; parser: undecodable=1"
    )

    code, out = run_cli(capsys, "deadletters", "--stage", "parser", "--json")
    (document,) = [json.loads(line) for line in out.splitlines()]
    assert (document["key"], document["crawl_id"], document["url"]) == (
        "https://example.org/p",
        None,
        None,
    )
    assert base64.urlsafe_b64decode(document["payload"]) == b"\x00binary"
    assert (document["topic"], document["partition"], document["offset"]) == (
        deployment.topic("pages"),
        2,
        5,
    )

    code, out = run_cli(capsys, "deadletters", "--crawl-id", "c9")
    assert (code, out) == (0, "no dead letters of crawl c9\n")


def test_a_reader_that_leaves_early_stops_the_command_quietly(deployment: Deployment) -> None:
    """`streamcrawl deadletters --json | head`: the pipe closes under the command, which exits
    141 (as one killed by SIGPIPE) without a traceback."""
    assert main(["topics", "create"]) == 0
    letter = dead_letter("parser", deployment.topic("pages"), 0, 1, "undecodable: x", b"p" * 2000)
    produce_json(
        deployment.bootstrap,
        deployment.topic("deadletter"),
        [(str(n), encode(letter)) for n in range(200)],  # about 500 KiB of JSON, past a pipe
        raw=True,
    )
    command = subprocess.Popen(
        [sys.executable, "-m", "streamcrawl.cli", "deadletters", "--json"],
        cwd=REPO,
        env=deployment.env("cli"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert command.stdout is not None and command.stderr is not None
    assert command.stdout.read(100).startswith(b'{"v": 1, "stage": "parser"')
    command.stdout.close()
    assert command.wait(60) == 141
    assert b"Traceback" not in command.stderr.read()


def test_status_fails_when_the_broker_does_not_answer(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS", "127.0.0.1:1")
    code, out = run_cli(capsys, "status")
    assert code == 1 and "does not answer" in out


def test_partition_function_agrees_with_librdkafka_murmur2(
    kafka_bootstrap: str, topic_factory: object
) -> None:
    partitions = 7
    topic = topic_factory(partitions)  # type: ignore[operator]
    keys = [f"host-{i}.example.com:{i % 3 or ''}" for i in range(300)]
    keys += ["", "ü.example", "a\tb", uuid.uuid4().hex]
    placed: dict[str, int] = {}
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "partitioner": "murmur2_random"})
    for key in keys:
        producer.produce(
            topic,
            key=key.encode(),
            value=b"x",
            on_delivery=lambda err, msg, key=key: placed.__setitem__(key, msg.partition()),
        )
    assert producer.flush(30) == 0
    assert placed == {key: partition_for_key(key.encode(), partitions) for key in keys}


@pytest.fixture
def table_topic(deployment: Deployment) -> Iterator[str]:
    deployment.create((crawls.TOPIC,))
    yield deployment.topic("crawls")


def test_table_reader_is_ready_at_the_high_watermark_and_follows_tombstones(
    deployment: Deployment, table_topic: str
) -> None:
    producer = Producer({"bootstrap.servers": deployment.bootstrap})
    for i in range(50):
        producer.produce(table_topic, key=f"crawl-{i % 10}", value=json.dumps(i).encode())
    producer.produce(table_topic, key="crawl-3", value=None)
    assert producer.flush(30) == 0
    table: TopicTable[int] = TopicTable(
        table_consumer_config(deployment.settings()),
        table_topic,
        lambda raw: json.loads(raw or b""),
    )
    table.start()
    try:
        assert table.wait_ready(30)
        snapshot = table.snapshot()
        assert "crawl-3" not in snapshot
        assert snapshot["crawl-9"] == 49 and len(snapshot) == 9
        producer.produce(table_topic, key="crawl-new", value=b"1")
        producer.flush(30)
        wait_for(lambda: table.get("crawl-new") == 1, 30, "a later record followed")
    finally:
        table.stop()
