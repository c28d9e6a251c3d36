"""Host queues on a real RocksDB store: release order, heads, and the host heap."""

from pathlib import Path

import pytest

from frontier.queues import (
    HostHeap,
    QueuedUrl,
    count_by_host,
    encode_new_entries,
    encode_new_entry,
    enqueue,
    head,
    new_entry_head,
)
from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Table, Transaction


def queue_table(tmp_path: Path) -> tuple[PartitionStore, Table]:
    store = PartitionStore(tmp_path / "p", ("queue",), StoreOptions(StateSettings()))
    return store, Table(Transaction(store), "queue", None)


def entry(url: str, depth: int) -> QueuedUrl:
    return QueuedUrl(crawl_id="c", url=url, depth=depth)


def test_head_follows_priority_then_arrival_per_host(tmp_path: Path) -> None:
    store, table = queue_table(tmp_path)
    enqueue(table, "a.example", bytes([2]), 1, entry("http://a.example/deep", 2))
    enqueue(table, "a.example", bytes([1]), 3, entry("http://a.example/late", 1))
    enqueue(table, "a.example", bytes([1]), 2, entry("http://a.example/early", 1))
    enqueue(table, "a.example.org", bytes([0]), 4, entry("http://a.example.org/", 0))
    key, first = head(table, "a.example") or (b"", entry("", 0))
    assert first.url == "http://a.example/early"
    table.delete(key)
    assert (head(table, "a.example") or (b"", entry("", 0)))[1].url == "http://a.example/late"
    # A host that is a prefix of another host's name never sees the other's URLs.
    assert count_by_host(table) == {"a.example": 2, "a.example.org": 1}
    assert head(table, "b.example") is None
    store.close()


def test_heap_releases_hosts_by_ready_time_and_skips_rescheduled_entries() -> None:
    heap = HostHeap()
    heap.add_queued("slow", 3, ready_at_ms=500)
    heap.add_queued("fast", 1, ready_at_ms=100)
    assert heap.pop_ready(now_ms=50) is None
    assert heap.pop_ready(now_ms=100) == "fast"
    assert heap.pop_ready(now_ms=100) is None  # fast is out until rescheduled
    heap.schedule("slow", 200)  # moved earlier: the stale entry at 500 is skipped
    assert heap.next_ready_at() == 200
    assert heap.pop_ready(now_ms=1000) == "slow"
    assert heap.pop_ready(now_ms=1000) is None
    heap.remove_queued("fast")
    heap.schedule("fast", 0)  # nothing queued: not scheduled
    assert heap.pop_ready(now_ms=1000) is None
    assert len(heap) == 0


def test_a_first_time_entry_is_the_queued_url_encoded() -> None:
    for crawl_id, url, depth, hops in (
        ("c", "https://a.example/x", 0, 0),
        ("ü", "http://b/é", 7, 3),
    ):
        raw = encode_new_entry(new_entry_head(crawl_id, depth, hops), url)
        assert raw == QueuedUrl(crawl_id, url, depth, redirect_hops=hops).encode()
        assert QueuedUrl.decode(raw) == QueuedUrl(crawl_id, url, depth, redirect_hops=hops)


def test_a_message_s_entries_encoded_at_once_are_each_one_encoded_alone() -> None:
    head = new_entry_head("crawl", 2, 1)
    urls = ["https://a.example/x", "http://b/%C3%A9", "https://a.example/" + "p" * 500]
    assert encode_new_entries(head, urls) == [encode_new_entry(head, url) for url in urls]
    assert encode_new_entries(head, []) == []


def test_an_entry_too_long_for_its_length_field_is_refused() -> None:
    head = new_entry_head("crawl", 0, 0)
    with pytest.raises(ValueError):
        encode_new_entries(head, ["https://a.example/", "https://a.example/" + "x" * 70_000])
