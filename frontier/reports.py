"""ParseReports and PageRank scores on the `urls` and `scores` topics (DESIGN.md section 3, step 2).

A fetched page's ParseReport says how many DiscoveredUrls messages its links were sent in: counted
here (``reports_admitted``, ``discovered_messages_announced``), it ends the page's wait at its depth
(`frontier.progress` tells from these counts when a crawl is done). A page's latest PageRank is kept
for the ``pagerank`` strategy, which `frontier.admission` reads when it queues the page.
"""

from __future__ import annotations

from frontier.budget import depth_counter, depth_ordered
from frontier.records import LEASES, REPORTS, SCORES, LeaseRecord, ReportWait, dump
from frontier.session import PartitionSession
from schemas.canonical import canonical_url, url_fingerprint
from schemas.scores import PageScore
from schemas.urls import ParseReport


def admit_report(session: PartitionSession, report: ParseReport) -> None:
    """Count a page's ParseReport; the page stops holding its depth unfinished.

    A report that arrives before its page's outcome (the lease is still open) leaves an ``early``
    mark, so the outcome does not wait for it; a repeated report changes nothing but the counters.
    """
    crawl_id = report.crawl_id
    session.count(crawl_id, "reports_admitted")
    session.count(crawl_id, "discovered_messages_announced", report.discovered_messages)
    _announce_links(session, report)
    reports = session.table(REPORTS)
    lease_key = report.lease_id.encode()
    raw = reports.get(lease_key)
    if raw is not None:
        wait = ReportWait.decode(raw)
        if not wait.early:
            reports.delete(lease_key)
            session.unfinished(wait.crawl_id, wait.depth, -1)
        return
    open_lease = session.table(LEASES).get(lease_key)
    if open_lease is not None:
        lease = LeaseRecord.decode(open_lease)
        reports.put(lease_key, ReportWait(lease.crawl_id, lease.depth, early=True).encode())


def _announce_links(session: PartitionSession, report: ParseReport) -> None:
    """Depth-ordered crawls: the report's messages count as announced one depth below its page."""
    crawl = session.crawl_state(report.crawl_id)
    if crawl is None or not depth_ordered(crawl.request) or report.discovered_messages == 0:
        return
    canonical = canonical_url(report.page_url)
    page = (
        None if canonical is None else session.visited(crawl.crawl_id, url_fingerprint(canonical))
    )
    if page is not None:
        name = depth_counter("announced", page.depth + 1)
        session.count(crawl.crawl_id, name, report.discovered_messages)


def record_score(session: PartitionSession, score: PageScore) -> None:
    """Keep a page's latest PageRank for the ``pagerank`` strategy (used when it is queued)."""
    canonical = canonical_url(score.url)
    if canonical is not None:
        session.table(SCORES).put(url_fingerprint(canonical), dump({"pagerank": score.pagerank}))
