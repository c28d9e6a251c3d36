"""Release: lease a host's next URLs to `fetch` (DESIGN.md section 3, step 3; section 4).

A host is released when it is ready in the partition's HostHeap: woken by an admission, an outcome,
a retry or recrawl coming due, an expired lease, or a crawl-wide change (budget granted, a depth
finished, a crawl paused or resumed). A held host (`frontier.outcomes.hold_host`) is not released
before its hold ends. The tick releases every ready host once per cycle, so the
admissions and outcomes of one cycle cost one release per host, in the same cycle.

A host holds one queue per crawl (`frontier.queues`). One release reads each crawl's queue from
its floor in memory (past the tombstones of what was leased before; one seek) and merges the heads
of the active crawls' queues in release order, the order one queue for all of them would have,
leasing while the host's in-flight count is below its lease window (`frontier.retry.LeaseWindow`,
normal size from the next URL's crawl's politeness delay and the fetcher's per-host
concurrency). A crawl leaves the merge, with everything behind its head, when
(a depth-ordered crawl: finite budget, or bfs with a finite max_depth) a lower depth is unfinished
or travelling on any partition (the BFS-prefix rule, `frontier.budget.lease_depth_limit`), or when
its head is not yet charged and the crawl's account has no budget left (a request goes to the
owner). A paused crawl, or one the directory does not know yet, is passed over with its queue in
place; a cancelled crawl's queue, or what a done crawl left (its budget or time ran out), is
dropped, after the others leased, with what is left of the scan limit. So however many URLs one
crawl holds back or leaves behind, the host's other crawls lease as if it had none there: each
costs a release one seek.

Recrawls wait in their own bucket behind the URLs waiting for their first fetch
(`frontier.priority.RECRAWL_PRIORITY`), but not forever: a host that leased ``recrawl_every`` (4)
new pages since its last recrawl, and has both kinds waiting, leases the first due recrawl of its
recrawling crawls next (the recrawl turn: one seek into each such crawl's recrawl bucket). So a busy
host gives its recrawls a fifth of its fetches and a continuous crawl's home pages and feeds, where
new links appear, do not go stale behind a flood of new pages; a host keeping up leases everything
in order anyway.

A release looks at most ``release_scan_limit`` entries; when it leased or dropped some and reached
the limit, the host is released again at the next tick. A host whose crawls may all not lease now
is parked until the next wake-up (an admission, an outcome, a crawl's change, a new depth limit).

A lease: a uuid lease id from the injected factory, deadline now + lease timeout, the URL's state
``leased``, a `leases` record and a `deadlines` index entry, the host's in-flight count up, and a
FetchRequest keyed by host carrying the crawl's fetch options (politeness delay, robots, content
types, nofollow, redirect hops) and, for a recrawl, the validators.
The URL's rank (its pages' links sort by it) is set at its first lease.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Literal

from frontier import crawlstate
from frontier.budget import depth_ordered, may_lease_depth
from frontier.priority import RECRAWL_PRIORITY_BYTES
from frontier.queues import QueuedUrl, crawl_queue_prefix, crawl_queues, host_of, release_order
from frontier.records import (
    DEADLINES,
    LEASES,
    QUEUE,
    HostState,
    LeaseRecord,
    VisitedRecord,
    deadline_key,
)
from frontier.recrawl import is_recrawl
from frontier.retry import normal_window
from frontier.scope import in_domain
from frontier.session import PartitionSession
from schemas.canonical import url_fingerprint
from schemas.crawls import CrawlState
from schemas.fetch import FetchRequest
from schemas.seeds import extraction_for, fetched_content_types


def release_ready_hosts(session: PartitionSession) -> None:
    """Tick: release every host whose ready time passed."""
    heap = session.memory.heap
    ready: list[str] = []
    while (host := heap.pop_ready(session.now_ms)) is not None:
        ready.append(host)
    for host in ready:
        release_host(session, host)


def release_host(session: PartitionSession, host: str) -> None:
    """Lease what the host's window and its crawls' states allow; see the module docstring."""
    state = session.host(host)
    if state.held_until_ms is not None and state.held_until_ms > session.now_ms:
        session.hold(host, state.held_until_ms)  # memory did not know (a restored partition)
        return
    if host in session.memory.legacy_hosts:
        return  # `frontier.upgrade` moves its entries first, then wakes it
    release = _Release(session, host, state)
    crawls = 0
    ended: list[tuple[CrawlState, Entry, Iterator[Entry]]] = []
    # Entries are read lazily: a release usually stops at the lease window (one or two leases),
    # long before the scan limit, and each entry read is a RocksDB step and a merge through the
    # transactions.
    for crawl_id, entries in _crawl_queues(session, host):
        head = next(entries, None)
        if head is None:
            session.floor_moved(host, crawl_id, None)
            continue
        crawls += 1
        crawl = session.crawl_state(crawl_id)
        if crawl is None or crawl.status == "paused":
            session.floor_moved(host, crawl_id, head[0])  # its queue waits; the others go on
        elif crawl.status == "active":
            release.add(crawl, head, entries)
        else:
            ended.append((crawl, head, entries))
    if crawls == 0:
        session.queue_emptied(host)
        return
    release.lease()
    release.move_floors()
    for crawl, head, entries in ended:  # after the leases: what is left of the scan limit
        release.drop(crawl, head, entries)
    if release.progressed and release.looked_at >= release.limit:
        session.wake(host)


Entry = tuple[bytes, bytes]
"""A queue entry: its key and its `QueuedUrl` bytes."""
TryLease = Literal["leased", "stale", "blocked"]


def _crawl_queues(session: PartitionSession, host: str) -> Iterator[tuple[str, Iterator[Entry]]]:
    """The queues of the crawls with URLs on the host, each read from its floor (memory's
    `queue_floors`): below it, only the tombstones of entries leased before. Should memory know
    none (a safety net: the queue table and memory disagree), each is found with a seek."""
    queue = session.table(QUEUE)
    floors = session.memory.queue_floors.get(host)
    if floors is None:
        yield from crawl_queues(queue, host)
        return
    for crawl_id, floor in sorted(floors.items()):
        yield crawl_id, queue.scan(crawl_queue_prefix(host, crawl_id), floor)


class _Release:
    """One release of a host: the heads of its active crawls' queues, merged in release order."""

    def __init__(self, session: PartitionSession, host: str, state: HostState) -> None:
        self.session = session
        self.host = host
        self.state = state
        self.limit = session.config.release_scan_limit
        self.looked_at = 0
        self.progressed = False
        self._heads: list[tuple[bytes, int]] = []
        self._queues: list[tuple[CrawlState, Iterator[Entry]]] = []
        self._entries: list[Entry | None] = []
        """Per queue, its first entry not leased or deleted yet; None: it has no more."""
        self._turns_taken: set[bytes] = set()
        """Keys leased in a recrawl turn: a queue's scan, begun before, may still read them."""

    def add(self, crawl: CrawlState, head: Entry, entries: Iterator[Entry]) -> None:
        """An active crawl's queue joins the merge with its head."""
        index = len(self._queues)
        self._queues.append((crawl, entries))
        self._entries.append(head)
        heapq.heappush(self._heads, (release_order(head[0]), index))

    def drop(self, crawl: CrawlState, head: Entry, entries: Iterator[Entry]) -> None:
        """A done or cancelled crawl's queued URLs, dropped for good."""
        entry: Entry | None = head
        while entry is not None and self.looked_at < self.limit:
            self.looked_at += 1
            key, raw = entry
            drop(self.session, key, QueuedUrl.decode(raw), f"dropped_{crawl.status}")
            self.progressed = True
            entry = next(entries, None)
        self.session.floor_moved(self.host, crawl.crawl_id, None if entry is None else entry[0])

    def lease(self) -> None:
        """Lease in release order until the window is full, the scan limit is reached or every
        crawl is blocked (a crawl that may not lease its head leases nothing after it)."""
        session, state = self.session, self.state
        while self._heads and self.looked_at < self.limit:
            _, index = heapq.heappop(self._heads)
            crawl, _ = self._queues[index]
            head = self._entries[index]
            assert head is not None  # a queue is in the merge only with a head
            key, raw = head
            normal = normal_window(
                crawl.request.delay_ms_for(self.host), session.config.fetcher_host_concurrency
            )
            if state.in_flight >= state.window.limit(normal):
                return
            if key in self._turns_taken:
                self._advance(index)
                continue
            recrawl = _is_recrawl_key(key)
            if not recrawl and self._recrawl_turn_taken():
                heapq.heappush(self._heads, (release_order(key), index))
                continue
            result = self._try_lease(crawl, key, raw)
            if result == "blocked":
                continue  # the crawl leaves the merge, its head in place
            if result == "leased":
                if recrawl:
                    state.new_since_recrawl = 0
                elif crawl.request.recrawl_interval_hours is not None:
                    state.new_since_recrawl += 1
            self._advance(index)

    def _try_lease(self, crawl: CrawlState, key: bytes, raw: bytes) -> TryLease:
        """Lease one queued entry if it may be: ``leased``; ``stale`` when the entry was left
        behind (deleted now); ``blocked`` when its crawl may not lease it now (it stays)."""
        session = self.session
        self.looked_at += 1
        entry = QueuedUrl.decode(raw)
        fingerprint = url_fingerprint(entry.url)
        visited = session.visited(crawl.crawl_id, fingerprint)
        if visited is None or visited.state != "queued" or visited.queue_key != key.hex():
            # Purged, or left behind by a crash: the URL is elsewhere (leased, moved, done).
            session.table(QUEUE).delete(key)
            session.dequeued(self.host)
            return "stale"
        if not _may_lease(session, crawl, entry, visited):
            return "blocked"
        lease(session, crawl, key, entry, fingerprint, visited)
        self.progressed = True
        return "leased"

    def _recrawl_turn_taken(self) -> bool:
        """On the host's recrawl turn, lease the first due recrawl of its recrawling crawls;
        whether one was. Nothing waiting ends the turn: the next comes ``recrawl_every`` new
        pages later, so a host without recrawls pays one seek per that many leases."""
        every = self.session.config.recrawl_every
        if every == 0 or self.state.new_since_recrawl < every:
            return False
        self.state.new_since_recrawl = 0
        queue = self.session.table(QUEUE)
        first: tuple[bytes, CrawlState, Entry] | None = None
        for crawl, _ in self._queues:
            if crawl.request.recrawl_interval_hours is None:
                continue
            prefix = crawl_queue_prefix(self.host, crawl.crawl_id)
            found = next(queue.scan(prefix, prefix + RECRAWL_PRIORITY_BYTES), None)
            if found is not None and (first is None or release_order(found[0]) < first[0]):
                first = (release_order(found[0]), crawl, found)
        if first is None:
            return False
        _, crawl, (key, raw) = first
        if self._try_lease(crawl, key, raw) == "blocked":
            return False
        self._turns_taken.add(key)
        return True

    def move_floors(self) -> None:
        """Each merged queue's floor up to its first entry left (past what was leased)."""
        for (crawl, _), head in zip(self._queues, self._entries, strict=True):
            self.session.floor_moved(self.host, crawl.crawl_id, None if head is None else head[0])

    def _advance(self, index: int) -> None:
        """Put the next entry of queue ``index`` in the merge, if it has one."""
        _, entries = self._queues[index]
        entry = next(entries, None)
        self._entries[index] = entry
        if entry is not None:
            heapq.heappush(self._heads, (release_order(entry[0]), index))


