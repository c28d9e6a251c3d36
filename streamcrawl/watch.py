"""Following a crawl from the outside: its status from `crawls`, its counters from `progress`.

The CLI reads both topics whole, sums the latest counters of every frontier partition, and prints
a line a second until the crawl's status is done (set by the crawl's owner from the same snapshots,
DESIGN section 3 step 8): no timeout guesses that a crawl finished.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from schemas import crawls, progress
from schemas.serde import decode
from streamcrawl.kafka import table_consumer_config
from streamcrawl.settings import Settings
from streamcrawl.table import TopicTable
from streamcrawl.topics import topic_name

FINAL_STATUSES = ("done", "cancelled")
SHOWN = ("fetched", "queued", "leased", "failed", "dead", "redirects", "duplicate")


@dataclass(frozen=True)
class CrawlView:
    status: str | None
    counters: dict[str, int]


class CrawlWatcher:
    def __init__(self, settings: Settings) -> None:
        self._crawls: TopicTable[crawls.CrawlState] = TopicTable(
            table_consumer_config(settings),
            topic_name(settings, crawls.TOPIC),
            lambda raw: decode(crawls.CrawlState, raw),
        )
        self._progress: TopicTable[progress.PartitionProgress] = TopicTable(
            table_consumer_config(settings),
            topic_name(settings, progress.TOPIC),
            lambda raw: decode(progress.PartitionProgress, raw),
        )

    def __enter__(self) -> CrawlWatcher:
        self._crawls.start()
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._crawls.stop()
        self._progress.stop()

    def view(self, crawl_id: str) -> CrawlView:
        state = self._crawls.get(crawl_id)
        totals: dict[str, int] = {}
        for key, snapshot in self._progress.snapshot().items():
            if key.startswith(f"{crawl_id}/"):
                for name, value in snapshot.counters.items():
                    totals[name] = totals.get(name, 0) + value
        return CrawlView(state.status if state else None, totals)

    def follow(
        self,
        crawl_id: str,
        show: Callable[[str], None],
        timeout_s: float | None = None,
        interval_s: float = 1.0,
    ) -> CrawlView:
        """Print progress until the crawl reaches a final status (or the optional timeout)."""
        started = time.monotonic()
        last_fetched, last_at = 0, started
        while True:
            view = self.view(crawl_id)
            now = time.monotonic()
            fetched = view.counters.get("fetched", 0)
            rate = (fetched - last_fetched) / max(now - last_at, 1e-6)
            last_fetched, last_at = fetched, now
            parts = " ".join(f"{name}={view.counters.get(name, 0)}" for name in SHOWN)
            show(f"[{now - started:6.1f}s] {view.status or 'submitted'} {parts} pages/s={rate:.1f}")
            if view.status in FINAL_STATUSES:
                return view
            if timeout_s is not None and now - started > timeout_s:
                return view
            time.sleep(interval_s)


def summary_lines(view: CrawlView) -> list[str]:
    counters = view.counters
    rejected = {
        k.removeprefix("rejected_"): v
        for k, v in counters.items()
        if k.startswith("rejected_") and v
    }
    lines = [
        f"status: {view.status}",
        f"pages fetched: {counters.get('fetched', 0)}  unchanged: {counters.get('unchanged', 0)}"
        f"  failed: {counters.get('failed', 0)}  dead: {counters.get('dead', 0)}"
        f"  redirects: {counters.get('redirects', 0)}",
        f"URLs discovered: {counters.get('discovered', 0)}  admitted: {counters.get('admitted', 0)}"
        f"  duplicates: {counters.get('duplicate', 0)}",
    ]
    if rejected:
        lines.append("out of scope: " + ", ".join(f"{k}={v}" for k, v in sorted(rejected.items())))
    return lines
