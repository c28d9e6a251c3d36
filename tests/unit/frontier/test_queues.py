"""Host queues on a real RocksDB store: release order, heads, and the host heap."""

from pathlib import Path

import pytest

from frontier.queues import (
    HostHeap,
    QueueCensus,
    QueuedUrl,
    crawl_of,
    crawl_queue_prefix,
    crawl_queues,
    crawls_on_host,
    encode_new_entries,
    encode_new_entry,
    enqueue,
    host_of,
    is_legacy_key,
    new_entry_head,
    queue_key,
    release_order,
    upgraded_key,
)
from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Table, Transaction


def queue_table(tmp_path: Path) -> tuple[PartitionStore, Table]:
    store = PartitionStore(tmp_path / "p", ("queue",), StoreOptions(StateSettings()))
    return store, Table(Transaction(store), "queue", None)


def entry(url: str, depth: int, crawl_id: str = "c") -> QueuedUrl:
    return QueuedUrl(crawl_id=crawl_id, url=url, depth=depth)


def urls(table: Table, prefix: bytes) -> list[str]:
    return [QueuedUrl.decode(raw).url for _, raw in table.scan(prefix)]


def test_a_crawl_s_queue_on_a_host_follows_priority_then_arrival(tmp_path: Path) -> None:
    store, table = queue_table(tmp_path)
    enqueue(table, "a.example", bytes([2]), 1, entry("http://a.example/deep", 2))
    enqueue(table, "a.example", bytes([1]), 3, entry("http://a.example/late", 1))
    enqueue(table, "a.example", bytes([1]), 2, entry("http://a.example/early", 1))
    enqueue(table, "a.example", bytes([0]), 5, entry("http://a.example/other", 0, "c2"))
    enqueue(table, "a.example.org", bytes([0]), 4, entry("http://a.example.org/", 0))
    assert urls(table, crawl_queue_prefix("a.example", "c")) == [
        "http://a.example/early",
        "http://a.example/late",
        "http://a.example/deep",
    ]
    # A host that is a prefix of another host's name never sees the other's URLs, nor does a
    # crawl whose id is a prefix of another's.
    assert list(crawls_on_host(table, "a.example")) == ["c", "c2"]
    assert list(crawls_on_host(table, "a.example.org")) == ["c"]
    assert list(crawls_on_host(table, "b.example")) == []
    census = QueueCensus.of(table)
    assert census.queued == {"a.example": 4, "a.example.org": 1}
    assert census.legacy_hosts == set()
    store.close()


def test_each_crawl_s_queue_is_read_from_its_head_and_stops_at_its_end(tmp_path: Path) -> None:
    store, table = queue_table(tmp_path)
    for n, crawl_id in enumerate(["c", "c2", "c", "d", "c2"]):
        enqueue(table, "a.example", bytes([0]), n, entry(f"http://a.example/{n}", 0, crawl_id))
    enqueue(table, "a.example.org", bytes([0]), 9, entry("http://a.example.org/", 0))
    queues = list(crawl_queues(table, "a.example"))  # read after every crawl was found
    assert [crawl_id for crawl_id, _ in queues] == ["c", "c2", "d"]
    assert [[QueuedUrl.decode(raw).url for _, raw in entries] for _, entries in queues] == [
        ["http://a.example/0", "http://a.example/2"],
        ["http://a.example/1", "http://a.example/4"],
        ["http://a.example/3"],
    ]
    store.close()


def test_keys_of_all_crawls_of_a_host_sort_by_release_order() -> None:
    keys = [
        queue_key("h", "zeta", bytes([1]), 7),
        queue_key("h", "alpha", bytes([2]), 1),
        queue_key("h", "alpha", bytes([1]), 9),
    ]
    assert sorted(keys, key=release_order) == [keys[0], keys[2], keys[1]]
    assert [crawl_of(key) for key in keys] == ["zeta", "alpha", "alpha"]
    assert {host_of(key) for key in keys} == {"h"}


def test_an_earlier_version_s_key_is_told_apart_and_moved_to_its_crawl_s_queue(
    tmp_path: Path,
) -> None:
    # The one queue per host of earlier versions: host NUL priority (first byte below 0x04).
    legacy = b"a.example\x00" + bytes([0, 1, 0, 0, 0, 0, 0, 0]) + (7).to_bytes(8, "big")
    current = queue_key("a.example", "c", bytes([0, 1, 0, 0, 0, 0, 0, 0]), 7)
    assert is_legacy_key(legacy) and not is_legacy_key(current)
    assert upgraded_key(legacy, "c") == current
    assert upgraded_key(current, "c") == current
    store, table = queue_table(tmp_path)
    table.put(legacy, entry("http://a.example/old", 1).encode())
    enqueue(table, "b.example", bytes([0]), 8, entry("http://b.example/", 0))
    census = QueueCensus.of(table)
    assert census.queued == {"a.example": 1, "b.example": 1}
    assert census.legacy_hosts == {"a.example"}
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
