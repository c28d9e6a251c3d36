"""Recrawl scheduling: when a fetched page is due again (seed 004, recrawling and change detection).

A crawl with ``recrawl_interval_hours`` fetches every page it fetched again, conditionally (its
ETag, Last-Modified and content hash: an unchanged page costs a 304 or no storage write), that long
after the page's last fetch (`frontier.outcomes`). With one interval for all pages, most of the
fetches of a large site find nothing new: most pages change far more rarely than the few that
change often.

With ``recrawl_adaptive``, each URL has an interval of its own, as Nutch's AdaptiveFetchSchedule and
Heritrix's WaitEvaluator keep one. It starts at ``recrawl_interval_hours``. A recrawl that finds the
page changed divides it by :data:`CHANGED_FACTOR`; one that finds it unchanged multiplies it by
:data:`UNCHANGED_FACTOR`. It stays within ``recrawl_min_hours`` (default: the interval / 4) and
``recrawl_max_hours`` (default: the interval x 4): from a day, six hours to four days.

The interval settles where a recrawl finds a change with probability log 1.25 / log 1.875, about
35 %: for a page changing at random at rate r, where the interval is about 0.44 / r, within the
bounds. So a page that changes daily is fetched about every ten hours, and one that never changes
at the longest interval.

`tests/bench/bench_recrawl.py` measured these factors and default bounds against one fixed interval
of the same cost, on a wiki-like mix of pages (most rarely changed, a few busy). Twice as many
recrawls found a change (59 % against 28 %), more pages were current (0.83 against 0.80) and they
were stale for less time (1.3 h against 1.7 h on average). Where every page changes slowly, the
adaptive interval spends half the fetches of the crawl's fixed one, and its pages stay stale
longer (tests/bench/RESULTS.md, session 43). Wider bounds save more fetches on pages that never
change and spend more on busy ones, but a page with a long interval shows its changes late.

A sitemap can say sooner: a URL found again in a sitemap whose ``<lastmod>`` is later than the
URL's last fetch is recrawled at once (`frontier.admission`, counted ``recrawls_by_lastmod``). The
`delayed` entry of the recrawl it replaces stays, and is passed over when it comes due
(:func:`superseded`).
"""

from __future__ import annotations

from frontier.records import VisitedRecord
from schemas.seeds import CrawlRequest

HOUR_MS = 3_600_000
CHANGED_FACTOR = 1.5
UNCHANGED_FACTOR = 1.25
MIN_FRACTION = 1 / 4
"""The default shortest adaptive interval, as a fraction of the crawl's interval."""
MAX_MULTIPLE = 4
"""The default longest adaptive interval, as a multiple of the crawl's interval."""


def recrawl_interval_ms(request: CrawlRequest, last_ms: int | None, changed: bool) -> int | None:
    """How long after this fetch the page is due again (None: never). ``last_ms`` is the URL's
    interval before this fetch (None: its first fetch), ``changed`` whether the fetch found the
    page changed."""
    hours = request.recrawl_interval_hours
    if hours is None:
        return None
    interval_ms = round(hours * HOUR_MS)
    if not request.recrawl_adaptive or last_ms is None:
        return interval_ms
    shortest, longest = adaptive_bounds_ms(request)
    adapted = last_ms / CHANGED_FACTOR if changed else last_ms * UNCHANGED_FACTOR
    return round(min(max(adapted, shortest), longest))


def is_recrawl(visited: VisitedRecord) -> bool:
    """Whether the URL's next lease is a recrawl: it was fetched and scheduled again before.

    A recrawl is outside the breadth-first bookkeeping of depth-ordered crawls
    (`frontier.budget`): it neither waits for lower depths to finish nor holds its own depth
    unfinished, as the depth it has is already its shortest one. Were it counted, the recrawls of
    lower depths, coming due all the time in a large crawl, would keep every deeper page from its
    recrawl and every new page from its first fetch. The test gives the same answer from the
    recrawl's release to its end, since the interval is set only after the first fetch ended."""
    return visited.recrawl_interval_ms is not None


def waiting_for_recrawl(visited: VisitedRecord) -> bool:
    """Whether a ``waiting`` URL waits for its recrawl, not for a retry: it waits for a recrawl
    after a fetch (its latest outcome a status below 400), for a retry after a retryable outcome
    (429, 5xx, a timeout, a network error)."""
    outcome = visited.outcome or ""
    return visited.state == "waiting" and outcome.isdigit() and int(outcome) < 400


def superseded(visited: VisitedRecord, due_ms: int) -> bool:
    """Whether a `delayed` entry due at ``due_ms`` is not the URL's any more: the URL no longer
    waits, or waits for another time (a sitemap brought its recrawl forward,
    `frontier.admission`). Only a waiting URL has an entry there, and its record says when it
    is due (a record from before due times were kept says nothing: the entry is its own)."""
    if visited.state != "waiting":
        return True
    return visited.due_ms is not None and visited.due_ms != due_ms


def adaptive_bounds_ms(request: CrawlRequest) -> tuple[int, int]:
    """The shortest and longest interval of an adaptive recrawl."""
    hours = request.recrawl_interval_hours
    assert hours is not None  # the request's validation: adaptive needs an interval
    shortest = request.recrawl_min_hours or hours * MIN_FRACTION
    longest = request.recrawl_max_hours or hours * MAX_MULTIPLE
    return round(shortest * HOUR_MS), round(longest * HOUR_MS)
