"""Following a crawl from the outside: its status from `crawls`, its counters from `progress`,
and how each of its URLs ended from `outcomes`.

The CLI reads `crawls` and `progress` whole, sums the latest counters of every frontier partition,
and shows them until the crawl's status is done (set by the crawl's owner from two consecutive
snapshots of every partition, DESIGN section 3 step 8): no timeout guesses that a crawl finished.
On a terminal the display is a live `rich` table; elsewhere (a pipe, CI) a line every few seconds.
An :class:`OutcomeTally` reads `outcomes` from the crawl's start (from that moment, when started
before the crawl is submitted; from its creation time, for `watch`) and keeps the latest outcome
of each of the crawl's URLs, for the summary's "URLs by last outcome". A crawl that ends with
fetches still leased (cancelled, or at its max duration) is followed until they report back.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

import mmh3
import orjson
from confluent_kafka import Consumer, TopicPartition
from rich.console import Console
from rich.live import Live
from rich.table import Table

from schemas import crawls, outcomes, progress
from schemas.serde import decode
from streamcrawl.kafka import table_consumer_config
from streamcrawl.settings import Settings
from streamcrawl.table import TopicTable
from streamcrawl.topics import topic_name

FINAL_STATUSES = ("done", "cancelled")
LEASES_DRAIN_S = 30.0
"""How long following waits, once a crawl is final, for the outcomes of its leased fetches."""
TALLY_BATCH = 5_000
TALLY_BUDGET_S = 0.5
"""How long one refresh of the progress may spend reading outcomes."""
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

    def state(self, crawl_id: str) -> crawls.CrawlState | None:
        return self._crawls.get(crawl_id)

    def view(self, crawl_id: str) -> CrawlView:
        state = self._crawls.get(crawl_id)
        totals = self._totals(lambda key: key.startswith(f"{crawl_id}/")).get(crawl_id, {})
        if state is None:
            return CrawlView(None, totals)
        return CrawlView(state.status, totals, state.ended_by)

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
        on_tick: Callable[[], None] = lambda: None,
    ) -> CrawlView:
        """Show progress until the crawl reaches a final status (or the optional timeout) and the
        fetches it had leased then reported back (a crawl cancelled or ended by its max duration
        still has some), for at most `LEASES_DRAIN_S`.

        With a terminal `console` the progress is a live table; otherwise `show` gets a line
        every `interval_s`. `on_tick` runs once per refresh (the tally reads outcomes there).
        """
        rate = PageRate()
        started = time.monotonic()
        final_at: float | None = None

        def tick() -> tuple[CrawlView, float, bool]:
            nonlocal final_at
            on_tick()
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


class OutcomeTally:
    """The latest outcome of each URL of one crawl, read from `outcomes` from creation on.

    For a new crawl, create it before the crawl is submitted: it starts at the topic's current
    end, so it sees every outcome of the new crawl and reads nothing older. For a crawl already
    running (`streamcrawl watch`), ``since_ms`` is its creation time: each partition starts at
    the first outcome written since (Kafka's offsets for times).

    It keeps one small entry per URL: a 64-bit hash of the URL and the index of its label (the
    HTTP status, or the outcome's kind when there was none), about 100 bytes, read with orjson
    (2 us an outcome). Whole FetchOutcome models took 3.2 KB and 23 us each: 21 GB for all of
    Wikipedia. A message that is not JSON (the frontier dead-letters it) is skipped.
    """

    def __init__(self, settings: Settings, crawl_id: str, since_ms: int | None = None) -> None:
        self.crawl_id = crawl_id
        self._latest: dict[int, int] = {}
        """Per URL (its hash), the index of its latest label in `_labels`."""
        self._labels: dict[str, int] = {}
        topic = topic_name(settings, outcomes.TOPIC)
        self._consumer = Consumer(table_consumer_config(settings))
        partitions = self._consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = [self._high(TopicPartition(topic, partition)) for partition in partitions]
        starts = ends
        if since_ms is not None:
            times = [TopicPartition(topic, partition, since_ms) for partition in partitions]
            found = self._consumer.offsets_for_times(times, timeout=10)
            # -1: nothing was written to that partition since then.
            starts = [end if at.offset < 0 else at for at, end in zip(found, ends, strict=True)]
        self._next = {at.partition: at.offset for at in starts}
        """Per partition, the offset of the next outcome to read."""
        self._consumer.assign(starts)

    def _high(self, partition: TopicPartition) -> TopicPartition:
        _, high = self._consumer.get_watermark_offsets(partition, timeout=10)
        return TopicPartition(partition.topic, partition.partition, high)

    def poll(self, timeout_s: float = 0.0, budget_s: float = TALLY_BUDGET_S) -> None:
        """Read what has arrived, batch after batch for up to ``budget_s`` while batches come
        full (a `watch` of a long crawl starts far behind), the first waiting ``timeout_s``."""
        started = time.monotonic()
        while self._read_batch(timeout_s) == TALLY_BATCH:
            if time.monotonic() - started >= budget_s:
                return
            timeout_s = 0.0

    def _read_batch(self, timeout_s: float) -> int:
        batch = self._consumer.consume(TALLY_BATCH, timeout_s)
        for message in batch:
            if message.error() is not None:
                continue
            partition, offset = message.partition(), message.offset()
            if partition is not None and offset is not None:
                self._next[partition] = offset + 1
            value = message.value()
            if value is not None:
                self._count(value)
        return len(batch)

    def _count(self, value: bytes) -> None:
        try:
            outcome = orjson.loads(value)
            if outcome.get("crawl_id") != self.crawl_id:
                return
            status = outcome.get("status")
            label = str(status) if status is not None else str(outcome["kind"])
            url = str(outcome["url"])
        except (orjson.JSONDecodeError, AttributeError, KeyError):
            return
        index = self._labels.setdefault(label, len(self._labels))
        self._latest[mmh3.hash64(url.encode(), signed=False)[0]] = index

    def catch_up(self, timeout_s: float) -> bool:
        """Read up to the topic's end as it is now; False when `timeout_s` ran out first."""
        ends = [self._high(partition) for partition in self._consumer.assignment()]
        deadline = time.monotonic() + timeout_s
        while True:
            if all(self._next[end.partition] >= end.offset for end in ends):
                return True
            if time.monotonic() >= deadline:
                return False
            self.poll(timeout_s=0.2)

    def by_status(self) -> dict[str, int]:
        """URLs by how they ended: the HTTP status, or the outcome kind when there was none."""
        per_index = Counter(self._latest.values())
        counts = {label: per_index[index] for label, index in self._labels.items()}
        return dict(sorted((label, n) for label, n in counts.items() if n))

    def close(self) -> None:
        self._consumer.close()
