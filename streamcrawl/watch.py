"""Following a crawl from the outside: its status from `crawls`, its counters from `progress`,
and how each of its URLs ended from `outcomes`.

The CLI reads `crawls` and `progress` whole, sums the latest counters of every frontier partition,
and shows them until the crawl's status is done (set by the crawl's owner from two consecutive
snapshots of every partition, DESIGN section 3 step 8): no timeout guesses that a crawl finished.
On a terminal the display is a live `rich` table; elsewhere (a pipe, CI) a line every few seconds.
The summary's "URLs by last outcome" are counters too: each frontier partition counts the crawl's
URLs by their latest outcome (`frontier.outcomes.relabel`). A crawl that ends with fetches still
leased (cancelled, or at its max duration) is followed until they report back.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.table import Table

from schemas import crawls, progress
from schemas.outcomes import OUTCOME_COUNTER
from schemas.serde import decode
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.kafka import table_consumer_config
from streamcrawl.settings import Settings
from streamcrawl.table import TopicTable
from streamcrawl.topics import topic_name

FINAL_STATUSES = ("done", "cancelled")
LEASES_DRAIN_S = 30.0
"""How long following waits, once a crawl is final, for the outcomes of its leased fetches."""
SHOWN = (
    "fetched",
    "queued",
    "leased",
    "delayed",
    "hosts_held",
    "failed",
    "dead",
    "redirects",
    "duplicate",
)
"""The counters `crawl` follows. `delayed` are failed URLs waiting for their retry and
`hosts_held` hosts held back by a Retry-After or an unreadable robots.txt: without them a crawl
that only waits would look stalled (queued URLs, nothing leased, yet not done)."""
RATE_WINDOW_S = 5.0


@dataclass(frozen=True)
class CrawlView:
    status: str | None
    counters: dict[str, int]
    ended_by: str | None = None
    """The limit that ended the crawl, when one did (`CrawlState.ended_by`)."""
    extracts: bool = False
    """The crawl names fields to extract (`--extract`): its pages have items."""
    signs_text: bool = False
    """The crawl finds near duplicates (`--near-duplicates`): its pages' main texts are signed."""


TABLES_LOADED_S = 30.0
"""How long a command waits for `crawls` and `progress` to be read to their ends."""


