"""Outcomes: one terminal outcome per lease (DESIGN.md section 3, steps 5 and 7).

An outcome is accepted only for an open lease: its `leases` record is deleted with its deadline,
so a redelivered or late outcome (the lease expired and the URL was leased again) finds nothing and
only counts ``outcomes_ignored``. Whatever the lease, an outcome with ``page_sent`` expects its
page's ParseReport, once per lease (`frontier.reports.expect_report`).

An accepted outcome frees one of the host's in-flight slots, moves the host's lease window
(`frontier.retry.window_after`: 429 and 503 shrink it to one) and wakes the host. An outcome with a
``retry_after_ms`` holds the whole host (:func:`hold_host`): a server's Retry-After speaks for the
host, not for one URL, and a robots.txt that cannot be read is asked again only when the fetcher's
rules for it expire. Without the hold every queued URL of the host would be leased in turn, come
back with the same answer and spend one of its retries. Then, by `frontier.retry.classify`:

- done / unchanged: the URL is done and keeps the validators (ETag, Last-Modified, content hash);
  with ``recrawl_interval_hours`` it waits in `delayed` until due (`frontier.recrawl`: with
  ``recrawl_adaptive``, sooner after a change, later after none), then is fetched conditionally.
  A recrawl counts ``changed`` or ``unchanged``.
  With ``use_sitemaps``, sitemap URLs the fetcher found (robots.txt) are admitted through `urls`
  at the page's depth.
- redirect: the target, resolved against the URL, is admitted through `urls` at the same depth with
  one more redirect hop, keyed by the target's host (``redirects``); a target that is not a
  crawlable http(s) URL is refused (``redirect_refused``); too many hops is dead. A redirect to the
  URL itself (a site setting a cookie, then sending the client back for the page) goes back to its
  place in the host's queue with one more hop (``redirects_to_self``): admitted like another
  target, it would find itself visited and be lost without a word. With the crawl's cookies the
  next fetch carries what the site set (`fetcher.cookies`); without them the loop ends as
  ``too_many_redirects``.
- retry: the URL waits in `delayed` for `RetryPolicy` backoff with jitter, Retry-After as a floor.
- dead: a DeadLetter (stage ``frontier``, the outcome's coordinates, the reason) goes to
  `deadletter`, keyed like the outcome.

URLs of a cancelled crawl are neither retried nor followed. A page whose outcome says a page was
sent stays unfinished at its depth until its ParseReport arrives (`reports` table), which the
BFS-prefix rule needs. A redirect target is admitted at the same depth some time later; a partition
that finished that depth meanwhile may already lease the next one (a small, documented deviation
from strict BFS under a finite budget).
"""

from __future__ import annotations

from typing import Literal

from frontier.admission import fresh_ordinal, preferred, priority_bytes
from frontier.budget import depth_counter, depth_ordered
from frontier.priority import RECRAWL_PRIORITY_BYTES, PrioritySignals
from frontier.queues import QueuedUrl, enqueue, upgraded_key
from frontier.records import (
    DEADLINES,
    DELAYED,
    LEASES,
    QUEUE,
    DelayedEntry,
    LeaseRecord,
    VisitedRecord,
    deadline_key,
    delayed_key,
)
from frontier.recrawl import is_recrawl, recrawl_interval_ms
from frontier.reports import expect_report
from frontier.retry import RETRY_AFTER_CAP_MS, classify, normal_window, window_after
from frontier.session import PartitionSession
from schemas.canonical import canonical_url, host_key, url_fingerprint
from schemas.crawls import CrawlState
from schemas.deadletter import dead_letter
from schemas.outcomes import OUTCOME_COUNTER, FetchOutcome, outcome_label
from schemas.serde import encode
from schemas.urls import DiscoveredUrl, DiscoveredUrls
from streamcrawl.handler import Record


def take_lease(session: PartitionSession, lease_id: str) -> LeaseRecord | None:
    """Close an open lease: its record and deadline go, the host gets its slot back."""
    raw = session.table(LEASES).get(lease_id.encode())
    if raw is None:
        return None
    lease = LeaseRecord.decode(raw)
    session.table(LEASES).delete(lease_id.encode())
    session.table(DEADLINES).delete(deadline_key(lease.deadline_ms, lease_id))
    host = session.host(lease.host)
    host.in_flight = max(0, host.in_flight - 1)
    session.count(lease.crawl_id, "leased", -1)
    session.wake(lease.host)
    return lease


