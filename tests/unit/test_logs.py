"""Structured logs: the JSON formatter, and the repeats a broker outage makes, collapsed."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

from streamcrawl.logs import JsonFormatter, RepeatFilter
from tests.support import REPO


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def record(msg: str, *args: object, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord("streamcrawl.kafka.client", level, __file__, 1, msg, args, None)


def client_record(client: str, text: str) -> logging.LogRecord:
    """What confluent-kafka logs for librdkafka: facility, client name, text."""
    return record("%s [%s] %s", "FAIL", client, text, level=logging.ERROR)


REFUSED = "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused"


def test_repeats_within_the_window_are_held_back_and_counted_in_the_next_one() -> None:
    clock = FakeClock()
    repeats = RepeatFilter(window_s=30.0, clock=clock)
    assert repeats.filter(record("kafka producer error: %s", "1/1 brokers are down"))
    for _ in range(50):
        clock.now += 0.5
        assert not repeats.filter(record("kafka producer error: %s", "1/1 brokers are down"))
    clock.now += 6.0  # 31 s after the first
    later = record("kafka producer error: %s", "1/1 brokers are down")
    assert repeats.filter(later)
    assert (
        later.getMessage() == "kafka producer error: 1/1 brokers are down (50 more like it in 31s)"
    )
    clock.now += 1.0
    assert not repeats.filter(record("kafka producer error: %s", "1/1 brokers are down"))


def test_a_kind_ignores_numbers_and_the_client_but_not_the_level_or_the_text() -> None:
    repeats = RepeatFilter(window_s=30.0, clock=FakeClock())
    assert repeats.filter(
        client_record("streamcrawl-frontier-0#producer-5", f"{REFUSED} (after 0ms)")
    )
    assert not repeats.filter(
        client_record("streamcrawl-frontier-0#consumer-4", f"{REFUSED} (after 12ms)")
    )
    assert not repeats.filter(
        client_record("streamcrawl-table-frontier-0#consumer-2", f"{REFUSED} (after 3ms)")
    )
    assert repeats.filter(client_record("streamcrawl-frontier-0#producer-5", "Disconnected"))
    assert repeats.filter(record("%s [%s] %s", "FAIL", "c#producer-1", REFUSED, level=logging.INFO))


def test_remembered_kinds_stay_bounded() -> None:
    clock = FakeClock()
    repeats = RepeatFilter(window_s=30.0, clock=clock)
    for n in range(3_000):
        clock.now += 0.1
        assert repeats.filter(record(f"message of kind {'x' * (n % 2_500)}"))
    assert len(repeats._kinds) <= 1_000


def test_librdkafka_speaks_in_json_lines_and_repeats_little() -> None:
    """A producer whose broker refuses every connection, in a process logging as a service does:
    librdkafka reports each refusal, many a second; stderr holds JSON lines, one per kind."""
    script = (
        "import time\n"
        "from confluent_kafka import Producer\n"
        "from streamcrawl.kafka import producer_config\n"
        "from streamcrawl.logs import configure_logging\n"
        "from streamcrawl.settings import Settings\n"
        "configure_logging('fetcher', 'fetcher-0')\n"
        "settings = Settings(kafka={'bootstrap_servers': '127.0.0.1:1'})\n"
        "backoff = {'reconnect.backoff.ms': 10, 'reconnect.backoff.max.ms': 50}\n"
        "producer = Producer({**producer_config(settings), **backoff})\n"
        "end = time.monotonic() + 3\n"
        "while time.monotonic() < end:\n"
        "    producer.poll(0.1)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    entries = [json.loads(line) for line in lines]
    assert entries, "librdkafka reported no refusal"
    assert all(e["logger"] == "streamcrawl.kafka.client" for e in entries)
    refusals = [e for e in entries if "Connection refused" in e["msg"]]
    assert len(refusals) == 1, lines


def test_the_formatter_writes_one_json_object_with_the_traceback() -> None:
    formatter = JsonFormatter("frontier", "frontier-0")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        failure = logging.LogRecord("x", logging.ERROR, __file__, 1, "stopped", (), sys.exc_info())
    entry = json.loads(formatter.format(failure))
    assert entry["level"] == "error" and entry["role"] == "frontier"
    assert entry["instance"] == "frontier-0" and entry["msg"] == "stopped"
    assert "RuntimeError: boom" in entry["exc"]
