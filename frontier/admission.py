"""Admission: DiscoveredUrls into host queues (DESIGN.md section 3, step 2).

For each URL of a DiscoveredUrls message (a `frontier.wire.ReceivedUrls`): canonicalise,
fingerprint, look up the crawl's visited set, then `frontier.scope.decide` in seed 000's order
(duplicate, domain, include, exclude, depth, budget) plus trap guards, max_pages_per_host and
the scope score. Rejections are counted as ``rejected_<reason>``; two more reasons are this
module's: ``invalid`` (not a crawlable http(s) URL) and ``misrouted`` (the URL's host is not the
message's host, so this partition does not own it). URLs of a cancelled crawl are refused
(``rejected_cancelled``), and so are those of a message whose redirect hops are more than the
crawl's ``max_redirects`` (``rejected_redirects``: a chain of page refreshes the parser followed,
`parser.refresh`; the frontier stops an HTTP redirect chain before it sends one). A duplicate is
counted, and if it is
still queued at a greater depth it moves to the lower depth.

Queue order. An admitted URL's queue key is the crawl strategy's `frontier.priority.QueueKey`
(``depth_first`` for depth-ordered crawls, `frontier.budget`) followed by a BFS ordinal: the rank
of the page that linked to it (the partition sequence at that page's first lease), then the part
and position of the URL in the message. Under the BFS-prefix rule the pages of one depth are
leased in ordinal order, so ordering their links by (source rank, position) reproduces seed 000's
FIFO exactly, whatever order the pages' links arrive in. Seeds have rank 0. A source not known on
this partition (its host lives elsewhere) gets a fresh sequence number instead: its links sort
after those of pages already leased here, as if appended to the FIFO when they arrived.

A message whose crawl is not in the directory yet waits in `pending` (never dropped) and is admitted
by the tick once the crawl appears. A message is admitted once: its origin, host and part are kept
in `received` (until the crawl is purged), and a repeat delivery of it (a parser or frontier that
restarted sends some output again) only counts ``discovered_messages_repeated``. Every admitted
message counts ``discovered_messages_admitted``; the ParseReport of a page (`frontier.reports`)
adds its ``discovered_messages`` to ``discovered_messages_announced``, which together tell when a
crawl is done (`frontier.progress`).
"""

from __future__ import annotations

import functools
import json
import re
import struct

from frontier import crawlstate, queues
from frontier.budget import depth_counter, depth_ordered
from frontier.priority import PrioritySignals, encode_priority, queue_key
from frontier.queues import QueuedUrl, crawl_queue_prefix, encode_new_entries, new_entry_head
from frontier.records import (
    DELAYED,
    HOST_PAGES,
    PENDING,
    QUEUE,
    RECEIVED,
    SCORES,
    VISITED,
    DelayedEntry,
    VisitedRecord,
    delayed_key,
    host_pages_key,
    peek_depth,
    pending_key,
    queued_head,
    read_u64,
    received_key,
    u64,
    visited_prefix,
)
from frontier.recrawl import is_recrawl, waiting_for_recrawl
from frontier.scope import HostScope, ScopeRules, decide_new, host_scope
from frontier.session import PartitionSession
from frontier.traps import check_traps
from frontier.wire import ReceivedUrls
from schemas.canonical import canonical_url, url_fingerprint
from schemas.crawls import CrawlState

_ORDINAL = struct.Struct(">QHI")
_RANK_PART = struct.Struct(">QH")
_INDEX_SEQUENCE = struct.Struct(">IQ")
"""The BFS ordinal (source rank, part, position) and the queue's arrival sequence: the first two
packed once per message, the others per URL."""
FINGERPRINT_BYTES = 16
_MAX_U16 = 2**16 - 1
_MAX_U32 = 2**32 - 1


def receive_discovered(session: PartitionSession, message: ReceivedUrls) -> None:
    """Admit a message now, or park it in `pending` until its crawl is in the directory."""
    crawl = session.crawl_state(message.crawl_id)
    if crawl is None:
        sequence = session.next_sequence()
        session.table(PENDING).put(pending_key(message.crawl_id, sequence), message.to_json())
        session.wait_pending(message.crawl_id)
        return
    admit_discovered(session, crawl, message)


