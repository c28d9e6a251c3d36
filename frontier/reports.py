"""ParseReports and PageRank scores on the `urls` and `scores` topics (DESIGN.md section 3, step 2).

A fetched page's ParseReport says how many DiscoveredUrls messages its links were sent in. The
page's outcome (saying a page was sent) and its report each count once per lease, whatever the
order they arrive in and however often they are delivered (a fetcher or parser that restarts sends
some again), through the lease's :class:`frontier.records.ReportWait`:

- the first outcome counts ``reports_expected``; unless the report came first, the page now waits
  for it (gauge ``reports_waiting``), holding its depth unfinished if its lease was open;
- the first report counts ``reports_admitted`` and adds its messages to
  ``discovered_messages_announced``, ending the wait;
- anything repeated counts ``reports_repeated`` (a report) or nothing (an outcome).

Done detection (`frontier.progress`) needs no report waiting anywhere, which a repeated report can
no longer fake. A page's latest PageRank is kept for the ``pagerank`` strategy, which
`frontier.admission` reads when it queues the page.
"""

from __future__ import annotations

from dataclasses import replace

from frontier.budget import depth_counter, depth_ordered
from frontier.records import REPORTS, SCORES, ReportWait, dump, report_key
from frontier.session import PartitionSession
from schemas.canonical import canonical_url, url_fingerprint
from schemas.outcomes import FetchOutcome
from schemas.scores import PageScore
from schemas.urls import ParseReport
from streamcrawl.state import Table


def expect_report(session: PartitionSession, outcome: FetchOutcome, depth: int | None) -> None:
    """An outcome said its page was sent: the lease's report is expected (once). ``depth``: the
    depth the page holds unfinished until then; None for none (the lease was not open any more,
    or it was a recrawl, `frontier.recrawl.is_recrawl`)."""
    crawl_id = outcome.crawl_id
    reports, key, wait = _lease_wait(session, crawl_id, outcome.lease_id)
    if wait is not None and wait.state != "early":
        return
    session.count(crawl_id, "reports_expected")
    if wait is not None:
        reports.put(key, replace(wait, state="reported").encode())
        return
    reports.put(key, ReportWait(crawl_id, "waiting", depth).encode())
    session.count(crawl_id, "reports_waiting")
    if depth is not None:
        session.unfinished(crawl_id, depth, 1)


def admit_report(session: PartitionSession, report: ParseReport) -> None:
    """Count a page's ParseReport (once); the page stops holding its depth unfinished."""
    crawl_id = report.crawl_id
    reports, key, wait = _lease_wait(session, crawl_id, report.lease_id)
    if wait is not None and wait.state != "waiting":
        session.count(crawl_id, "reports_repeated")
        return
    session.count(crawl_id, "reports_admitted")
    session.count(crawl_id, "discovered_messages_announced", report.discovered_messages)
    _announce_links(session, report)
    if wait is None:
        reports.put(key, ReportWait(crawl_id, "early").encode())
        return
    reports.put(key, replace(wait, state="reported", depth=None).encode())
    session.count(crawl_id, "reports_waiting", -1)
    if wait.depth is not None:
        session.unfinished(crawl_id, wait.depth, -1)


def _lease_wait(
    session: PartitionSession, crawl_id: str, lease_id: str
) -> tuple[Table, bytes, ReportWait | None]:
    """The `reports` table, the lease's key in it and its record, if any."""
    reports = session.table(REPORTS)
    key = report_key(crawl_id, lease_id)
    raw = reports.get(key)
    return reports, key, None if raw is None else ReportWait.decode(raw)


def _announce_links(session: PartitionSession, report: ParseReport) -> None:
    """Depth-ordered crawls: the report's messages count as announced one depth below its page,
    its refresh's (``redirect_messages``) at the page's depth."""
    crawl = session.crawl_state(report.crawl_id)
    if crawl is None or not depth_ordered(crawl.request) or report.discovered_messages == 0:
        return
    canonical = canonical_url(report.page_url)
    page = (
        None if canonical is None else session.visited(crawl.crawl_id, url_fingerprint(canonical))
    )
    if page is None:
        return
    links = report.discovered_messages - report.redirect_messages
    for depth, count in ((page.depth + 1, links), (page.depth, report.redirect_messages)):
        if count > 0:
            session.count(crawl.crawl_id, depth_counter("announced", depth), count)


def record_score(session: PartitionSession, score: PageScore) -> None:
    """Keep a page's latest PageRank for the ``pagerank`` strategy (used when it is queued)."""
    canonical = canonical_url(score.url)
    if canonical is not None:
        session.table(SCORES).put(url_fingerprint(canonical), dump({"pagerank": score.pagerank}))
