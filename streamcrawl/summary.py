"""The summary `streamcrawl crawl` prints once a crawl is done.

The counters, URLs by last outcome included (`streamcrawl.watch.urls_by_outcome`), come from
`progress`, the top pages by PageRank and the orphans from the link graph's API (asked to rank at
once first, so the summary does not wait for the ranker's next round), and where the WARC files
are from storage's API (`streamcrawl.apis`). A service that is not running, or does
not answer, is named as such in the summary; it never fails the command, whose exit status
says only whether the crawl finished.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamcrawl.apis import ApiError, ServiceDirectory, get_json, post_json
from streamcrawl.watch import CrawlView, urls_by_outcome

TOP_PAGES = 10
ORPHANS_SHOWN = 10
WARCS_SHOWN = 5


@dataclass
class CrawlSummary:
    crawl_id: str
    view: CrawlView
    urls_by_outcome: dict[str, int] = field(default_factory=dict)
    top_pages: list[dict[str, Any]] | None = None
    orphans: list[Any] | None = None
    warc_root: str | None = None
    warc_files: list[Any] | None = None
    notes: list[str] = field(default_factory=list)
    """Why a part is missing: "link graph not running", an API error."""


def gather_summary(
    crawl_id: str,
    view: CrawlView,
    directory: ServiceDirectory | None,
) -> CrawlSummary:
    summary = CrawlSummary(crawl_id, view, urls_by_outcome(view.counters))
    graph = directory.api_address("linkgraph") if directory else None
    if graph is None:
        summary.notes.append("link graph not running: no PageRank or orphans")
    else:
        try:
            post_json(graph, "/v1/graph/rank")  # rank the finished crawl now, not at the next tick
            top = get_json(graph, "/v1/graph/top", limit=TOP_PAGES, crawl_id=crawl_id)
            summary.top_pages = list(top.get("pages", []))
            orphans = get_json(graph, "/v1/graph/orphans", crawl_id=crawl_id)
            if isinstance(orphans, dict):
                orphans = orphans.get("pages", orphans.get("orphans", []))
            summary.orphans = list(orphans)
        except ApiError as error:
            summary.notes.append(f"link graph did not answer: {error}")
    storage = directory.api_address("storage") if directory else None
    if storage is None:
        summary.notes.append("storage not running: no WARC files")
    else:
        try:
            warcs = get_json(storage, "/v1/storage/warcs", crawl_id=crawl_id)
            summary.warc_root = str(warcs.get("root", ""))
            summary.warc_files = list(warcs.get("files", []))
        except ApiError as error:
            summary.notes.append(f"storage did not answer: {error}")
    return summary


ENDED_BY = {"max_duration": "its max duration was reached: its queued URLs were dropped"}
"""How the summary says which limit ended a crawl (`CrawlState.ended_by`)."""


def summary_lines(summary: CrawlSummary) -> list[str]:
    counters = summary.view.counters
    rejected = {
        k.removeprefix("rejected_"): v
        for k, v in counters.items()
        if k.startswith("rejected_") and v
    }
    ended = ENDED_BY.get(summary.view.ended_by or "")
    lines = [
        f"status: {summary.view.status}" + (f" ({ended})" if ended else ""),
        f"pages fetched: {counters.get('fetched', 0)}  unchanged: {counters.get('unchanged', 0)}"
        f"  failed: {counters.get('failed', 0)}  dead: {counters.get('dead', 0)}"
        f"  redirects: {counters.get('redirects', 0)}",
        f"URLs discovered: {counters.get('discovered', 0)}  admitted: {counters.get('admitted', 0)}"
        f"  duplicates: {counters.get('duplicate', 0)}",
    ]
    if counters.get("recrawls", 0):
        lines.append(
            f"recrawls: {counters['recrawls']}  found changed: {counters.get('changed', 0)}"
            f"  unchanged: {counters.get('unchanged', 0)}"
        )
    if summary.urls_by_outcome:
        by_status = ", ".join(f"{k}={v}" for k, v in summary.urls_by_outcome.items())
        lines.append(f"URLs by last outcome: {by_status}")
    if rejected:
        lines.append("out of scope: " + ", ".join(f"{k}={v}" for k, v in sorted(rejected.items())))
    if counters.get("dead", 0):
        lines.append(f"dead URLs and why: streamcrawl deadletters --crawl-id {summary.crawl_id}")
        lines.append(f"broken links and the pages linking: streamcrawl broken {summary.crawl_id}")
    if summary.view.extracts:
        lines.append(f"extracted items: streamcrawl items {summary.crawl_id}")
    if summary.view.signs_text:
        lines.append(f"near-duplicate pages: streamcrawl duplicates {summary.crawl_id} --near")
    if summary.top_pages is not None:
        lines.append(f"top pages by PageRank ({len(summary.top_pages)}):")
        for page in summary.top_pages:
            lines.append(f"  {float(page.get('score', 0.0)):.5f}  {page.get('url')}")
    if summary.orphans is not None:
        lines.append(f"orphans: {len(summary.orphans)}")
        lines.extend(f"  {_orphan_url(orphan)}" for orphan in summary.orphans[:ORPHANS_SHOWN])
    if summary.warc_files is not None:
        lines.append(f"WARC files: {len(summary.warc_files)} under {summary.warc_root}")
        lines.extend(f"  {_warc_path(item)}" for item in summary.warc_files[:WARCS_SHOWN])
    lines.extend(summary.notes)
    return lines


def _orphan_url(orphan: Any) -> str:
    return str(orphan.get("url", orphan)) if isinstance(orphan, dict) else str(orphan)


def _warc_path(item: Any) -> str:
    return str(item.get("path", item)) if isinstance(item, dict) else str(item)