def admit_discovered(session: PartitionSession, crawl: CrawlState, message: ReceivedUrls) -> None:
    crawl_id = crawl.crawl_id
    if message.origin is not None:
        received = session.table(RECEIVED)
        key = received_key(crawl_id, message.origin, message.host, message.part)
        if received.get(key) is not None:
            session.count(crawl_id, "discovered_messages_repeated")
            return
        received.put(key, b"")
    session.count(crawl_id, "discovered_messages_admitted")
    if depth_ordered(crawl.request):
        session.count(crawl_id, depth_counter("admitted", message.depth))
    counts = _admit_urls(session, crawl, message)
    # Counted once per message, not per URL: the same totals at a fraction of the cost.
    queued = counts.pop(QUEUED, 0)
    if queued:
        counts["admitted"] = queued
        counts["queued"] = queued
        session.unfinished(crawl_id, message.depth, queued)
        if crawl.request.max_links != -1:
            session.record(crawl_id).add_waiting(message.depth, queued)
    for name, count in counts.items():
        session.count(crawl_id, name, count)
    crawlstate.request_budget(session, crawl)


QUEUED = ""
""":func:`_admit_urls`'s key for URLs queued; any other key is a counter."""


def _admit_urls(
    session: PartitionSession, crawl: CrawlState, message: ReceivedUrls
) -> dict[str, int]:
    """Admit the URLs of one message in order; the counts by outcome (:data:`QUEUED` or a counter).

    Everything the URLs of a message share (crawl, host, depth, source rank, the host's scope
    rules, the entry's and key's fixed parts) is worked out once. Three passes: canonical forms
    and visited keys; the keys the Bloom filter cannot rule out read in one multi-get; then each
    URL in order, a key queued or found earlier in the message counting as the duplicate it is."""
    host = message.host
    depth = message.depth
    counts: dict[str, int] = {"discovered": len(message.urls)}
    prefix = visited_prefix(crawl.crawl_id)
    candidates = _candidates(crawl, message, prefix, counts)
    if not candidates:
        return counts
    keys = [key for _, _, key in candidates]
    digests: list[int] = []
    absent = session.memory.seen.absent(keys, digests)
    maybe = [key for key, unseen in zip(keys, absent, strict=True) if not unseen]
    stored = dict(zip(maybe, session.table(VISITED).get_many(maybe), strict=True)) if maybe else {}
    intake = _Intake(session, crawl, message)
    admit = intake.admit
    modified, recrawls = message.modified_at, crawl.request.recrawl_interval_hours is not None
    handled: set[bytes] = set()
    duplicates = 0
    for (index, canonical, key), digest in zip(candidates, digests, strict=True):
        if key in handled:
            duplicates += 1
            continue
        raw = stored.get(key) if stored else None
        if raw is None:
            refused = admit(index, canonical, key, digest)
            if refused:  # the same URL again is decided again
                counts[refused] = counts.get(refused, 0) + 1
                continue
        else:
            if depth < peek_depth(raw):
                fingerprint = key[len(prefix) :]
                ordinal = _ORDINAL.pack(intake.rank, intake.part, min(index, _MAX_U32))
                visited = VisitedRecord.decode(raw)
                _maybe_lower_depth(session, crawl, visited, fingerprint, host, depth, ordinal)
            elif recrawls and modified is not None and (changed_at := modified[index]):
                fingerprint = key[len(prefix) :]
                _recrawl_if_modified(session, crawl, raw, fingerprint, canonical, host, changed_at)
            duplicates += 1
        handled.add(key)
    if duplicates:
        counts["duplicate"] = duplicates
    queued = intake.finish()
    if queued:
        counts[QUEUED] = queued
    return counts