def crawl_state(settings: Settings, crawl_id: str) -> crawls.CrawlState | None:
    """The crawl's state as `crawls` has it now; None when it has none."""
    with CrawlWatcher(settings) as watcher:
        watcher.require_loaded()
        return watcher.state(crawl_id)


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

    def wait_loaded(self, timeout_s: float) -> bool:
        """Whether `crawls` and `progress` were both read up to their ends within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        return self._crawls.wait_ready(timeout_s) and self._progress.wait_ready(
            max(0.0, deadline - time.monotonic())
        )

    def require_loaded(self) -> None:
        """`wait_loaded`, or a StreamcrawlError saying the tables could not be read."""
        if not self.wait_loaded(TABLES_LOADED_S):
            raise StreamcrawlError(f"could not read the crawls table within {TABLES_LOADED_S}s")

    def state(self, crawl_id: str) -> crawls.CrawlState | None:
        return self._crawls.get(crawl_id)

    def view(self, crawl_id: str) -> CrawlView:
        state = self._crawls.get(crawl_id)
        totals = self._totals(lambda key: key.startswith(f"{crawl_id}/")).get(crawl_id, {})
        if state is None:
            return CrawlView(None, totals)
        return CrawlView(
            state.status,
            totals,
            state.ended_by,
            extracts=state.request.extract is not None,
            signs_text=state.request.find_near_duplicates,
        )

    def crawls(self) -> list[tuple[crawls.CrawlState, dict[str, int]]]:
        """Every crawl in `crawls` with its counters, oldest first."""
        totals = self._totals(lambda key: True)
        states = sorted(self._crawls.snapshot().values(), key=lambda state: state.created_at)
        return [(state, totals.get(state.crawl_id, {})) for state in states]

    def _totals(self, wanted: Callable[[str], bool]) -> dict[str, dict[str, int]]:
        """Counters summed over partitions, by crawl, of the `progress` keys (crawl/partition)
        ``wanted`` keeps."""
        totals: dict[str, dict[str, int]] = {}
        for key, snapshot in self._progress.snapshot().items():
            if wanted(key):
                crawl = totals.setdefault(key.rsplit("/", 1)[0], {})
                for name, value in snapshot.counters.items():
                    crawl[name] = crawl.get(name, 0) + value
        return totals

    def follow(
        self,
        crawl_id: str,
        show: Callable[[str], None],
        timeout_s: float | None = None,
        interval_s: float = 1.0,
        console: Console | None = None,
    ) -> CrawlView:
        """Show progress until the crawl reaches a final status (or the optional timeout) and the
        fetches it had leased then reported back (a crawl cancelled or ended by its max duration
        still has some), for at most `LEASES_DRAIN_S`.

        With a terminal `console` the progress is a live table; otherwise `show` gets a line
        every `interval_s`.
        """
        rate = PageRate()
        started = time.monotonic()
        final_at: float | None = None

        def tick() -> tuple[CrawlView, float, bool]:
            nonlocal final_at
            view = self.view(crawl_id)
            now = time.monotonic()
            pages_per_s = rate.add(now, view.counters.get("fetched", 0))
            finished = False
            if view.status in FINAL_STATUSES:
                final_at = now if final_at is None else final_at
                drained = view.counters.get("leased", 0) <= 0
                finished = drained or now - final_at >= LEASES_DRAIN_S
            timed_out = timeout_s is not None and now - started > timeout_s
            return view, pages_per_s, finished or timed_out

        if console is not None and console.is_terminal:
            with Live(console=console, refresh_per_second=4, transient=False) as live:
                while True:
                    view, pages_per_s, stop = tick()
                    live.update(progress_table(crawl_id, view, pages_per_s, started))
                    if stop:
                        return view
                    time.sleep(min(interval_s, 0.25))
        while True:
            view, pages_per_s, stop = tick()
            show(progress_line(view, pages_per_s, time.monotonic() - started))
            if stop:
                return view
            time.sleep(interval_s)


class PageRate:
    """Pages per second over the last few seconds of `fetched` counts."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self._samples: deque[tuple[float, int]] = deque()
        self._window_s = window_s

    def add(self, now: float, fetched: int) -> float:
        self._samples.append((now, fetched))
        while len(self._samples) > 2 and now - self._samples[0][0] > self._window_s:
            self._samples.popleft()
        first_at, first = self._samples[0]
        return (fetched - first) / (now - first_at) if now > first_at else 0.0


def progress_line(view: CrawlView, pages_per_s: float, elapsed_s: float) -> str:
    parts = " ".join(f"{name}={view.counters.get(name, 0)}" for name in SHOWN)
    status = view.status or "submitted"
    return f"[{elapsed_s:6.1f}s] {status} {parts} pages/s={pages_per_s:.1f}"


def progress_table(crawl_id: str, view: CrawlView, pages_per_s: float, started: float) -> Table:
    table = Table(title=f"crawl {crawl_id}: {view.status or 'submitted'}", show_header=True)
    for name in (*SHOWN, "pages/s", "elapsed"):
        table.add_column(name, justify="right")
    elapsed = time.monotonic() - started
    table.add_row(
        *(str(view.counters.get(name, 0)) for name in SHOWN),
        f"{pages_per_s:.1f}",
        f"{elapsed:.0f}s",
    )
    return table


def urls_by_outcome(counters: Mapping[str, int]) -> dict[str, int]:
    """A crawl's URLs by their latest outcome (the HTTP status, or the outcome's kind when there was
    none), from the frontier's ``outcome_<label>`` counters summed over partitions: constant in
    size whatever the crawl's, and nothing of `outcomes` to read."""
    counts = (
        (name.removeprefix(OUTCOME_COUNTER), value)
        for name, value in counters.items()
        if name.startswith(OUTCOME_COUNTER) and value > 0
    )
    return dict(sorted(counts))
