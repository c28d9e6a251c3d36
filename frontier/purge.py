"""Purging finished crawls: a crawl done or cancelled for longer than the retention leaves no state.

At most every ``purge_interval_ms`` a partition looks at the crawls it holds records of (the keys of
`crawl` and `owned`, a few per crawl) and picks those whose directory state is ``done`` or
``cancelled`` with ``updated_at`` older than ``finished_crawl_retention_ms``; on the owner the
stored state must say so too. A crawl that is active or paused, or that the directory does not know
(its table may still be loading), is never purged, and the check is repeated on every tick that
works on the crawl. Each tick then reads or deletes about ``purge_batch`` keys in all (a URL's
visit may end a few keys past it), crawl after crawl, in these steps:

1. `pending` messages, under the prefix ``crawl_id NUL``;
2. `visited`, under ``crawl_id NUL``. The URL's visited record indexes the crawl's keys in the
   tables keyed by something else, so none of those is scanned and a purge costs what the crawl
   holds, not what other crawls hold: a ``queued`` URL's ``queue_key`` is its `queue` entry
   (deleted, and the host's count in the HostHeap lowered), the host in that key names the crawl's
   `host_pages` entry, and the record's ``lease_id`` (the URL's last lease) names its open lease
   (with its `deadlines` entry; the host gets its in-flight slot back);
3. `reports` and `received`, under ``crawl_id NUL``;
4. `delayed`, keyed by due time, is walked whole, and only when the crawl record's gauges say the
   crawl has entries there (a cancelled crawl with retries or recrawls still waiting; a done crawl
   has none);
5. on a later tick, once the walks are over: the owner's `owned` and `ledger` records, the crawl's
   `tally`, then the crawl record. The crawl record goes last because it is how a search finds the
   crawl: a purge cut short by a crash or a rebalance (its progress is kept in memory only) starts
   again at the next search, and so does one for a crawl that a very late message brought back. A
   URL admitted while the walks ran (the crawl's ``admitted`` counter moved) restarts them.

`Table.scan` seeks to a prefix, never to a key, so walks resume through :class:`PrefixWalk`.

The Bloom filter in front of `visited` (`PartitionMemory.seen`) cannot forget keys: those of a
purged crawl stay in it as false positives, each costing one RocksDB read, until the partition is
next opened and the filter rebuilt from what `visited` then holds. Each crawl purged from a
partition is logged and counted in `frontier.handler.FrontierHandler.purged`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from frontier.crawlstate import owned_state
from frontier.queues import QueuedUrl, host_of
from frontier.records import (
    CRAWL,
    DEADLINES,
    DELAYED,
    HOST_PAGES,
    LEASES,
    LEDGER,
    OWNED,
    PENDING,
    QUEUE,
    RECEIVED,
    REPORTS,
    TALLY,
    VISITED,
    CrawlRecord,
    DelayedEntry,
    LeaseRecord,
    VisitedRecord,
    crawl_prefix,
    deadline_key,
    decode_tally,
    host_pages_key,
    pending_prefix,
    visited_prefix,
)
from frontier.session import PartitionSession
from schemas.crawls import CrawlState
from streamcrawl.state import Table

log = logging.getLogger(__name__)

FINISHED = ("done", "cancelled")
DELAYED_GAUGES = {"retry": "delayed", "recrawl": "recrawl_scheduled"}
"""The crawl-record gauge counting each kind of `delayed` entry."""


class Budget:
    """Keys one tick may still read or delete."""

    def __init__(self, keys: int) -> None:
        self.left = keys

    def spend(self, keys: int = 1) -> None:
        self.left -= keys

    @property
    def spent(self) -> bool:
        return self.left <= 0


@dataclass
class PrefixWalk:
    """The keys under a prefix in key order, visited over as many calls as the budget needs.

    The cursor is a stack of prefixes still to read (next on top). A prefix left part-read is
    replaced by its one-byte-longer children from the one holding the first unread key on: that
    child is read again from its start (visits must be idempotent), the later ones are new. So a
    walk resumes near where it stopped, and RocksDB need not skip again every tombstone the walk
    left behind it. Each prefix taken reads at least one key, so every call makes progress, even
    on a budget of one; a call adds at most 256 prefixes to the stack.
    """

    todo: list[bytes]

    @classmethod
    def under(cls, prefix: bytes) -> PrefixWalk:
        return cls([prefix])

    @classmethod
    def nothing(cls) -> PrefixWalk:
        return cls([])

    @property
    def done(self) -> bool:
        return not self.todo

    def step(self, table: Table, budget: Budget, visit: Callable[[bytes, bytes], None]) -> None:
        """Visit keys in order until the walk ends or the budget is spent (one seek costs one)."""
        while self.todo and not budget.spent:
            prefix = self.todo.pop()
            budget.spend()
            first = True
            for key, value in table.scan(prefix):
                if budget.spent and not first:
                    self._resume_at(prefix, key)
                    break
                first = False
                budget.spend()
                visit(key, value)

    def _resume_at(self, prefix: bytes, key: bytes) -> None:
        """Stack the keys of ``prefix`` from ``key`` on; ``key`` is longer than ``prefix``, since
        a prefix is the first key it holds and the first key was read."""
        child = key[len(prefix)]
        self.todo.extend(prefix + bytes((byte,)) for byte in range(255, child, -1))
        self.todo.append(prefix + bytes((child,)))


@dataclass
class CrawlPurge:
    """How far the purge of one crawl on one partition got."""

    crawl_id: str
    admitted: int
    """The crawl record's ``admitted`` counter when the walks began."""
    host_pages: bool
    pending: PrefixWalk
    visited: PrefixWalk
    reports: PrefixWalk
    received: PrefixWalk
    delayed: PrefixWalk
    hosts_cleared: set[str] = field(default_factory=set)
    deleted: int = 0

    @classmethod
    def start(cls, session: PartitionSession, crawl: CrawlState) -> CrawlPurge:
        crawl_id = crawl.crawl_id
        counters = stored_counters(session, crawl_id)
        waiting = sum(counters.get(gauge, 0) for gauge in DELAYED_GAUGES.values())
        return cls(
            crawl_id=crawl_id,
            admitted=counters.get("admitted", 0),
            host_pages=crawl.request.max_pages_per_host != -1,
            pending=PrefixWalk.under(pending_prefix(crawl_id)),
            visited=PrefixWalk.under(visited_prefix(crawl_id)),
            reports=PrefixWalk.under(crawl_prefix(crawl_id)),
            received=PrefixWalk.under(crawl_prefix(crawl_id)),
            delayed=PrefixWalk.under(b"") if waiting > 0 else PrefixWalk.nothing(),
        )

    @property
    def walked(self) -> bool:
        walks = (self.pending, self.visited, self.reports, self.received, self.delayed)
        return all(walk.done for walk in walks)

    def delete(self, table: Table, key: bytes, budget: Budget) -> None:
        table.delete(key)
        budget.spend()
        self.deleted += 1


