"""max_links across partitions: ledger grants, partition accounts, and the BFS-prefix rule."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier.budget import (
    REMEMBERED_REQUESTS_PER_PARTITION,
    BudgetAccount,
    BudgetLedger,
    blocking_depth,
    depth_ordered,
    lease_depth_limit,
    may_lease_depth,
)
from schemas.budget import BudgetGrant, BudgetRequest
from schemas.seeds import CrawlRequest
from streamcrawl.clock import FakeClock

PARTITIONS = 6


def request(partition: int, request_id: str, wanted: int, crawl_id: str = "c") -> BudgetRequest:
    return BudgetRequest(
        crawl_id=crawl_id, partition=partition, wanted=wanted, request_id=request_id
    )


def test_ledger_never_grants_more_than_is_left() -> None:
    ledger = BudgetLedger("c", max_links=100)
    assert ledger.grant(request(0, "0-0", 64)) == 64
    assert ledger.grant(request(1, "1-0", 64)) == 36
    assert ledger.grant(request(2, "2-0", 1)) == 0
    assert ledger.left == 0
    assert ledger.granted_total == 100


def test_a_redelivered_request_gets_the_same_answer_and_no_second_grant() -> None:
    ledger = BudgetLedger("c", max_links=50)
    assert ledger.grant(request(3, "3-0", 30)) == 30
    assert ledger.grant(request(3, "3-0", 30)) == 30
    assert ledger.grant(request(3, "3-0", 45)) == 30  # same id, whatever it asks now
    assert ledger.granted_total == 30
    assert ledger.grant(request(4, "3-0", 30)) == 20  # ids are per partition
    restored = BudgetLedger.from_bytes(ledger.to_bytes())
    assert restored == ledger
    assert restored.grant(request(3, "3-0", 30)) == 30
    assert restored.granted_total == 50


def test_unlimited_ledger_and_wrong_crawl() -> None:
    ledger = BudgetLedger("c", max_links=-1)
    assert ledger.left is None
    assert ledger.grant(request(0, "0-0", 10**9)) == 10**9
    message = ledger.grant_message(request(0, "0-1", 5))
    assert message == BudgetGrant(crawl_id="c", partition=0, granted=5, request_id="0-1")
    with pytest.raises(ValueError):
        ledger.grant(request(0, "0-2", 1, crawl_id="other"))


def test_ledger_remembers_a_bounded_number_of_answers_per_partition() -> None:
    ledger = BudgetLedger("c", max_links=10**6)
    for sequence in range(REMEMBERED_REQUESTS_PER_PARTITION + 10):
        ledger.grant(request(0, f"0-{sequence}", 1))
        ledger.grant(request(1, f"1-{sequence}", 1))
    assert len(ledger.recent[0]) == REMEMBERED_REQUESTS_PER_PARTITION
    assert "0-9" not in ledger.recent[0]
    assert "0-10" in ledger.recent[0]


def test_account_asks_below_low_water_for_what_it_can_use() -> None:
    clock = FakeClock()
    account = BudgetAccount("c", partition=2)
    assert account.request(0, clock.now_ms()) is None  # nothing waiting
    first = account.request(10, clock.now_ms(), chunk=64)
    assert first == request(2, "2-0", 10)
    assert account.request(10, clock.now_ms()) is None  # one outstanding at a time
    assert account.apply(BudgetGrant(crawl_id="c", partition=2, granted=10, request_id="2-0")) == 10
    assert account.available == 10
    assert not account.wants_more(500, low_water=10)  # at the low-water mark
    assert account.try_consume(3)
    assert account.wants_more(500, low_water=10)
    second = account.request(500, clock.now_ms(), low_water=10, chunk=64)
    assert second is not None
    assert (second.request_id, second.wanted) == ("2-1", 64)
    assert not account.try_consume(8)
    assert (account.available, account.consumed) == (7, 3)


def test_account_resends_the_same_id_and_ignores_duplicate_grants() -> None:
    clock = FakeClock()
    account = BudgetAccount("c", partition=0)
    sent = account.request(5, clock.now_ms())
    assert sent is not None
    clock.advance(29.999)
    assert account.resend(clock.now_ms(), after_ms=30_000) is None
    clock.advance(0.001)
    assert account.resend(clock.now_ms(), after_ms=30_000) == sent
    assert account.resend(clock.now_ms(), after_ms=30_000) is None  # the timer restarted
    grant = BudgetGrant(crawl_id="c", partition=0, granted=5, request_id=sent.request_id)
    assert account.apply(grant) == 5
    assert account.apply(grant) == 0
    assert account.apply(grant.model_copy(update={"request_id": "0-99"})) == 0
    assert account.apply(grant.model_copy(update={"partition": 1})) == 0
    assert account.available == 5


def test_only_a_zero_grant_marks_the_budget_spent() -> None:
    account = BudgetAccount("c", partition=0)
    sent = account.request(50, 0)
    assert sent is not None
    account.apply(BudgetGrant(crawl_id="c", partition=0, granted=7, request_id=sent.request_id))
    assert not account.exhausted  # partial: perhaps an earlier incarnation asked for less
    again = account.request(50, 0)
    assert again is not None
    account.apply(BudgetGrant(crawl_id="c", partition=0, granted=0, request_id=again.request_id))
    assert account.exhausted
    assert account.request(50, 0) is None
    restored = BudgetAccount.from_bytes(account.to_bytes())
    assert restored == account


@pytest.mark.parametrize(
    ("depth", "lowest", "allowed"),
    [(0, None, True), (0, 0, True), (1, 0, False), (1, 1, True), (3, 2, False), (2, 5, True)],
)
def test_bfs_prefix_rule(depth: int, lowest: int | None, allowed: bool) -> None:
    assert may_lease_depth(depth, lowest) is allowed


@pytest.mark.parametrize(
    ("options", "ordered"),
    [
        ({"max_depth": 3}, True),
        ({"max_depth": -1}, False),
        ({"max_depth": -1, "max_links": 10}, True),
        ({"max_depth": 3, "priority": "score"}, False),
        ({"max_depth": 3, "priority": "score", "max_links": 10}, True),
    ],
)
def test_depth_ordered_crawls(options: dict[str, object], ordered: bool) -> None:
    request = CrawlRequest.model_validate({"seeds": ["https://a.example/"], **options})
    assert depth_ordered(request) is ordered


@pytest.mark.parametrize(
    ("views", "limit"),
    [
        ([], 0),
        ([{"unfinished_d1": 3}], 0),  # the seeds' announcement is not in view yet
        ([{"announced_d0": 1}, {"admitted_d0": 1, "unfinished_d0": 1}], 0),
        ([{"announced_d0": 1, "announced_d1": 2}, {"admitted_d0": 1, "admitted_d1": 1}], 1),
        ([{"announced_d0": 1, "unfinished_d2": 4}, {"admitted_d0": 1, "unfinished_d3": 1}], 2),
        ([{"announced_d0": 1, "announced_d1": 2}, {"admitted_d0": 1, "admitted_d1": 2}], None),
    ],
)
def test_lease_depth_limit_is_the_lowest_depth_unfinished_or_travelling(
    views: list[dict[str, int]], limit: int | None
) -> None:
    assert lease_depth_limit(views) == limit


def test_six_partitions_with_enough_urls_spend_exactly_max_links() -> None:
    ledger = BudgetLedger("c", max_links=100)
    accounts = [BudgetAccount("c", p) for p in range(PARTITIONS)]
    waiting = [40] * PARTITIONS
    for _ in range(100):
        for p, account in enumerate(accounts):
            sent = account.request(waiting[p], 0, chunk=8, low_water=4)
            if sent is not None:
                account.apply(ledger.grant_message(sent))
            spend = min(account.available, waiting[p])
            assert account.try_consume(spend)
            waiting[p] -= spend
    assert sum(account.consumed for account in accounts) == 100
    assert all(account.exhausted or waiting[p] == 0 for p, account in enumerate(accounts))


ACTIONS = ("ask", "resend", "owner", "owner_again", "deliver", "deliver_again", "spend", "crash")


@settings(deadline=None, max_examples=300)
@given(
    max_links=st.integers(0, 300),
    steps=st.lists(
        st.tuples(st.sampled_from(ACTIONS), st.integers(0, PARTITIONS - 1), st.integers(0, 1000)),
        max_size=300,
    ),
)
def test_grants_never_exceed_max_links_under_any_interleaving(
    max_links: int, steps: list[tuple[str, int, int]]
) -> None:
    """Requests and grants delivered late, twice or out of order; partitions crash back to their
    last persisted state, which is how at-least-once redelivery looks to the owner."""
    clock = FakeClock()
    ledger = BudgetLedger("c", max_links=max_links)
    accounts = [BudgetAccount("c", p) for p in range(PARTITIONS)]
    persisted = [account.to_bytes() for account in accounts]
    to_owner: list[BudgetRequest] = []
    to_partitions: list[BudgetGrant] = []
    for action, p, number in steps:
        clock.advance_ms(number)
        account = accounts[p]
        if action == "ask":
            sent = account.request(number % 200, clock.now_ms(), chunk=1 + number % 50)
            to_owner.extend([sent] if sent else [])
        elif action == "resend":
            sent = account.resend(clock.now_ms(), after_ms=500)
            to_owner.extend([sent] if sent else [])
        elif action in ("owner", "owner_again") and to_owner:
            index = number % len(to_owner)
            message = to_owner[index] if action == "owner_again" else to_owner.pop(index)
            ledger = BudgetLedger.from_bytes(ledger.to_bytes())
            to_partitions.append(ledger.grant_message(message))
        elif action in ("deliver", "deliver_again") and to_partitions:
            index = number % len(to_partitions)
            grant = to_partitions[index] if action == "deliver_again" else to_partitions.pop(index)
            accounts[grant.partition].apply(grant)
            persisted[grant.partition] = accounts[grant.partition].to_bytes()
        elif action == "spend":
            account.try_consume(number % 7)
        elif action == "crash":
            accounts[p] = BudgetAccount.from_bytes(persisted[p])
        held = sum(account.available + account.consumed for account in accounts)
        assert held <= ledger.granted_total <= max_links


@settings(deadline=None, max_examples=200)
@given(
    max_links=st.integers(0, 500),
    requests=st.lists(
        st.tuples(st.integers(0, PARTITIONS - 1), st.integers(0, 5), st.integers(1, 100)),
        max_size=200,
    ),
)
def test_ledger_answers_are_stable_per_request_id(
    max_links: int, requests: list[tuple[int, int, int]]
) -> None:
    ledger = BudgetLedger("c", max_links=max_links)
    answers: dict[tuple[int, str], int] = {}
    for partition, sequence, wanted in requests:
        request_id = f"{partition}-{sequence}"
        granted = ledger.grant(request(partition, request_id, wanted))
        assert answers.setdefault((partition, request_id), granted) == granted
    assert ledger.granted_total == sum(answers.values()) <= max_links


def test_random_partition_loads_are_reproducible_with_a_seeded_rng() -> None:
    rng = random.Random(11)
    ledger = BudgetLedger("c", max_links=1000)
    accounts = [BudgetAccount("c", p) for p in range(PARTITIONS)]
    for _ in range(2000):
        account = accounts[rng.randrange(PARTITIONS)]
        sent = account.request(rng.randrange(1, 100), 0, chunk=rng.randrange(1, 64))
        if sent is not None and rng.random() < 0.9:
            account.apply(ledger.grant_message(sent))
        account.try_consume(rng.randrange(0, 10))
    assert sum(a.available + a.consumed for a in accounts) == ledger.granted_total <= 1000


def deep(partition: int, request_id: str, wanted: int, depth: int) -> BudgetRequest:
    return BudgetRequest(
        crawl_id="c", partition=partition, wanted=wanted, request_id=request_id, depth=depth
    )


def test_deeper_requests_wait_until_their_depth_opens_then_lowest_depth_first() -> None:
    ledger = BudgetLedger("c", max_links=5)
    assert [g.granted for g in ledger.receive(deep(0, "0-0", 1, depth=0))] == [1]
    assert ledger.receive(deep(0, "0-1", 3, depth=2)) == []  # held: depth 1 is not finished
    assert ledger.receive(deep(1, "1-0", 2, depth=1)) == []
    assert ledger.receive(deep(1, "1-0", 2, depth=1)) == []  # a resend while held: still held
    grants = ledger.open(1)
    assert [(g.partition, g.granted) for g in grants] == [(1, 2)]
    assert [h.request_id for h in ledger.held] == ["0-1"]
    restored = BudgetLedger.from_bytes(ledger.to_bytes())
    assert restored == ledger
    assert [(g.partition, g.granted) for g in restored.open(2)] == [(0, 2)]
    assert restored.left == 0 and not restored.held
    assert [g.granted for g in restored.receive(deep(1, "1-1", 1, depth=3))] == [0]  # spent


def test_a_newer_request_replaces_the_partitions_held_one_and_spending_refuses_the_rest() -> None:
    ledger = BudgetLedger("c", max_links=2)
    assert ledger.receive(deep(0, "0-0", 4, depth=2)) == []
    assert ledger.receive(deep(2, "2-0", 1, depth=3)) == []
    assert ledger.receive(deep(0, "0-1", 2, depth=1)) == []  # replaces 0-0
    assert [h.request_id for h in ledger.held] == ["2-0", "0-1"]
    grants = ledger.open(1)
    assert [(g.request_id, g.granted) for g in grants] == [("0-1", 2), ("2-0", 0)]
    assert not ledger.held


def test_an_account_replaces_a_deeper_request_and_keeps_its_late_grant() -> None:
    account = BudgetAccount("c", partition=0)
    first = account.request(waiting=3, now_ms=0, depth=2)
    assert first is not None and first.depth == 2
    assert account.request(waiting=3, now_ms=0, depth=2) is None  # one outstanding per depth
    second = account.request(waiting=1, now_ms=0, depth=1)
    assert second is not None and second.depth == 1 and second.request_id != first.request_id
    late = BudgetGrant(crawl_id="c", partition=0, granted=2, request_id=first.request_id)
    assert account.apply(late) == 2
    assert account.apply(late) == 0  # counted once
    assert account.pending_id == second.request_id
    assert BudgetAccount.from_bytes(account.to_bytes()) == account


def test_the_blocking_depth_of_a_progress_view() -> None:
    assert blocking_depth([]) is None
    assert blocking_depth([{"announced_d0": 1, "admitted_d0": 1}]) is None
    view = [
        {"announced_d0": 1, "admitted_d0": 1, "announced_d1": 2, "admitted_d1": 1},
        {"unfinished_d2": 3, "admitted_d1": 0, "queued": 9},
    ]
    assert blocking_depth(view) == 1
    view[1]["admitted_d1"] = 1
    assert blocking_depth(view) == 2