def _checked_only(session: PartitionSession, crawl: CrawlState, host: str) -> bool:
    """Whether a URL of ``host`` is only a link to check: outside the domains of a crawl with
    ``check_external`` (`frontier.scope`)."""
    request = crawl.request
    return request.check_external and not in_domain(session.services.scope_rules(crawl), host)


def _is_recrawl_key(key: bytes) -> bool:
    return release_order(key).startswith(RECRAWL_PRIORITY_BYTES)


def wake_on_new_depth_limits(session: PartitionSession, crawl_ids: list[str]) -> None:
    """Periodic: when a depth-ordered crawl's lease depth limit moved (others' progress finished a
    depth), retry every parked host: some were parked by the old limit."""
    limits = session.memory.depth_limits
    for crawl_id in list(limits):
        if crawl_id not in crawl_ids:
            del limits[crawl_id]
    for crawl_id in crawl_ids:
        crawl = session.crawl_state(crawl_id)
        if crawl is None or crawl.status != "active" or not depth_ordered(crawl.request):
            limits.pop(crawl_id, None)
            continue
        limit = session.lease_depth_limit(crawl_id)
        if crawl_id not in limits or limits[crawl_id] != limit:
            limits[crawl_id] = limit
            session.wake_all()


def _may_lease(
    session: PartitionSession, crawl: CrawlState, entry: QueuedUrl, visited: VisitedRecord
) -> bool:
    """The BFS-prefix rule for depth-ordered crawls, and the budget for finite-budget ones;
    charges the budget."""
    if not depth_ordered(crawl.request):
        return True
    limit = None if is_recrawl(visited) else session.lease_depth_limit(crawl.crawl_id)
    if not may_lease_depth(entry.depth, limit):
        return False
    account = session.account(crawl)
    if account is None or visited.charged:
        return True
    record = session.record(crawl.crawl_id)
    if not account.try_consume(1):
        crawlstate.request_budget(session, crawl)
        return False
    visited.charged = True
    record.add_waiting(entry.depth, -1)
    session.changed(crawl.crawl_id)
    crawlstate.request_budget(session, crawl)
    return True


