"""The binary visited record: every field round-trips, the admission shortcut and the depth peek
agree with the record, and a JSON record of an earlier version still decodes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frontier.queues import QueuedUrl
from frontier.records import VisitedRecord, encode_queued, peek_depth
from schemas.outcomes import FetchOutcome, outcome_label

texts = st.none() | st.text(max_size=40)
records = st.builds(
    VisitedRecord,
    depth=st.integers(0, 2**32 - 1),
    state=st.sampled_from(["queued", "leased", "done", "dead", "waiting"]),
    queue_key=st.none() | st.binary(max_size=300).map(bytes.hex),
    lease_id=texts,
    attempts=st.integers(0, 2**16 - 1),
    etag=texts,
    last_modified=texts,
    content_hash=texts,
    rank=st.none() | st.integers(0, 2**64 - 1),
    charged=st.booleans(),
    outcome=st.none() | st.sampled_from(["200", "301", "404", "599", "retryable", "robots_denied"]),
    recrawl_interval_ms=st.none() | st.integers(0, 2**64 - 1),
    due_ms=st.none() | st.integers(0, 2**64 - 1),
)


@given(records)
def test_a_visited_record_round_trips(record: VisitedRecord) -> None:
    raw = record.encode()
    assert VisitedRecord.decode(raw) == record
    assert peek_depth(raw) == record.depth


@given(st.integers(0, 2**32 - 1), st.binary(min_size=1, max_size=300))
def test_the_admission_shortcut_writes_the_same_bytes(depth: int, key: bytes) -> None:
    record = VisitedRecord(depth, "queued", queue_key=key.hex())
    assert encode_queued(depth, key) == record.encode()


def test_a_queued_record_takes_the_short_form_and_others_the_long_one() -> None:
    key = bytes.fromhex("68302e6578616d706c6500") + bytes(30)
    short = VisitedRecord(3, "queued", queue_key=key.hex()).encode()
    assert short[:1] == b"\x02" and len(short) == 5 + len(key)
    leased = VisitedRecord(3, "leased", queue_key=key.hex(), lease_id="l", attempts=1, rank=9)
    assert leased.encode()[:1] == b"\x03"
    assert VisitedRecord(3, "queued", queue_key=key.hex(), rank=9).encode()[:1] == b"\x03"
    assert VisitedRecord(3, "queued", queue_key=key.hex(), outcome="503").encode()[:1] == b"\x03"


def test_a_record_with_a_recrawl_or_due_time_is_version_4_and_version_3_still_decodes() -> None:
    """Version 3 is what a frontier wrote before recrawl intervals and due times were kept, and
    what a record with neither still takes."""
    record = VisitedRecord(2, "waiting", lease_id="l", attempts=1, content_hash="ab", rank=5)
    version_3 = record.encode()
    assert version_3[:1] == b"\x03"
    assert VisitedRecord.decode(version_3) == record
    scheduled = replace(record, recrawl_interval_ms=5_400_000, due_ms=1_800_000_000_000)
    version_4 = scheduled.encode()
    assert version_4[:1] == b"\x04"
    assert len(version_4) == len(version_3) + 2 * (2 + 8)
    assert VisitedRecord.decode(version_4) == scheduled
    assert peek_depth(version_4) == 2


def test_a_version_1_queued_record_still_decodes() -> None:
    """What admission wrote before the short form: version 1, queued, the key, no strings."""
    key = bytes(range(40))
    head = bytes([1]) + (7).to_bytes(4, "big") + bytes([0, 0]) + bytes(2) + bytes(8)
    raw = head + len(key).to_bytes(2, "big") + key + b"\xff\xff" * 4
    assert VisitedRecord.decode(raw) == VisitedRecord(7, "queued", queue_key=key.hex())
    assert peek_depth(raw) == 7


def test_a_version_1_done_record_decodes_without_an_outcome() -> None:
    """What a frontier wrote before records kept their latest outcome (version 3)."""
    head = bytes([1]) + (2).to_bytes(4, "big") + bytes([2, 2]) + (1).to_bytes(2, "big")
    lease_id = (1).to_bytes(2, "big") + b"l"
    raw = head + (5).to_bytes(8, "big") + b"\xff\xff" + lease_id + b"\xff\xff" * 3
    record = VisitedRecord(2, "done", lease_id="l", attempts=1, rank=5)
    assert VisitedRecord.decode(raw) == record
    assert VisitedRecord.decode(record.encode()) == record
    assert peek_depth(raw) == 2


def test_a_json_record_of_an_earlier_version_still_decodes() -> None:
    raw = b'{"depth":2,"state":"leased","queue_key":"00ff","lease_id":"l","rank":5,"charged":true}'
    assert VisitedRecord.decode(raw) == VisitedRecord(
        2, "leased", queue_key="00ff", lease_id="l", rank=5, charged=True
    )
    assert peek_depth(raw) == 2


entries = st.builds(
    QueuedUrl,
    crawl_id=st.text(min_size=1, max_size=40),
    url=st.text(max_size=200),
    depth=st.integers(0, 2**32 - 1),
    redirect_hops=st.integers(0, 2**16 - 1),
    attempts=st.integers(0, 2**16 - 1),
    etag=texts,
    last_modified=texts,
    content_hash=texts,
)


@given(entries)
def test_a_queue_entry_round_trips(entry: QueuedUrl) -> None:
    assert QueuedUrl.decode(entry.encode()) == entry


def test_a_json_queue_entry_of_an_earlier_version_still_decodes() -> None:
    raw = b'{"crawl_id":"c","url":"https://a.example/","depth":1,"attempts":2,"etag":"e"}'
    assert QueuedUrl.decode(raw) == QueuedUrl("c", "https://a.example/", 1, attempts=2, etag="e")


def test_a_first_time_entry_takes_the_short_form_and_version_1_still_decodes() -> None:
    fresh = QueuedUrl("crawl", "https://a.example/é", 3, redirect_hops=1)
    short = fresh.encode()
    assert short[:1] == b"\x02"
    # What earlier versions wrote for it: version 1, attempts 0, u16-length fields, 3 absent.
    url = "https://a.example/é".encode()
    long = (
        b"\x01\x00\x00\x00\x03\x00\x01\x00\x00"
        + b"\x00\x05crawl"
        + len(url).to_bytes(2, "big")
        + url
        + b"\xff\xff" * 3
    )
    assert len(short) == len(long) - 10
    assert QueuedUrl.decode(long) == QueuedUrl.decode(short) == fresh
    assert QueuedUrl("c", "u", 0, attempts=1).encode()[:1] == b"\x01"


@pytest.mark.parametrize(
    ("status", "label"),
    [(200, "200"), (None, "retryable"), (0, "retryable"), (1234, "retryable"), (999, "999")],
)
def test_every_outcome_label_has_a_code_in_the_visited_record(
    status: int | None, label: str
) -> None:
    """A server's nonsense status (0, four digits) is labelled by the outcome's kind, so every
    label fits the record's u16 code."""
    outcome = FetchOutcome(
        crawl_id="c", url="https://a.example/", host="a.example", lease_id="l",
        kind="retryable", status=status, fetched_at=1,
    )  # fmt: skip
    assert outcome_label(outcome) == label
    assert VisitedRecord.decode(VisitedRecord(0, "done", outcome=label).encode()).outcome == label