def _candidates(
    crawl: CrawlState, message: ReceivedUrls, prefix: bytes, counts: dict[str, int]
) -> list[tuple[int, str, bytes]]:
    """(position, canonical form, visited key) of each URL this partition may admit; the others
    counted as invalid, misrouted, cancelled or past max_redirects."""
    host = message.host
    routed = (f"https://{host}/", f"http://{host}/")  # a canonical URL's path starts with "/"
    cancelled = crawl.status == "cancelled"
    too_far = message.redirect_hops > crawl.request.max_redirects
    candidates: list[tuple[int, str, bytes]] = []
    for index, url in enumerate(message.urls):
        canonical = canonical_url(url)
        if canonical is None:
            outcome = "rejected_invalid"
        elif not canonical.startswith(routed):
            outcome = "rejected_misrouted"  # another host: its partition owns it, not this one
        elif cancelled:
            outcome = "rejected_cancelled"
        elif too_far:
            outcome = "rejected_redirects"
        else:
            candidates.append((index, canonical, prefix + url_fingerprint(canonical)))
            continue
        counts[outcome] = counts.get(outcome, 0) + 1
    return candidates


class _Intake:
    """Scope and queueing of a message's URLs not visited before, their shared parts made once.

    The queue entries and visited records of the URLs queued are collected and written in
    :meth:`finish`, one bulk write per table (nothing reads them before: a URL found twice in the
    message is the caller's ``handled``), and so are their Bloom bits, from the hashes the visited
    lookup computed."""

    def __init__(self, session: PartitionSession, crawl: CrawlState, message: ReceivedUrls) -> None:
        self.session = session
        self.crawl = crawl
        self.message = message
        self.rules = session.services.scope_rules(crawl)
        self.rank = source_rank(session, crawl.crawl_id, message.source_url)
        self.part = min(message.part, _MAX_U16)
        self.queue_prefix = crawl_queue_prefix(message.host, crawl.crawl_id)
        self.rank_part = _RANK_PART.pack(self.rank, self.part)
        self.entry_head = new_entry_head(crawl.crawl_id, message.depth, message.redirect_hops)
        self.visited_head = queued_head(message.depth)
        # A canonical URL of the message's host has its path's "/" right after the host.
        self.path_starts = (len(f"http://{message.host}"), len(f"https://{message.host}"))
        self._scope: HostScope | None = None
        self._traps_only = False
        self._plain_head: bytes | None = None
        self._host_pages: int | None = None
        self._priorities: dict[tuple[float | None, bool | None], bytes] = {}
        self._queue_keys: list[bytes] = []
        self._urls: list[str] = []
        self._visited_keys: list[bytes] = []
        self._digests: list[int] = []

    def admit(self, index: int, canonical: str, key: bytes, digest: int) -> str:
        """Queue a URL not in the visited set, or say why not: :data:`QUEUED` or the counter.

        ``digest`` is the key's Bloom hash (`frontier.bloom.BloomFilter.absent`). Until the first
        URL has opened the host's scope, and whenever a rule but the traps can refuse, the URL
        goes through every rule (:meth:`_refusal`); otherwise through the traps alone."""
        if self._traps_only:
            path_start = self.path_starts[canonical[4] == "s"]  # http:// or https://
            trap = check_traps(canonical, self.rules.trap_limits, path_start)
            if trap is not None:
                return "rejected_" + trap
        else:
            reason = self._refusal(canonical)
            if reason is not None:
                return reason
        plain = self._plain_head
        hints = self.message.priorities
        hint = None if hints is None else hints[index]
        head = (
            plain
            if plain is not None and hint is None
            else self._head(hint, key, preferred(self.crawl, canonical))
        )
        # index < 2**32: a message (at most 4 MiB) holds far fewer URLs.
        self._queue_keys.append(head + _INDEX_SEQUENCE.pack(index, self.session.next_sequence()))
        self._urls.append(canonical)
        self._visited_keys.append(key)
        self._digests.append(digest)
        return QUEUED

    def _refusal(self, canonical: str) -> str | None:
        """Every rule of `frontier.scope.decide_new`: None, or the counter of the first broken."""
        session, rules = self.session, self.rules
        scope = self._scope
        if scope is None:  # at the first URL not visited, as it may open the budget account
            scope = self._open_scope()
        pages = self._host_pages
        if pages is None and rules.max_pages_per_host != -1:
            pages = self._host_pages = _host_pages(
                session, rules, self.message.host, self.crawl.crawl_id
            )
        reason = decide_new(rules, scope, canonical, pages or 0)
        if reason is not None:
            return f"rejected_{reason}"
        if pages is not None:
            self._host_pages = pages + 1
        return None

    def _head(self, hint: float | None, key: bytes, preference: bool | None = None) -> bytes:
        """The queue key up to the URL's position: host and crawl, priority bytes, source rank and
        part."""
        return self.queue_prefix + self._priority(hint, key, preference) + self.rank_part

    def _open_scope(self) -> HostScope:
        """The host's scope, and which shortcuts it allows, worked out at the first new URL."""
        session, crawl, rules, message = self.session, self.crawl, self.rules, self.message
        account = session.account(crawl)
        budget_left = account is None or account.available > 0 or not account.exhausted
        requisites = message.requisites and crawl.request.fetch_page_requisites
        scope = self._scope = host_scope(
            rules, message.host, message.depth, budget_left, requisites=requisites
        )
        self._traps_only = (
            scope.open_to_all(rules) and rules.exclude is None and rules.max_pages_per_host == -1
        )
        plain = crawl.request.priority != "pagerank" and crawl.request.prefer_pattern is None
        if plain:  # one priority for every URL without a hint
            self._plain_head = self._head(None, b"")
        return scope

    def finish(self) -> int:
        """The URLs queued written, the host's queue grown and its page count when counted: one
        change each per message. Returns how many were queued."""
        queue_keys = self._queue_keys
        if not queue_keys:
            return 0
        session = self.session
        session.put_many(QUEUE, queue_keys, encode_new_entries(self.entry_head, self._urls))
        visited_head = self.visited_head
        records = [visited_head + queue_key for queue_key in queue_keys]
        session.put_new_visited(self._visited_keys, records, self._digests)
        session.queued(self.message.host, len(queue_keys))
        if self._host_pages is not None:
            key = host_pages_key(self.message.host, self.crawl.crawl_id)
            session.table(HOST_PAGES).put(key, u64(self._host_pages))
        return len(queue_keys)

    def _priority(self, hint: float | None, key: bytes, preference: bool | None) -> bytes:
        """The strategy's priority bytes: one per message but for sitemap hints, the crawl's
        preference and, under ``pagerank``, each URL's own rank."""
        crawl, depth = self.crawl, self.message.depth
        if crawl.request.priority == "pagerank":
            pagerank = _pagerank(self.session, crawl, key[-FINGERPRINT_BYTES:])
            signals = PrioritySignals(
                sitemap_priority=hint, pagerank=pagerank, preferred=preference
            )
            return priority_bytes(crawl, depth, signals, b"")
        encoded = self._priorities.get((hint, preference))
        if encoded is None:
            signals = PrioritySignals(sitemap_priority=hint, preferred=preference)
            encoded = priority_bytes(crawl, depth, signals, b"")
            self._priorities[(hint, preference)] = encoded
        return encoded