@dataclass
class PurgeWork:
    """One partition's purging, kept in memory: when it last searched, and the crawls it found."""

    searched_at: int | None = None
    crawls: dict[str, CrawlPurge] = field(default_factory=dict)


def purge_finished_crawls(session: PartitionSession, work: PurgeWork) -> int:
    """Tick: search when due, then purge within the budget; returns the crawls purged."""
    now = session.now_ms
    if work.searched_at is None or now - work.searched_at >= session.config.purge_interval_ms:
        work.searched_at = now
        for crawl in find_expired(session):
            if crawl.crawl_id not in work.crawls:
                work.crawls[crawl.crawl_id] = CrawlPurge.start(session, crawl)
    budget = Budget(session.config.purge_batch)
    purged = 0
    for crawl_id, purge in list(work.crawls.items()):
        if budget.spent and not purge.walked:
            continue
        state = expired_state(session, crawl_id)
        if state is None:
            del work.crawls[crawl_id]
        elif not purge.walked:
            walk(session, purge, budget)
        elif finish(session, purge):
            del work.crawls[crawl_id]
            purged += 1
        else:
            work.crawls[crawl_id] = CrawlPurge.start(session, state)
    return purged


def find_expired(session: PartitionSession) -> list[CrawlState]:
    """The crawls this partition holds records of that finished longer than the retention ago."""
    crawl_ids = {key.decode() for key, _ in session.table(CRAWL).scan()}
    crawl_ids.update(key.decode() for key, _ in session.table(OWNED).scan())
    expired = (expired_state(session, crawl_id) for crawl_id in sorted(crawl_ids))
    return [crawl for crawl in expired if crawl is not None]


def expired_state(session: PartitionSession, crawl_id: str) -> CrawlState | None:
    """The crawl's directory state if it may be purged (see the module docstring), else None."""
    cutoff = session.now_ms - session.config.finished_crawl_retention_ms
    crawl = session.crawl_state(crawl_id)
    if crawl is None or not finished_before(crawl, cutoff):
        return None
    owned = owned_state(session, crawl_id)
    if owned is not None and not finished_before(owned, cutoff):
        return None
    return crawl


def finished_before(state: CrawlState, cutoff_ms: int) -> bool:
    return state.status in FINISHED and state.updated_at < cutoff_ms


