"""Gauges recomputed from the tables when a partition is opened (crash recovery).

A crash between delivery and commit restores a partition with the writes of the last cycle's timer
work applied and those of its inputs skipped (`frontier.session` explains why). The tables agree
with each other then, since each key holds the value of the last step that wrote it, but the
gauges kept in the crawl and host records may include changes of the skipped inputs, which are
about to be handled again: a URL counted as queued twice, a depth held unfinished by a URL that is
not there, a host's slot taken by no lease. Left alone, such a crawl never looks done.

So on every opening the gauges are counted again, in one pass over each table that holds them:

- `visited`: a ``queued`` URL counts in ``queued``, in ``unfinished`` at its depth and, when not
  yet charged to a finite budget, per depth, in ``waiting_budget``;
- `leases`: each open lease counts in ``leased``, in ``unfinished`` at its depth and in its host's
  ``in_flight``;
- `delayed`: a retry counts in ``delayed`` and in ``unfinished`` at its depth, a recrawl in
  ``recrawl_scheduled``;
- `reports`: a page waiting for its ParseReport counts in ``reports_waiting`` and, when its lease
  was open at its outcome, in ``unfinished`` at its depth.

Records whose gauges already agree are not written.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from frontier.records import (
    CRAWL,
    DELAYED,
    HOSTS,
    LEASES,
    REPORTS,
    SEPARATOR,
    VISITED,
    DelayedEntry,
    LeaseRecord,
    ReportWait,
    VisitedRecord,
)
from frontier.session import GAUGES, PartitionSession

FINGERPRINT_BYTES = 16


@dataclass
class CrawlGauges:
    """One crawl's gauges as the tables say they are."""

    counters: Counter[str] = field(default_factory=Counter)
    unfinished: Counter[int] = field(default_factory=Counter)
    waiting_budget: Counter[int] = field(default_factory=Counter)


def count_gauges(session: PartitionSession) -> tuple[dict[str, CrawlGauges], Counter[str]]:
    """Per crawl its gauges, and per host its open leases, counted from the tables."""
    crawls: dict[str, CrawlGauges] = {}

    def gauges(crawl_id: str) -> CrawlGauges:
        found = crawls.get(crawl_id)
        if found is None:
            found = crawls[crawl_id] = CrawlGauges()
        return found

    for key, raw in session.table(VISITED).scan():
        visited = VisitedRecord.decode(raw)
        if visited.state != "queued":
            continue
        crawl = gauges(key[: -FINGERPRINT_BYTES - len(SEPARATOR)].decode())
        crawl.counters["queued"] += 1
        crawl.unfinished[visited.depth] += 1
        if not visited.charged:
            crawl.waiting_budget[visited.depth] += 1
    in_flight: Counter[str] = Counter()
    for _, raw in session.table(LEASES).scan():
        lease = LeaseRecord.decode(raw)
        crawl = gauges(lease.crawl_id)
        crawl.counters["leased"] += 1
        crawl.unfinished[lease.depth] += 1
        in_flight[lease.host] += 1
    for _, raw in session.table(DELAYED).scan():
        entry = DelayedEntry.decode(raw)
        crawl = gauges(entry.crawl_id)
        if entry.kind == "retry":
            crawl.counters["delayed"] += 1
            crawl.unfinished[entry.depth] += 1
        else:
            crawl.counters["recrawl_scheduled"] += 1
    for _, raw in session.table(REPORTS).scan():
        wait = ReportWait.decode(raw)
        if wait.state == "waiting":
            crawl = gauges(wait.crawl_id)
            crawl.counters["reports_waiting"] += 1
            if wait.depth is not None:
                crawl.unfinished[wait.depth] += 1
    return crawls, in_flight


def reconcile(session: PartitionSession) -> int:
    """Make every crawl and host record's gauges what the tables say; returns records changed."""
    counted, in_flight = count_gauges(session)
    crawl_ids = {key.decode() for key, _ in session.table(CRAWL).scan()} | set(counted)
    changed = 0
    for crawl_id in sorted(crawl_ids):
        gauges = counted.get(crawl_id, CrawlGauges())
        record = session.record(crawl_id)
        counters = {name: gauges.counters.get(name, 0) for name in GAUGES}
        unfinished = {str(depth): n for depth, n in sorted(gauges.unfinished.items()) if n > 0}
        waiting = (
            {str(depth): n for depth, n in sorted(gauges.waiting_budget.items()) if n > 0}
            if record.account is not None
            else record.waiting_budget
        )
        stale = any(record.counters.get(name, 0) != value for name, value in counters.items())
        if stale or record.unfinished != unfinished or record.waiting_budget != waiting:
            for name, value in counters.items():
                if value or name in record.counters:
                    record.counters[name] = value
            record.unfinished = unfinished
            record.waiting_budget = waiting
            session.changed(crawl_id)
            changed += 1
    hosts = {key.decode() for key, _ in session.table(HOSTS).scan()} | set(in_flight)
    for host in sorted(hosts):
        state = session.host(host)
        if state.in_flight != in_flight.get(host, 0):
            state.in_flight = in_flight.get(host, 0)
            changed += 1
    return changed
