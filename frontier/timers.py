"""Timer work of one tick (DESIGN.md section 3, step 7; section 4).

- Lease expiry: `deadlines` is scanned from its start (keys sort by deadline) up to the first
  deadline in the future. An expired lease frees its host slot and its URL goes back to its old
  place in the host queue (``expired``); once its attempts exceed the crawl's max_retries it is
  dead instead (reason ``lease_expired``, a DeadLetter naming the `fetch` topic and offset -1), so a
  URL that crashes fetchers cannot circulate forever.
- Delayed entries (`delayed`, sorted by due time): due retries and recrawls go back to their host
  queue; a recrawl carries the validators kept in the visited record, for a conditional fetch.
  Entries of cancelled crawls are dropped.
- Pending messages: DiscoveredUrls of crawls that were unknown are admitted once the directory
  has the crawl, ``pending_batch`` per crawl per tick.

Each scan handles at most ``timer_batch`` entries per tick; the rest wait a cycle. The outputs of a
tick are produced before its state is written (the loop's order), so a crash repeats work, never
loses it.
"""

from __future__ import annotations

from frontier.admission import admit_discovered
from frontier.outcomes import requeue, take_lease
from frontier.queues import QueuedUrl
from frontier.records import (
    DEADLINES,
    DELAYED,
    PENDING,
    DelayedEntry,
    pending_prefix,
    read_u64,
)
from frontier.recrawl import is_recrawl, superseded
from frontier.session import NOTHING_DUE, PartitionSession
from frontier.wire import decode_pending
from schemas.canonical import url_fingerprint
from schemas.deadletter import dead_letter


def expire_leases(session: PartitionSession) -> None:
    if not session.timer_due(DEADLINES):
        return
    table = session.table(DEADLINES)
    handled = 0
    next_due = NOTHING_DUE
    for key, _ in table.scan():
        due = read_u64(key)
        if due > session.now_ms or handled >= session.config.timer_batch:
            next_due = due
            break
        handled += 1
        table.delete(key)
        lease_id = key[8:].decode()
        lease = take_lease(session, lease_id)
        if lease is None:
            continue
        session.count(lease.crawl_id, "expired")
        fingerprint = url_fingerprint(lease.url)
        visited = session.visited(lease.crawl_id, fingerprint)
        crawl = session.crawl_state(lease.crawl_id)
        if visited is None or crawl is None or crawl.status == "cancelled":
            _give_up(session, lease.crawl_id, lease.depth, fingerprint, "dropped_cancelled")
            continue
        if lease.attempts > crawl.request.max_retries:
            letter = dead_letter(
                "frontier",
                session.topics.fetch,
                session.partition,
                -1,
                f"lease_expired: {lease.attempts} leases of {lease.url} got no outcome",
                None,
            )
            session.produce(session.topics.deadletter, lease.host, letter)
            session.count(lease.crawl_id, "dead")
            _give_up(session, lease.crawl_id, lease.depth, fingerprint, None)
            continue
        entry = QueuedUrl(
            lease.crawl_id,
            lease.url,
            lease.depth,
            lease.redirect_hops,
            lease.attempts,
            visited.etag,
            visited.last_modified,
            visited.content_hash,
        )
        requeue(session, crawl, entry, lease.host, visited, fingerprint)
    session.timer_scanned(DEADLINES, next_due)


def release_due(session: PartitionSession) -> None:
    """Move due retries and recrawls back to their host queues."""
    if not session.timer_due(DELAYED):
        return
    table = session.table(DELAYED)
    handled = 0
    next_due = NOTHING_DUE
    for key, raw in table.scan():
        due = read_u64(key)
        if due > session.now_ms or handled >= session.config.timer_batch:
            next_due = due
            break
        handled += 1
        table.delete(key)
        entry = DelayedEntry.decode(raw)
        retry = entry.kind == "retry"
        fingerprint = url_fingerprint(entry.url)
        visited = session.visited(entry.crawl_id, fingerprint)
        if visited is not None and superseded(visited, due):
            continue  # its recrawl was brought forward and went then (nothing counted it twice)
        session.count(entry.crawl_id, "delayed" if retry else "recrawl_scheduled", -1)
        crawl = session.crawl_state(entry.crawl_id)
        if visited is None or crawl is None or crawl.status == "cancelled":
            if retry:
                _give_up(session, entry.crawl_id, entry.depth, fingerprint, "dropped_cancelled")
            continue
        if not retry:
            if not is_recrawl(visited):  # an earlier version's record, without an interval:
                session.unfinished(entry.crawl_id, entry.depth, 1)  # counted as it counted
            session.count(entry.crawl_id, "recrawls")
        queued = QueuedUrl(
            entry.crawl_id,
            entry.url,
            entry.depth,
            entry.redirect_hops,
            entry.attempts,
            visited.etag if not retry else None,
            visited.last_modified if not retry else None,
            visited.content_hash if not retry else None,
        )
        requeue(session, crawl, queued, entry.host, visited, fingerprint, recrawl=not retry)
    session.timer_scanned(DELAYED, next_due)


def drain_pending(session: PartitionSession) -> None:
    """Admit waiting DiscoveredUrls of crawls the directory now knows."""
    table = session.table(PENDING)
    for crawl_id in sorted(session.memory.pending_crawls):
        crawl = session.crawl_state(crawl_id)
        if crawl is None:
            continue
        handled = 0
        for key, raw in table.scan(pending_prefix(crawl_id)):
            if handled >= session.config.pending_batch:
                break
            handled += 1
            table.delete(key)
            admit_discovered(session, crawl, decode_pending(raw))
        if handled < session.config.pending_batch:
            session.memory.pending_crawls.discard(crawl_id)


def _give_up(
    session: PartitionSession,
    crawl_id: str,
    depth: int,
    fingerprint: bytes,
    counter: str | None,
) -> None:
    visited = session.visited(crawl_id, fingerprint)
    if visited is None or not is_recrawl(visited):
        session.unfinished(crawl_id, depth, -1)
    if visited is not None:
        visited.state = "dead"
        session.put_visited(crawl_id, fingerprint, visited)
    if counter is not None:
        session.count(crawl_id, counter)
