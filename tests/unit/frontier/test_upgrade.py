"""A partition written by an earlier version (one queue per host, a paused crawl's URLs shelved) is
moved to per-crawl queues in bounded batches, and its crawls finish as if nothing happened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from frontier.config import FrontierConfig
from frontier.queues import crawl_of, host_of, is_legacy_key, release_order
from frontier.records import QUEUE, SEPARATOR, SHELVED, VISITED, VisitedRecord
from schemas.fetch import FetchRequest
from schemas.seeds import CrawlRequest
from streamcrawl.state import PartitionStore
from tests.unit.frontier.simulation import Simulation, Site

A = "https://a.example"
SITE: Site = {f"{A}/": [f"/{n}" for n in range(8)]}


def legacy(key: bytes) -> bytes:
    """A queue key in an earlier version's layout: host, then priority and sequence."""
    return host_of(key).encode() + SEPARATOR + release_order(key)


def downgrade(store: PartitionStore, paused: str) -> None:
    """Rewrite the partition as an earlier version left it: every queue key in the one queue of
    its host, the paused crawl's entries in `shelved`, visited records pointing at those keys (a
    leased URL's too)."""
    changes: dict[str, dict[bytes, bytes | None]] = {QUEUE: {}, SHELVED: {}, VISITED: {}}
    for key, raw in store.scan(QUEUE):
        changes[QUEUE][key] = None
        if crawl_of(key) == paused:
            changes[SHELVED][paused.encode() + SEPARATOR + legacy(key)] = raw
        else:
            changes[QUEUE][legacy(key)] = raw
    for key, raw in store.scan(VISITED):
        record = VisitedRecord.decode(raw)
        if record.queue_key is not None:
            record.queue_key = legacy(bytes.fromhex(record.queue_key)).hex()
            changes[VISITED][key] = record.encode()
    store.write(changes, "changelog", None)


def flaky_once(request: FetchRequest, attempt: int) -> dict[str, Any] | None:
    if request.url == f"{A}/0" and attempt == 1:
        return {"kind": "retryable", "status": 503, "page_sent": False}
    return None


def two_crawls_one_paused(sim: Simulation) -> list[FetchRequest]:
    """Crawl c with two URLs leased and six queued, crawl p paused with four queued, one host."""
    sim.start(CrawlRequest(crawl_id="c", seeds=[f"{A}/"], politeness_delay_ms=0))
    sim.run()
    [seed] = sim.held_fetches
    sim.fetch(seed)
    sim.run()
    sim.start(CrawlRequest(crawl_id="p", seeds=[f"{A}/p/{n}" for n in range(4)]))
    sim.run()
    sim.command("p", "pause")
    sim.run()
    leased = [request for request in sim.held_fetches if request.crawl_id == "c"][1:]
    assert [request.url for request in leased] == [f"{A}/0", f"{A}/1"]
    assert sim.total("c", "queued") == 6
    assert sim.total("p", "queued") == 4
    return leased


def assert_moved(store: PartitionStore) -> None:
    """Nothing left in an earlier version's layout, and every queued URL's record names its
    entry."""
    assert list(store.scan(SHELVED)) == []
    queue = dict(store.scan(QUEUE))
    assert not any(is_legacy_key(key) for key in queue)
    assert sorted(crawl_of(key) for key in queue) == ["c"] * 6 + ["p"] * 4
    queued_keys = {
        bytes.fromhex(record.queue_key)
        for record in map(VisitedRecord.decode, dict(store.scan(VISITED)).values())
        if record.state == "queued" and record.queue_key is not None
    }
    assert queued_keys == set(queue)


def test_an_earlier_version_s_queues_move_to_per_crawl_queues(tmp_path: Path) -> None:
    config = FrontierConfig(timer_batch=3, lease_timeout_ms=3_600_000)
    sim = Simulation(tmp_path, site=SITE, config=config, auto_fetch=False, script=flaky_once)
    leased = two_crawls_one_paused(sim)
    downgrade(sim.stores[0], paused="p")
    sim.restart(0)
    memory = sim.handlers[0].memory[0]
    assert memory.legacy_hosts == {"a.example": b""}
    assert memory.legacy_shelved == b""
    assert memory.heap.queued == {"a.example": 6}  # the shelved ones were out of the count

    fetches_before = len(sim.fetches)
    cursors: list[tuple[bytes | None, bytes | None]] = []
    while memory.legacy_hosts or memory.legacy_shelved is not None:
        assert len(sim.fetches) == fetches_before, "a host is released before it is moved"
        sim.clock.advance_ms(1_000)
        sim.tick_all()
        memory = sim.handlers[0].memory[0]
        cursors.append((memory.legacy_shelved, memory.legacy_hosts.get("a.example")))
        assert len(cursors) < 10
    # 10 entries, 3 a tick, each batch from where the last one stopped: the 4th shelved entry,
    # then the 3rd and 6th of the host's queue.
    assert len(cursors) == 4
    (shelved_next, _), (done, host_next), (_, host_later), last = cursors
    assert shelved_next is not None and shelved_next.startswith(b"p\x00a.example\x00")
    assert done is None and host_next is not None and is_legacy_key(host_next)
    assert host_later is not None and host_later > host_next
    assert last == (None, None)
    assert_moved(sim.stores[0])
    assert memory.heap.queued == {"a.example": 10}

    sim.auto_fetch = True
    for request in leased:
        sim.fetch(request)  # /0 fails once: back in the queue, at its old place in the new layout
    sim.settle(until=lambda: sim.status("c") == "done")
    assert sim.status("c") == "done"
    assert sorted(set(sim.fetched_urls("c"))) == sorted([f"{A}/", *(f"{A}/{n}" for n in range(8))])
    assert sim.total("c", "retried") == 1
    assert sim.fetched_urls("p") == []

    sim.command("p", "resume")
    sim.settle(until=lambda: sim.status("p") == "done")
    assert sorted(sim.fetched_urls("p")) == [f"{A}/p/{n}" for n in range(4)]
    assert list(sim.stores[0].scan(QUEUE)) == []
    sim.close()