def stored_counters(session: PartitionSession, crawl_id: str) -> dict[str, int]:
    """The crawl's counters as stored (record and tally), without caching them in the session."""
    raw = session.table(CRAWL).get(crawl_id.encode())
    counters = {} if raw is None else CrawlRecord.decode(raw).counters
    for name, value in decode_tally(session.table(TALLY).get(crawl_id.encode())).items():
        counters[name] = counters.get(name, 0) + value
    return counters


def walk(session: PartitionSession, purge: CrawlPurge, budget: Budget) -> None:
    """Steps 1 to 4 of the module docstring, as far as the budget goes."""
    pending = session.table(PENDING)
    purge.pending.step(pending, budget, lambda key, _: purge.delete(pending, key, budget))
    if purge.pending.done:
        session.memory.pending_crawls.discard(purge.crawl_id)
    purge.visited.step(
        session.table(VISITED), budget, lambda key, raw: purge_url(session, purge, budget, key, raw)
    )
    for walked, name in ((purge.reports, REPORTS), (purge.received, RECEIVED)):
        table = session.table(name)
        walked.step(table, budget, functools.partial(_delete_key, purge, table, budget))
    purge.delayed.step(
        session.table(DELAYED),
        budget,
        lambda key, raw: purge_delayed(session, purge, budget, key, raw),
    )


def _delete_key(purge: CrawlPurge, table: Table, budget: Budget, key: bytes, _: bytes) -> None:
    purge.delete(table, key, budget)


def purge_url(
    session: PartitionSession, purge: CrawlPurge, budget: Budget, key: bytes, raw: bytes
) -> None:
    """Delete a visited record and the keys it indexes."""
    crawl_id = purge.crawl_id
    visited = VisitedRecord.decode(raw)
    if visited.queue_key is not None:
        queue_key = bytes.fromhex(visited.queue_key)
        host = host_of(queue_key)
        queue = session.table(QUEUE)
        queued = queue.get(queue_key) if visited.state == "queued" else None
        if queued is not None and QueuedUrl.decode(queued).crawl_id == crawl_id:
            purge.delete(queue, queue_key, budget)
            session.dequeued(host)
        if purge.host_pages and host not in purge.hosts_cleared:
            purge.hosts_cleared.add(host)
            host_pages = session.table(HOST_PAGES)
            pages_key = host_pages_key(host, crawl_id)
            if host_pages.get(pages_key) is not None:
                purge.delete(host_pages, pages_key, budget)
    if visited.lease_id is not None:
        purge_lease(session, purge, budget, visited.lease_id)
    purge.delete(session.table(VISITED), key, budget)


def purge_lease(
    session: PartitionSession, purge: CrawlPurge, budget: Budget, lease_id: str
) -> None:
    """Close the URL's lease without an outcome."""
    key = lease_id.encode()
    leases = session.table(LEASES)
    raw = leases.get(key)
    if raw is not None:
        lease = LeaseRecord.decode(raw)
        if lease.crawl_id == purge.crawl_id:
            purge.delete(leases, key, budget)
            deadline = deadline_key(lease.deadline_ms, lease_id)
            purge.delete(session.table(DEADLINES), deadline, budget)
            host = session.host(lease.host)
            host.in_flight = max(0, host.in_flight - 1)
            session.wake(lease.host)


def purge_delayed(
    session: PartitionSession, purge: CrawlPurge, budget: Budget, key: bytes, raw: bytes
) -> None:
    """Delete the crawl's retry or recrawl entry, keeping its gauge true (a restarted purge
    then knows whether to walk `delayed` again)."""
    entry = DelayedEntry.decode(raw)
    if entry.crawl_id != purge.crawl_id:
        return
    purge.delete(session.table(DELAYED), key, budget)
    counters = session.record(purge.crawl_id).counters
    gauge = DELAYED_GAUGES[entry.kind]
    counters[gauge] = counters.get(gauge, 0) - 1
    session.changed(purge.crawl_id, progress=False)


def finish(session: PartitionSession, purge: CrawlPurge) -> bool:
    """Step 4: delete the crawl's records once nothing else is left; False when URLs were
    admitted during the walks, which must then run again.

    Called on a tick after the walks ended, before anything in this session touched the crawl's
    record: a record changed in the same session would be written back by `finish`.
    """
    crawl_id = purge.crawl_id
    if stored_counters(session, crawl_id).get("admitted", 0) != purge.admitted:
        return False
    for name in (OWNED, LEDGER, TALLY, CRAWL):
        table = session.table(name)
        if table.get(crawl_id.encode()) is not None:
            table.delete(crawl_id.encode())
            purge.deleted += 1
    log.info(
        "purged finished crawl %s from partition %d: %d keys",
        crawl_id,
        session.partition,
        purge.deleted,
    )
    return True