def preferred(crawl: CrawlState, url: str) -> bool | None:
    """Whether the crawl's ``prefer_pattern`` matches ``url``; None when it names none."""
    pattern = crawl.request.prefer_pattern
    if pattern is None:
        return None
    return _compiled(pattern).search(url) is not None


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def priority_bytes(
    crawl: CrawlState, depth: int, signals: PrioritySignals, ordinal: bytes
) -> bytes:
    """The queue key's priority part: the strategy's key, then the BFS ordinal."""
    request = crawl.request
    ordered = depth_ordered(request)
    cache_key = (request.priority, ordered, depth, signals)
    encoded = _PRIORITIES.get(cache_key)
    if encoded is None:
        key = queue_key(
            request.priority,
            signals,
            min(depth, _MAX_U32),
            0,
            depth_first=ordered,
        )
        encoded = encode_priority(key)
        if len(_PRIORITIES) >= _PRIORITY_CACHE:
            _PRIORITIES.clear()
        _PRIORITIES[cache_key] = encoded
    return encoded + ordinal


_PRIORITY_CACHE = 4096
_PRIORITIES: dict[tuple[str, bool, int, PrioritySignals], bytes] = {}
"""Encoded priorities by (strategy, depth first, depth, signals): the links of one page mostly
share them (a pure function of its inputs, so a small cache that is cleared when full)."""


def fresh_ordinal(session: PartitionSession) -> bytes:
    """An ordinal after every page leased so far: for URLs requeued without a known place."""
    return _ORDINAL.pack(session.next_sequence(), 0, 0)


