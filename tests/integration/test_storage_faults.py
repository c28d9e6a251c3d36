"""The storage killed mid-write at named crash points, then restarted under the same instance id:
no partial blob is ever visible, a torn WARC tail is cut, and after the restart every page is
stored exactly once (one response record each, every digest valid). A disk that refuses writes
stops the storage (exit 3) with nothing dead-lettered; after the fix every page is stored."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard
from confluent_kafka import Consumer, TopicPartition

from storage.service import DISK_FAILED_EXIT
from storage.tools import verify_root
from storage.warcfiles import TornMemberError, iter_members, warc_files
from streamcrawl.crashpoints import CRASH_EXIT_CODE
from tests.integration.storage_support import (
    StorageDeployment,
    fetched,
    get_json,
    page_body,
    wait_stored,
    warc_records,
)

pytestmark = pytest.mark.kafka

PAGES = 10


@pytest.fixture
def storage(kafka_bootstrap: str, tmp_path: Path) -> Iterator[StorageDeployment]:
    deployment = StorageDeployment(kafka_bootstrap, tmp_path)
    yield deployment
    deployment.stop()


def visible_blobs_are_whole(root: Path) -> list[Path]:
    """Every file named as a blob decompresses to content with that hash; returns them."""
    blobs = sorted((root / "blobs").glob("*/*/*.zst"))
    for blob in blobs:
        content = zstandard.ZstdDecompressor().stream_reader(blob.read_bytes()).read()
        assert hashlib.sha256(content).hexdigest() == blob.name.removesuffix(".zst")
    return blobs


def torn_files(root: Path) -> list[Path]:
    torn = []
    for path in warc_files(root):
        with path.open("rb") as handle:
            try:
                for _ in iter_members(handle):
                    pass
            except TornMemberError:
                torn.append(path)
    return torn


@pytest.mark.parametrize(
    "point", ["storage_before_blob_rename:3", "storage_mid_warc:3", "after_delivery:1"]
)
def test_storage_killed_mid_write_shows_no_partial_blob_and_loses_nothing(
    storage: StorageDeployment, point: str
) -> None:
    pages = [
        (fetched(f"http://site.test/crash/{i}", page_body(i), 3_000 + i), page_body(i))
        for i in range(PAGES)
    ]
    storage.produce(pages)
    crashed = storage.start("storage-1", STREAMCRAWL_CRASH_AT=point)
    assert crashed.wait(120) == CRASH_EXIT_CODE, crashed.log_tail()

    root = storage.storage_root
    blobs_at_crash = visible_blobs_are_whole(root)
    temporaries = list((root / "blobs").glob("*/*/*.tmp-*"))
    if point.startswith("storage_before_blob_rename"):
        assert len(blobs_at_crash) == 2 and len(temporaries) == 1
    if point.startswith("storage_mid_warc"):
        assert len(torn_files(root)) == 1

    dead = frozenset(str(m.api_address) for m in storage.members())
    storage.start("storage-1")
    [address] = storage.api_addresses(1, excluding=dead)
    for page, _ in pages:
        wait_stored(address, page.url, page.sha256)

    assert len(visible_blobs_are_whole(root)) == PAGES
    assert not list((root / "blobs").glob("*/*/*.tmp-*"))
    assert torn_files(root) == []
    records = warc_records(root)  # every digest checked
    kinds = Counter(kind for kind, _, _ in records)
    assert kinds["response"] == PAGES and kinds["request"] == PAGES
    assert len({record_id for _, _, record_id in records}) == len(records)
    for page, _ in pages:
        status, history = get_json(address, "/v1/page/history", url=page.url)
        assert status == 200 and len(history["history"]) == 1
    report = verify_root(root)
    assert report.ok, report.problems


def topic_size(bootstrap: str, topic: str) -> int:
    """Messages ever written to `topic` (the sum of its partitions' high watermarks)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "storage-faults-size"})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in partitions
        )
    finally:
        consumer.close()


def test_a_disk_that_refuses_writes_stops_the_storage_and_nothing_is_dead_lettered(
    storage: StorageDeployment,
) -> None:
    pages = [
        (fetched(f"http://site.test/disk/{i}", page_body(i), 5_000 + i), page_body(i))
        for i in range(PAGES)
    ]
    root = storage.storage_root
    root.mkdir(parents=True)
    (root / "blobs").write_bytes(b"")  # a file where the blob directory must go: writes fail
    storage.produce(pages)
    failed = storage.start("storage-1")
    assert failed.wait(120) == DISK_FAILED_EXIT, failed.log_tail()
    assert "storage cannot write" in failed.log_tail()
    assert topic_size(storage.bootstrap, storage.deployment.topic("deadletter")) == 0

    (root / "blobs").unlink()  # the operator's fix; the supervisor starts the instance again
    dead = frozenset(str(m.api_address) for m in storage.members())
    storage.start("storage-1")
    [address] = storage.api_addresses(1, excluding=dead)
    for page, _ in pages:
        wait_stored(address, page.url, page.sha256)
    assert len(visible_blobs_are_whole(root)) == PAGES
    kinds = Counter(kind for kind, _, _ in warc_records(root))
    assert kinds["response"] == PAGES
    assert topic_size(storage.bootstrap, storage.deployment.topic("deadletter")) == 0
