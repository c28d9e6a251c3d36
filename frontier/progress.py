"""Progress snapshots and done detection (DESIGN.md section 3, step 8).

Every partition publishes, per crawl it has state for, a PartitionProgress with cumulative counters
and gauges, at most every ``progress_interval_ms`` and only when something changed or, for a crawl
still running, when ``heartbeat_interval_ms`` passed. Snapshot numbers are ``max(previous + 1,
now_ms)``: strictly increasing, and still increasing after a crash that lost the last stored number.

Counters (cumulative unless marked gauge): ``discovered``, ``admitted``, ``duplicate``,
``lower_depth``, ``rejected_<reason>``, ``queued`` (gauge), ``leased`` (gauge), ``delayed`` (gauge:
retries waiting for their backoff), ``recrawl_scheduled`` (gauge), ``recrawls``, ``leases``,
``fetched``, ``changed`` and ``unchanged`` (what recrawls found), ``recrawls_by_lastmod``
(recrawls a sitemap's lastmod brought forward), ``failed``, ``retried``,
``dead``, ``expired``, ``redirects``, ``dropped_cancelled``, ``outcomes_ignored``,
``reports_expected``, ``reports_admitted``, ``reports_repeated``,
``reports_waiting`` (gauge), ``discovered_messages_announced``, ``discovered_messages_admitted``,
``discovered_messages_repeated``, ``seeds``; ``hosts_held`` (gauge, absent when 0: hosts held by a
Retry-After or an unreadable robots.txt with URLs of the crawl queued,
`frontier.outcomes.hold_host`, so a crawl that only waits says so); per outcome label
``outcome_<label>`` (the crawl's URLs by their latest outcome, `frontier.outcomes.relabel`); per
depth q ``unfinished_d<q>`` (gauge); on the owner ``budget_granted`` (the ledger's total); for
finite-budget crawls ``budget_available`` and ``budget_consumed`` from the account; and for
depth-ordered crawls (`frontier.budget`) per depth q ``announced_d<q>`` and ``admitted_d<q>``
(DiscoveredUrls messages), which with ``unfinished_d<q>`` decide the depth partitions may lease
and order the budget's grants.

:func:`crawl_done` is pure. A crawl is done when the latest two snapshots of every partition that
reported on it (the owner's included) are both *settled*: nothing leased, waiting for a retry,
scheduled for a recrawl (so a crawl with a recrawl interval runs until cancelled) or waiting for a
ParseReport, and either nothing queued anywhere with Σ discovered_messages_admitted >= Σ
discovered_messages_announced, or the budget is spent (the owner granted all of max_links and no
partition with queued URLs has budget left). Partitions that never reported hold nothing of the
crawl; messages on their way to them are announced but not admitted.

Every term counts each thing once although Kafka may deliver it again (a fetcher, parser or
frontier that restarts sends some of its output twice): a report once per lease
(`frontier.reports`), a DiscoveredUrls once per origin, host and part (`frontier.admission`). Were a
repeat counted, its surplus could hide a message or report still on its way, and the crawl would
be declared done while links of its last pages were still travelling. The admitted side can still
run ahead of the announced one for a while, since a page's messages may arrive before its report:
that page is then still leased or waiting for its report, so the crawl is not settled anyway. One
case is left: a lease a frontier sent but never stored (it crashed in between, and the URL was
leased again) counts nowhere until its outcome arrives, so if its links arrive first while another
message is still travelling, the sums can balance for a moment.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import islice

from frontier.queues import crawls_on_host
from frontier.records import CRAWL, QUEUE
from frontier.session import PartitionSession
from schemas.progress import PartitionProgress
from schemas.progress import key as progress_key

HISTORY = 2
HELD_HOSTS_LOOKED_AT = 1_000
"""At most this many held hosts are attributed to crawls per snapshot (a seek per crawl on each)."""


class ProgressBook:
    """The latest two snapshots per crawl and partition; feed it every progress record read.

    Thread-safe: in production a `TopicTable` over `progress` calls :meth:`record` from its reader
    thread (``on_change``) while the loop thread reads :meth:`snapshots`.
    """

    def __init__(self) -> None:
        self._history: dict[str, dict[int, list[PartitionProgress]]] = {}
        self._lock = threading.Lock()

    def record(self, progress: PartitionProgress) -> None:
        with self._lock:
            by_partition = self._history.setdefault(progress.crawl_id, {})
            history = by_partition.setdefault(progress.partition, [])
            if history and progress.snapshot <= history[-1].snapshot:
                return
            history.append(progress)
            del history[:-HISTORY]

    def snapshots(self, crawl_id: str, /) -> Mapping[int, Sequence[PartitionProgress]]:
        with self._lock:
            return {p: list(h) for p, h in self._history.get(crawl_id, {}).items()}


def crawl_done(
    snapshots: Mapping[int, Sequence[PartitionProgress]],
    *,
    max_links: int = -1,
    owner_partition: int | None = None,
) -> bool:
    """Whether a crawl is done, from the latest two snapshots of each reporting partition."""
    if not snapshots or (owner_partition is not None and owner_partition not in snapshots):
        return False
    if any(len(history) < HISTORY for history in snapshots.values()):
        return False
    latest = [history[-1] for history in snapshots.values()]
    previous = [history[-2] for history in snapshots.values()]
    return settled(latest, max_links) and settled(previous, max_links)


def settled(snapshots: Sequence[PartitionProgress], max_links: int = -1) -> bool:
    """One set of snapshots (one per partition) shows a crawl with nothing left to do."""

    def total(name: str) -> int:
        return sum(snapshot.counters.get(name, 0) for snapshot in snapshots)

    if total("leased") > 0 or total("delayed") > 0 or total("recrawl_scheduled") > 0:
        return False
    if total("reports_waiting") > 0:
        return False
    drained = total("queued") == 0 and total("discovered_messages_admitted") >= total(
        "discovered_messages_announced"
    )
    return drained or budget_spent(snapshots, max_links)


def budget_spent(snapshots: Sequence[PartitionProgress], max_links: int) -> bool:
    """All of max_links is granted and no partition with queued URLs can lease another."""
    if max_links == -1:
        return False
    granted = sum(snapshot.counters.get("budget_granted", 0) for snapshot in snapshots)
    stuck = all(
        s.counters.get("queued", 0) == 0 or s.counters.get("budget_available", 0) == 0
        for s in snapshots
    )
    return granted >= max_links and stuck


def held_hosts_by_crawl(session: PartitionSession) -> Counter[str]:
    """Per crawl, the partition's held hosts with URLs of it queued; at most
    `HELD_HOSTS_LOOKED_AT` hosts are looked at."""
    heap, memory = session.memory.heap, session.memory
    held = (
        host
        for host in heap.held
        if heap.held_until(host, session.now_ms) is not None and host not in memory.legacy_hosts
    )
    crawls: Counter[str] = Counter()
    for host in islice(held, HELD_HOSTS_LOOKED_AT):
        crawls.update(crawls_on_host(session.table(QUEUE), host))
    return crawls


def publish_progress(session: PartitionSession) -> None:
    """Tick: publish the crawls whose counters changed, or whose heartbeat is due."""
    heartbeat = session.config.heartbeat_interval_ms
    held = held_hosts_by_crawl(session)
    for key, _ in list(session.table(CRAWL).scan()):
        crawl_id = key.decode()
        record = session.record(crawl_id)
        if not record.dirty:
            if session.now_ms - record.published_at < heartbeat:
                continue
            crawl = session.crawl_state(crawl_id)
            if crawl is None or crawl.status in ("done", "cancelled"):
                continue
        record.snapshot = max(record.snapshot + 1, session.now_ms)
        record.published_at = session.now_ms
        record.dirty = False
        session.changed(crawl_id, progress=False)
        counters = record.progress_counters(session.tally(crawl_id))
        if held[crawl_id]:
            counters["hosts_held"] = held[crawl_id]
        progress = PartitionProgress(
            crawl_id=crawl_id,
            partition=session.partition,
            snapshot=record.snapshot,
            at=session.now_ms,
            counters=counters,
        )
        session.produce(
            session.topics.progress, progress_key(crawl_id, session.partition), progress
        )