def handle_outcome(session: PartitionSession, outcome: FetchOutcome, source: Record) -> None:
    lease = take_lease(session, outcome.lease_id)
    if lease is None:
        if outcome.page_sent:
            expect_report(session, outcome, None)
        session.count(outcome.crawl_id, "outcomes_ignored")
        return
    crawl_id = lease.crawl_id
    fingerprint = url_fingerprint(lease.url)
    visited = session.visited(crawl_id, fingerprint) or VisitedRecord(lease.depth, "leased")
    if outcome.page_sent:
        expect_report(session, outcome, None if is_recrawl(visited) else lease.depth)
    if outcome.retry_after_ms:
        hold_host(session, lease.crawl_id, lease.host, outcome.retry_after_ms)
    relabel(session, crawl_id, visited, outcome_label(outcome))
    crawl = session.crawl_state(crawl_id)
    if crawl is None:
        _finish(session, lease, visited, fingerprint, "dead")
        return
    request = crawl.request
    host = session.host(lease.host)
    normal = normal_window(
        request.delay_ms_for(lease.host), session.config.fetcher_host_concurrency
    )
    host.window = window_after(
        host.window, outcome, normal, session.config.window_recovery_successes
    )
    hops = max(outcome.redirect_hops, lease.redirect_hops)
    verdict = classify(
        outcome.model_copy(update={"redirect_hops": hops}),
        lease.attempts,
        request.max_retries,
        max_redirects=request.max_redirects,
    )
    action = verdict.action
    if crawl.status == "cancelled" and action in ("retry", "redirect"):
        session.count(crawl_id, "dropped_cancelled")
        _finish(session, lease, visited, fingerprint, "dead")
        return
    if action in ("done", "unchanged"):
        _fetched(session, crawl, lease, outcome, visited, fingerprint)
    elif action == "redirect":
        if canonical_url(outcome.redirect_to or "", lease.url) == lease.url:
            _redirect_to_self(session, crawl, lease, hops, visited, fingerprint)
            return
        _redirect(session, crawl, lease, outcome, hops)
        _finish(session, lease, visited, fingerprint, "done")
    elif action == "retry":
        _retry(session, lease, outcome, visited, fingerprint)
    else:
        reason = verdict.dead_reason or "permanent"
        _dead_letter(session, source, outcome, reason)
        _finish(session, lease, visited, fingerprint, "dead")


def hold_host(session: PartitionSession, crawl_id: str, host: str, retry_after_ms: int) -> None:
    """Lease none of the host's URLs for ``retry_after_ms`` (at most an hour, as a retry's
    Retry-After floor); a longer hold already in place stays."""
    until = session.now_ms + min(retry_after_ms, RETRY_AFTER_CAP_MS)
    state = session.host(host)
    if state.held_until_ms is not None and state.held_until_ms >= until:
        return
    state.held_until_ms = until
    session.hold(host, until)
    session.count(crawl_id, "host_holds")


def relabel(session: PartitionSession, crawl_id: str, visited: VisitedRecord, label: str) -> None:
    """The URL's latest outcome is ``label``: it moves from its old ``outcome_<label>`` count to
    the new one (every branch of `handle_outcome` then stores the visited record)."""
    if visited.outcome == label:
        return
    if visited.outcome is not None:
        session.count(crawl_id, OUTCOME_COUNTER + visited.outcome, -1)
    session.count(crawl_id, OUTCOME_COUNTER + label)
    visited.outcome = label


def _finish(
    session: PartitionSession,
    lease: LeaseRecord,
    visited: VisitedRecord,
    fingerprint: bytes,
    state: Literal["done", "dead"],
) -> None:
    """The URL reached a final state: it no longer holds its depth unfinished (a recrawl never
    did, `frontier.recrawl.is_recrawl`)."""
    if not is_recrawl(visited):
        session.unfinished(lease.crawl_id, lease.depth, -1)
    visited.state = state
    session.put_visited(lease.crawl_id, fingerprint, visited)


def _fetched(
    session: PartitionSession,
    crawl: CrawlState,
    lease: LeaseRecord,
    outcome: FetchOutcome,
    visited: VisitedRecord,
    fingerprint: bytes,
) -> None:
    session.count(lease.crawl_id, "fetched")
    changed = outcome.kind != "unchanged"
    if not changed:
        session.count(lease.crawl_id, "unchanged")
    elif is_recrawl(visited):
        session.count(lease.crawl_id, "changed")
    visited.etag = outcome.etag or visited.etag
    visited.last_modified = outcome.last_modified or visited.last_modified
    visited.content_hash = outcome.content_hash or visited.content_hash
    _finish(session, lease, visited, fingerprint, "done")
    if crawl.request.use_sitemaps and outcome.sitemaps:
        _emit_sitemaps(session, crawl, lease, outcome.sitemaps)
    interval = recrawl_interval_ms(crawl.request, visited.recrawl_interval_ms, changed)
    if interval is not None and crawl.status != "cancelled":
        due = session.now_ms + interval
        entry = DelayedEntry(
            "recrawl", lease.crawl_id, lease.url, lease.host, lease.depth, 0, lease.redirect_hops
        )
        session.table(DELAYED).put(delayed_key(due, session.next_sequence()), entry.encode())
        session.timer_added(DELAYED, due)
        visited.state = "waiting"
        visited.recrawl_interval_ms = interval
        visited.due_ms = due
        session.put_visited(lease.crawl_id, fingerprint, visited)
        session.count(lease.crawl_id, "recrawl_scheduled")