def source_rank(session: PartitionSession, crawl_id: str, source_url: str | None) -> int:
    """The lease rank of the page that linked here; 0 for seeds; a fresh sequence if unknown."""
    if source_url is None:
        return 0
    canonical = canonical_url(source_url)
    if canonical is not None:
        source = session.visited(crawl_id, url_fingerprint(canonical))
        if source is not None and source.rank is not None:
            return source.rank
    return session.next_sequence()


def _recrawl_if_modified(
    session: PartitionSession,
    crawl: CrawlState,
    raw: bytes,
    fingerprint: bytes,
    url: str,
    host: str,
    modified_at: int,
) -> None:
    """A sitemap says the page changed (``<lastmod>``) after its last fetch: its recrawl comes
    now, not when its interval ends. Its old `delayed` entry is left to be passed over
    (`frontier.recrawl.superseded`). A URL queued or leased is fetched soon anyway, and one
    waiting for a retry keeps its backoff."""
    visited = VisitedRecord.decode(raw)
    due, interval = visited.due_ms, visited.recrawl_interval_ms
    if not waiting_for_recrawl(visited) or due is None or interval is None:
        return
    now = session.now_ms
    if modified_at <= due - interval or due <= now:  # not changed since, or due already
        return
    entry = DelayedEntry("recrawl", crawl.crawl_id, url, host, visited.depth)
    session.table(DELAYED).put(delayed_key(now, session.next_sequence()), entry.encode())
    session.timer_added(DELAYED, now)
    visited.due_ms = now
    session.put_visited(crawl.crawl_id, fingerprint, visited)
    session.count(crawl.crawl_id, "recrawls_by_lastmod")


def _maybe_lower_depth(
    session: PartitionSession,
    crawl: CrawlState,
    visited: VisitedRecord,
    fingerprint: bytes,
    host: str,
    depth: int,
    ordinal: bytes,
) -> None:
    """A URL still queued and found again closer to the seeds takes the lower depth in its queue;
    a recrawl keeps its place (`frontier.recrawl.is_recrawl`)."""
    if visited.state != "queued" or depth >= visited.depth or visited.queue_key is None:
        return
    if is_recrawl(visited):
        return
    old_key = bytes.fromhex(visited.queue_key)
    queue = session.table(QUEUE)
    raw = queue.get(old_key)
    if raw is None:
        return
    queue.delete(old_key)
    old = QueuedUrl.decode(raw)
    moved = QueuedUrl(
        old.crawl_id,
        old.url,
        depth,
        old.redirect_hops,
        old.attempts,
        old.etag,
        old.last_modified,
        old.content_hash,
    )
    signals = PrioritySignals(
        pagerank=_pagerank(session, crawl, fingerprint), preferred=preferred(crawl, old.url)
    )
    priority = priority_bytes(crawl, depth, signals, ordinal)
    key = queues.queue_key(host, crawl.crawl_id, priority, session.next_sequence())
    queue.put(key, moved.encode())
    session.unfinished(crawl.crawl_id, visited.depth, -1)
    session.unfinished(crawl.crawl_id, depth, 1)
    if crawl.request.max_links != -1 and not visited.charged:
        record = session.record(crawl.crawl_id)
        record.add_waiting(visited.depth, -1)
        record.add_waiting(depth, 1)
    visited.depth = depth
    visited.queue_key = key.hex()
    session.put_visited(crawl.crawl_id, fingerprint, visited)
    session.count(crawl.crawl_id, "lower_depth")
    session.wake(host)


def _pagerank(session: PartitionSession, crawl: CrawlState, fingerprint: bytes) -> float | None:
    if crawl.request.priority != "pagerank":
        return None
    raw = session.table(SCORES).get(fingerprint)
    if raw is None:
        return None
    return float(json.loads(raw)["pagerank"])


def _host_pages(session: PartitionSession, rules: ScopeRules, host: str, crawl_id: str) -> int:
    if rules.max_pages_per_host == -1:
        return 0
    raw = session.table(HOST_PAGES).get(host_pages_key(host, crawl_id))
    return 0 if raw is None else read_u64(raw)
