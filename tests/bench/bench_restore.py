"""Benchmark: restoring a state partition of N entries from its changelog (default one million).

Measured in one run against a real broker (STREAMCRAWL_TEST_BOOTSTRAP, else a local broker started
here): the bare baseline (consume every changelog record and put it into RocksDB with WriteBatches,
no kernel code), the kernel's full restore of a missing store, and its tail replay of a kept store
that is up to date. Prints a table; not a test, so nothing here asserts a duration.

    python tests/bench/bench_restore.py [--entries 1000000]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from rocksdict import Options, Rdict, WriteBatch

from schemas.registry import changelog_topic
from streamcrawl.recovery import SOURCE_HEADER, ChangelogRestorer
from streamcrawl.settings import Settings, StateSettings
from streamcrawl.state import StoreOptions, changelog_key
from streamcrawl.topics import create_topics
from tests.broker_source import session_broker

VALUE = b'{"depth": 3, "priority": 0.5, "discovered_at": 1795990000000, "lease": null}'


@contextmanager
def broker(root: Path) -> Iterator[str]:
    given = os.environ.get("STREAMCRAWL_TEST_BOOTSTRAP")
    if given:
        yield given
        return
    with session_broker(root / "kafka") as bootstrap:
        yield bootstrap


def fill_changelog(bootstrap: str, topic: str, entries: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "compression.type": "zstd",
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    started = time.perf_counter()
    for i in range(entries):
        while True:
            try:
                producer.produce(
                    topic,
                    key=changelog_key("queue", f"host-{i % 5000}/{i:012d}".encode()),
                    value=VALUE,
                    partition=0,
                    headers=[(SOURCE_HEADER, f"in:0:{i}".encode())],
                )
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(120)
    return time.perf_counter() - started


def bare_restore(bootstrap: str, topic: str, entries: int, path: Path) -> float:
    """Consume every record and write it into a RocksDB with 10k-record WriteBatches."""
    options = Options(raw_mode=True)
    db = Rdict(str(path), options=options)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.auto.commit": False}
    )
    write_options = StoreOptions.write_options()  # as the kernel writes: no write-ahead log
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    while seen < entries:
        batch = WriteBatch(raw_mode=True)
        # A short wait: consume() returns early only on a full batch, so the last one waits.
        for message in consumer.consume(10_000, 0.05):
            if message.error() is None:
                batch.put(message.key(), message.value())
                seen += 1
        db.write(batch, write_options)
    elapsed = time.perf_counter() - started
    consumer.close()
    db.close()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, broker(Path(tmp)) as bootstrap:
        root = Path(tmp)
        prefix = f"bench{uuid.uuid4().hex[:6]}."
        settings = Settings(
            kafka={"bootstrap_servers": bootstrap, "topic_prefix": prefix, "partitions": 1}
        )
        spec = changelog_topic("bench")
        create_topics(settings, (spec,))
        topic = spec.name(prefix)
        fill_s = fill_changelog(bootstrap, topic, args.entries)
        bare_s = bare_restore(bootstrap, topic, args.entries, root / "bare")

        restorer = ChangelogRestorer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": uuid.uuid4().hex,
                "enable.auto.commit": False,
            },
            timeout_s=60,
        )
        options = StoreOptions(StateSettings())
        committed = {("in", 0): args.entries}
        store, full = restorer.open(root / "kernel", ("queue",), options, topic, 0, committed)
        store.close()
        store, tail = restorer.open(root / "kernel", ("queue",), options, topic, 0, committed)
        count = store.count("queue")
        store.close()
        restorer.close()

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = [
        ("changelog filled (produce)", fill_s, args.entries),
        ("bare consume + WriteBatch (baseline)", bare_s, args.entries),
        ("kernel full restore (store missing)", full.seconds, full.records_read),
        ("kernel tail replay (store kept, current)", tail.seconds, tail.records_read),
    ]
    print(f"state restore, {args.entries:,} entries in one partition")
    print(f"{'what':<44}{'seconds':>10}{'records':>12}{'records/s':>14}")
    for name, seconds, records in rows:
        rate = records / seconds if seconds else 0.0
        print(f"{name:<44}{seconds:>10.2f}{records:>12,}{rate:>14,.0f}")
    print(f"kernel full restore / baseline time: {full.seconds / bare_s:.2f}x")
    print(f"entries in the restored store: {count:,}; peak RSS {rss_mb:.0f} MB")
    return 0 if count == args.entries else 1


if __name__ == "__main__":
    sys.exit(main())
