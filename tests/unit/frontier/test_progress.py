"""Done detection as a pure function over progress snapshots, and the book that feeds it."""

from __future__ import annotations

from frontier.progress import ProgressBook, crawl_done
from schemas.progress import PartitionProgress

SETTLED = {
    "queued": 0,
    "leased": 0,
    "delayed": 0,
    "reports_expected": 3,
    "reports_admitted": 3,
    "discovered_messages_announced": 4,
    "discovered_messages_admitted": 4,
}


def snapshot(partition: int, number: int, **counters: int) -> PartitionProgress:
    return PartitionProgress(
        crawl_id="c", partition=partition, snapshot=number, at=number, counters=counters
    )


def two(partition: int, **counters: int) -> list[PartitionProgress]:
    return [snapshot(partition, 1, **counters), snapshot(partition, 2, **counters)]


def test_done_needs_two_settled_snapshots_of_every_reporting_partition() -> None:
    assert crawl_done({0: two(0, **SETTLED)}, owner_partition=0)
    assert not crawl_done({0: two(0, **SETTLED)[1:]}, owner_partition=0)
    assert not crawl_done({}, owner_partition=0)
    assert not crawl_done({1: two(1, **SETTLED)}, owner_partition=0)  # the owner never reported
    busy = [snapshot(0, 1, **{**SETTLED, "leased": 1}), snapshot(0, 2, **SETTLED)]
    assert not crawl_done({0: busy}, owner_partition=0)


def test_sums_across_partitions_must_match() -> None:
    sender = {**SETTLED, "discovered_messages_announced": 5}
    receiver = {**SETTLED, "discovered_messages_announced": 0, "discovered_messages_admitted": 0}
    assert not crawl_done({0: two(0, **sender), 1: two(1, **receiver)}, owner_partition=0)
    receiver["discovered_messages_admitted"] = 1
    assert crawl_done({0: two(0, **sender), 1: two(1, **receiver)}, owner_partition=0)
    waiting_report = {**SETTLED, "reports_waiting": 1}
    assert not crawl_done({0: two(0, **waiting_report)}, owner_partition=0)
    # A page's report arriving twice (reports_admitted 4) cannot stand for another one waiting.
    repeated = {**SETTLED, "reports_expected": 4, "reports_admitted": 4, "reports_waiting": 1}
    assert not crawl_done({0: two(0, **repeated)}, owner_partition=0)
    recrawling = {**SETTLED, "recrawl_scheduled": 1}
    assert not crawl_done({0: two(0, **recrawling)}, owner_partition=0)


def test_a_spent_budget_is_done_with_urls_still_queued() -> None:
    owner = {**SETTLED, "budget_granted": 5, "queued": 2, "budget_available": 0}
    assert crawl_done({0: two(0, **owner)}, max_links=5, owner_partition=0)
    assert not crawl_done({0: two(0, **owner)}, max_links=6, owner_partition=0)
    assert not crawl_done({0: two(0, **owner)}, owner_partition=0)  # unlimited: never spent
    with_budget_left = {**owner, "budget_available": 1}
    assert not crawl_done({0: two(0, **with_budget_left)}, max_links=5, owner_partition=0)


def test_book_keeps_the_latest_two_by_snapshot_number() -> None:
    book = ProgressBook()
    for number in (5, 3, 7, 7, 9):
        book.record(snapshot(0, number))
    assert [s.snapshot for s in book.snapshots("c")[0]] == [7, 9]
    assert book.snapshots("other") == {}