def _redirect(
    session: PartitionSession,
    crawl: CrawlState,
    lease: LeaseRecord,
    outcome: FetchOutcome,
    hops: int,
) -> None:
    target = canonical_url(outcome.redirect_to or "", lease.url)
    if target is None:
        session.count(lease.crawl_id, "redirect_refused")
        return
    message = DiscoveredUrls(
        crawl_id=crawl.crawl_id,
        host=host_key(target),
        depth=lease.depth,
        source_url=lease.url,
        redirect_hops=hops + 1,
        discovered_at=session.now_ms,
        urls=[DiscoveredUrl(url=target)],
        origin=f"{lease.lease_id}/redirect",
    )
    session.produce(session.topics.urls, message.host, message)
    session.count(lease.crawl_id, "redirects")
    session.count(lease.crawl_id, "discovered_messages_announced")
    if depth_ordered(crawl.request):
        session.count(lease.crawl_id, depth_counter("announced", lease.depth))


def _redirect_to_self(
    session: PartitionSession,
    crawl: CrawlState,
    lease: LeaseRecord,
    hops: int,
    visited: VisitedRecord,
    fingerprint: bytes,
) -> None:
    """Fetch the URL again, one redirect hop further; it stays unfinished at its depth."""
    entry = QueuedUrl(lease.crawl_id, lease.url, lease.depth, hops + 1, lease.attempts)
    requeue(session, crawl, entry, lease.host, visited, fingerprint, recrawl=is_recrawl(visited))
    session.count(lease.crawl_id, "redirects")
    session.count(lease.crawl_id, "redirects_to_self")


def _emit_sitemaps(
    session: PartitionSession, crawl: CrawlState, lease: LeaseRecord, sitemaps: list[str]
) -> None:
    by_host: dict[str, list[DiscoveredUrl]] = {}
    for sitemap in sitemaps:
        canonical = canonical_url(sitemap)
        if canonical is not None:
            by_host.setdefault(host_key(canonical), []).append(DiscoveredUrl(url=canonical))
    for host, items in by_host.items():
        message = DiscoveredUrls(
            crawl_id=crawl.crawl_id,
            host=host,
            depth=lease.depth,
            source_url=lease.url,
            discovered_at=session.now_ms,
            urls=items,
            origin=f"{lease.lease_id}/sitemaps",
        )
        session.produce(session.topics.urls, host, message)
        session.count(lease.crawl_id, "discovered_messages_announced")
        if depth_ordered(crawl.request):
            session.count(lease.crawl_id, depth_counter("announced", lease.depth))


def _retry(
    session: PartitionSession,
    lease: LeaseRecord,
    outcome: FetchOutcome,
    visited: VisitedRecord,
    fingerprint: bytes,
) -> None:
    due = session.services.retry.due_ms(lease.attempts, retry_after_ms=outcome.retry_after_ms)
    entry = DelayedEntry(
        "retry",
        lease.crawl_id,
        lease.url,
        lease.host,
        lease.depth,
        lease.attempts,
        lease.redirect_hops,
    )
    session.table(DELAYED).put(delayed_key(due, session.next_sequence()), entry.encode())
    session.timer_added(DELAYED, due)
    visited.state = "waiting"
    visited.due_ms = due
    session.put_visited(lease.crawl_id, fingerprint, visited)
    session.count(lease.crawl_id, "failed")
    session.count(lease.crawl_id, "retried")
    session.count(lease.crawl_id, "delayed")


def _dead_letter(
    session: PartitionSession, source: Record, outcome: FetchOutcome, reason: str
) -> None:
    detail = f"{reason}: status {outcome.status}" + (f", {outcome.error}" if outcome.error else "")
    letter = dead_letter(
        "frontier", source.topic, source.partition, source.offset, detail, encode(outcome)
    )
    session.produce(session.topics.deadletter, source.key or outcome.host, letter)
    session.count(outcome.crawl_id, "failed")
    session.count(outcome.crawl_id, "dead")


def requeue(
    session: PartitionSession,
    crawl: CrawlState,
    entry: QueuedUrl,
    host: str,
    visited: VisitedRecord,
    fingerprint: bytes,
    *,
    recrawl: bool = False,
) -> None:
    """Put a known URL back in its crawl's queue on its host: a recrawl behind the URLs waiting
    for their first fetch (`frontier.priority.RECRAWL_PRIORITY`), any other at its old place when
    it has one (kept in an earlier version's layout, it moves to this version's,
    `frontier.queues`)."""
    queue = session.table(QUEUE)
    if recrawl:
        key = enqueue(queue, host, RECRAWL_PRIORITY_BYTES, session.next_sequence(), entry)
        visited.queue_key = key.hex()
    elif visited.queue_key is not None:
        key = upgraded_key(bytes.fromhex(visited.queue_key), crawl.crawl_id)
        queue.put(key, entry.encode())
        visited.queue_key = key.hex()
    else:
        signals = PrioritySignals(preferred=preferred(crawl, entry.url))
        priority = priority_bytes(crawl, entry.depth, signals, fresh_ordinal(session))
        key = enqueue(queue, host, priority, session.next_sequence(), entry)
        visited.queue_key = key.hex()
    visited.state = "queued"
    visited.lease_id = None
    visited.due_ms = None
    session.put_visited(crawl.crawl_id, fingerprint, visited)
    session.count(crawl.crawl_id, "queued")
    session.queued(host)