def lease(
    session: PartitionSession,
    crawl: CrawlState,
    key: bytes,
    entry: QueuedUrl,
    fingerprint: bytes,
    visited: VisitedRecord,
) -> None:
    host = host_of(key)
    request = crawl.request
    lease_id = session.services.new_lease_id()
    deadline = session.now_ms + session.config.lease_timeout_ms
    attempts = entry.attempts + 1
    session.table(QUEUE).delete(key)
    session.dequeued(host)
    record = LeaseRecord(
        lease_id=lease_id,
        crawl_id=crawl.crawl_id,
        url=entry.url,
        host=host,
        depth=entry.depth,
        deadline_ms=deadline,
        attempts=attempts,
        redirect_hops=entry.redirect_hops,
    )
    session.table(LEASES).put(lease_id.encode(), record.encode())
    session.table(DEADLINES).put(deadline_key(deadline, lease_id), b"")
    session.timer_added(DEADLINES, deadline)
    visited.state = "leased"
    visited.lease_id = lease_id
    visited.attempts = attempts
    if visited.rank is None:
        visited.rank = session.next_sequence()
    session.put_visited(crawl.crawl_id, fingerprint, visited)
    session.host(host).in_flight += 1
    session.count(crawl.crawl_id, "queued", -1)
    session.count(crawl.crawl_id, "leased")
    session.count(crawl.crawl_id, "leases")
    fetch_request = FetchRequest(
        crawl_id=crawl.crawl_id,
        url=entry.url,
        host=host,
        depth=entry.depth,
        lease_id=lease_id,
        deadline=deadline,
        politeness_delay_ms=request.delay_ms_for(host),
        respect_robots=request.respect_robots,
        content_types=fetched_content_types(request, entry.url),
        redirect_hops=entry.redirect_hops,
        follow_nofollow=request.follow_nofollow,
        use_feeds=request.use_feeds,
        sign_text=request.find_near_duplicates,
        find_requisites=request.fetch_page_requisites,
        use_cookies=request.use_cookies,
        check_only=_checked_only(session, crawl, host),
        etag=entry.etag,
        last_modified=entry.last_modified,
        content_hash=entry.content_hash,
        extract=extraction_for(request, entry.url),
        follow_within=request.follow_within,
        headers=request.headers,
    )
    session.produce(session.topics.fetch, host, fetch_request)


def drop(session: PartitionSession, key: bytes, entry: QueuedUrl, counter: str) -> None:
    """Remove a queued URL of a cancelled or done crawl for good, counted in ``counter``."""
    session.table(QUEUE).delete(key)
    session.dequeued(host_of(key))
    fingerprint = url_fingerprint(entry.url)
    visited = session.visited(entry.crawl_id, fingerprint)
    if visited is None or not is_recrawl(visited):
        session.unfinished(entry.crawl_id, entry.depth, -1)
    if visited is not None:
        record = session.record(entry.crawl_id)
        if record.account is not None and not visited.charged:
            record.add_waiting(entry.depth, -1)
        visited.state = "dead"
        session.put_visited(entry.crawl_id, fingerprint, visited)
    session.count(entry.crawl_id, "queued", -1)
    session.count(entry.crawl_id, counter)
