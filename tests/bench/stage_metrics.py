"""Where the end-to-end benchmark's time goes: per-stage throughput and lag from /metrics, and a
process's CPU and peak RSS from /proc.

:class:`StageSampler` scrapes every service's side server once a second: each role's
``streamcrawl_<role>_messages_in_total`` (summed over topics) and
``streamcrawl_<role>_consumer_lag_messages`` (summed over partitions). Its report gives, per role,
messages in per second over the busy part of the run and the largest lag seen.
"""

from __future__ import annotations

import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from schemas.deadletter import DeadLetter

_SAMPLE = re.compile(
    r"^(streamcrawl_(\w+?)_(messages_in_total|consumer_lag_messages|cycle_seconds_count"
    r"|processing_seconds_sum))"
    r"(?:\{([^}]*)\})? (\S+)$"
)
_TOPIC = re.compile(r'topic="([^"]*)"')


def proc_usage(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) and peak RSS in MiB of a live process."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    peak_kib = 0
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                peak_kib = int(line.split()[1])
    return cpu, peak_kib / 1024


@dataclass
class _Series:
    first: tuple[float, float] | None = None
    last: tuple[float, float] | None = None
    max_lag: float = 0.0
    busy_until: float = 0.0
    cycles: tuple[float, float] = (0.0, 0.0)
    """Loop cycles at the first and the latest sample."""
    by_topic: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per input topic at the latest sample: messages in and the handler's seconds on them."""


@dataclass
class StageSampler:
    """Scrapes the services' /metrics; `addresses` maps instance id to host:port."""

    addresses: dict[str, str]
    series: dict[str, _Series] = field(default_factory=dict)

    def sample(self) -> None:
        now = time.monotonic()
        for instance, address in self.addresses.items():
            try:
                with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
                    text = response.read().decode()
            except (urllib.error.URLError, OSError):
                continue
            consumed, lag, cycles = 0.0, 0.0, 0.0
            by_topic: dict[str, list[float]] = {}
            role = instance.rpartition("-")[0]
            for line in text.splitlines():
                match = _SAMPLE.match(line)
                if match is None or match.group(2) != role:
                    continue
                name, labels, value = match.group(3), match.group(4) or "", float(match.group(5))
                topic = _TOPIC.search(labels)
                if name == "messages_in_total":
                    consumed += value
                    if topic is not None:
                        by_topic.setdefault(topic.group(1), [0.0, 0.0])[0] += value
                elif name == "processing_seconds_sum":
                    if topic is not None:
                        by_topic.setdefault(topic.group(1), [0.0, 0.0])[1] += value
                elif name == "cycle_seconds_count":
                    cycles += value
                else:
                    lag += value
            series = self.series.setdefault(instance, _Series())
            if series.first is None:
                series.first = (now, consumed)
                series.cycles = (cycles, cycles)
            if series.last is None or consumed > series.last[1]:
                series.busy_until = now
            series.last = (now, consumed)
            series.cycles = (series.cycles[0], cycles)
            series.max_lag = max(series.max_lag, lag)
            series.by_topic = {topic: (n, seconds) for topic, (n, seconds) in by_topic.items()}

    def report(self) -> list[str]:
        rows = [
            "| instance | messages in | messages/s while busy | loop cycles | messages per cycle |"
            " largest lag |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for instance, series in sorted(self.series.items()):
            if series.first is None or series.last is None:
                continue
            consumed = series.last[1] - series.first[1]
            busy = max(series.busy_until - series.first[0], 1e-6)
            cycles = series.cycles[1] - series.cycles[0]
            rows.append(
                f"| {instance} | {consumed:.0f} | {consumed / busy:.1f} | {cycles:.0f} |"
                f" {consumed / max(cycles, 1):.1f} | {series.max_lag:.0f} |"
            )
        return rows

    def handler_report(self, prefix: str) -> list[str]:
        """The handlers' time per input topic over the whole run (the loop's
        ``processing_seconds``: wall time inside the handler, decoding and the loop's own work
        around it not included)."""
        rows = [
            "| instance | input topic | messages | handler wall s | handler wall us/message |",
            "|---|---|---:|---:|---:|",
        ]
        for instance, series in sorted(self.series.items()):
            for topic, (count, seconds) in sorted(series.by_topic.items()):
                if count:
                    rows.append(
                        f"| {instance} | {topic.removeprefix(prefix)} | {count:.0f} |"
                        f" {seconds:.1f} | {1e6 * seconds / count:.0f} |"
                    )
        return rows


def topic_records(bootstrap: str, prefix: str) -> dict[str, int]:
    """Records in each topic under `prefix`: high minus low watermark, partitions summed."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=30).topics
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{prefix}bench-watermarks"})
    counts: dict[str, int] = {}
    try:
        for name, metadata in sorted(topics.items()):
            if not name.startswith(prefix):
                continue
            total = 0
            for partition in metadata.partitions:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(name, partition), timeout=30
                )
                total += max(0, high - low)
            counts[name.removeprefix(prefix)] = total
    finally:
        consumer.close()
    return counts


def changelog_tables(
    bootstrap: str, topic: str, limit: int = 5_000_000
) -> dict[str, tuple[int, int]]:
    """Records of one changelog topic by the state table they belong to (the key up to its NUL,
    `streamcrawl.state.changelog_key`): (puts, deletes) per table, the whole topic read."""
    counts: dict[str, tuple[int, int]] = {}
    for message in _read_whole(bootstrap, topic, limit):
        table = (message.key() or b"").partition(b"\x00")[0].decode(errors="replace")
        puts, deletes = counts.get(table, (0, 0))
        if message.value() is None:
            deletes += 1
        else:
            puts += 1
        counts[table] = (puts, deletes)
    return counts


def _read_whole(bootstrap: str, topic: str, limit: int) -> Iterator[Message]:
    """Every record of `topic` up to the high watermarks read at the start (at most `limit`)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}.bench-read",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        ends = {}
        for partition in metadata.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            if high > low:
                ends[partition] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        seen = 0
        while ends and seen < limit:
            for message in consumer.consume(1000, 1.0):
                if message.error() is not None:
                    continue
                seen += 1
                yield message
                partition, offset = message.partition(), message.offset()
                if partition in ends and offset is not None and offset >= ends[partition] - 1:
                    del ends[partition]
    finally:
        consumer.close()


def dead_letter_reasons(bootstrap: str, topic: str, limit: int = 100_000) -> dict[str, int]:
    """Dead letters on `topic` counted by stage, source topic and the first words of the error."""
    counts: dict[str, int] = {}
    for message in _read_whole(bootstrap, topic, limit):
        letter = DeadLetter.model_validate_json(message.value() or b"{}")
        reason = " ".join(letter.error.split()[:6])
        name = f"{letter.stage} <- {letter.topic}: {reason}"
        counts[name] = counts.get(name, 0) + 1
    return counts
