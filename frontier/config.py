"""What the frontier handler is built from: its settings, its topic names and its two read views.

`FrontierConfig` holds the tunables (lease timeout, fetcher per-host concurrency, progress cadence,
scan and batch bounds, budget request sizes, retry backoff, retention of finished crawls).
`FrontierTopics` holds the deployment's full topic names, so the handler dispatches on exact names
and produces to the right ones.

Two views are read, never written, by the handler and are injected:

- `CrawlDirectory`: every crawl's latest CrawlState, read whole from the compacted `crawls` topic
  (a `streamcrawl.table.TopicTable` in production, a dict in tests);
- `ProgressView`: the latest two PartitionProgress snapshots of every partition of a crawl (a
  `frontier.progress.ProgressBook` fed by a TopicTable's change callback in production).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from frontier.retry import DEFAULT_BASE_MS, DEFAULT_CAP_MS, DEFAULT_RECOVERY_SUCCESSES
from frontier.traps import DEFAULT_TRAP_LIMITS, TrapLimits
from schemas import budget, crawls, deadletter, fetch, outcomes, progress, scores, seeds, urls
from schemas.crawls import CrawlState
from schemas.progress import PartitionProgress

DEFAULT_PREFIX = "crawl."


@dataclass(frozen=True)
class FrontierConfig:
    """The frontier's tunables; defaults follow DESIGN.md sections 3 and 4."""

    lease_timeout_ms: int = 600_000
    """A lease not answered by then is queued again (a safety net: Kafka redelivers)."""
    fetcher_host_concurrency: int = 2
    """The fetcher's per-host connection limit, for hosts without a politeness delay."""
    progress_interval_ms: int = 1_000
    """PartitionProgress is published at most this often, and only when counters changed..."""
    heartbeat_interval_ms: int = 5_000
    """...or when this long passed since a crawl's last snapshot (while the crawl is running)."""
    parked_recheck_ms: int = 30_000
    """Hosts whose queued URLs were all blocked (paused crawl, budget, BFS depth) are woken by the
    events that unblock them (a grant, a finished depth, a directory change); as a safety net,
    every host with queued URLs is tried again at least this often."""
    release_scan_limit: int = 256
    """Queue entries one release looks at; one that leased or dropped this many is released
    again at the next tick (`frontier.release`)."""
    recrawl_every: int = 4
    """A host that has both due recrawls and new pages waiting leases a recrawl after this many
    new pages (`frontier.release`): recrawls get a fifth of a busy host's fetches, so a continuous
    crawl's hubs (home pages, feeds) stay fresh under a flood of new pages. 0: recrawls only when
    no new page waits."""
    timer_batch: int = 1_000
    """Expired leases and due delayed entries handled per tick (the rest wait one cycle)."""
    pending_batch: int = 100
    """Waiting DiscoveredUrls admitted per tick once their crawl is known."""
    budget_low_water: int = 16
    budget_chunk: int = 64
    budget_resend_after_ms: int = 30_000
    retry_base_ms: int = DEFAULT_BASE_MS
    retry_cap_ms: int = DEFAULT_CAP_MS
    window_recovery_successes: int = DEFAULT_RECOVERY_SUCCESSES
    trap_limits: TrapLimits = field(default=DEFAULT_TRAP_LIMITS)
    bloom_expected_urls: int = 1_000_000
    """URLs per state partition the visited-set Bloom filter is sized for (about 1.6 MB)."""
    bloom_false_positive_rate: float = 0.01
    urls_max_message_bytes: int = urls.TOPIC.max_message_bytes
    """Seed messages are split into parts under this size."""
    finished_crawl_retention_ms: int = 7 * 24 * 3_600_000
    """A crawl done or cancelled longer ago than this (its CrawlState's ``updated_at``) has its
    state deleted from every partition (`frontier.purge`)."""
    purge_interval_ms: int = 60_000
    """How often a partition looks for such crawls."""
    purge_batch: int = 5_000
    """Keys a purge reads or deletes per tick (the rest wait a cycle)."""

    def __post_init__(self) -> None:
        positive = (
            self.lease_timeout_ms,
            self.fetcher_host_concurrency,
            self.progress_interval_ms,
            self.heartbeat_interval_ms,
            self.parked_recheck_ms,
            self.release_scan_limit,
            self.timer_batch,
            self.pending_batch,
            self.budget_chunk,
            self.purge_interval_ms,
            self.purge_batch,
        )
        if min(positive) < 1:
            raise ValueError("frontier intervals, limits and batch sizes must be positive")
        if self.recrawl_every < 0:
            raise ValueError("recrawl_every cannot be negative")
        if self.finished_crawl_retention_ms < 0:
            raise ValueError("the retention of finished crawls cannot be negative")


@dataclass(frozen=True)
class FrontierTopics:
    """Full topic names (prefix included) the frontier reads and writes."""

    seeds: str
    crawls: str
    budget: str
    urls: str
    outcomes: str
    scores: str
    fetch: str
    progress: str
    deadletter: str

    @classmethod
    def from_prefix(cls, prefix: str = DEFAULT_PREFIX) -> FrontierTopics:
        return cls(
            seeds=seeds.TOPIC.name(prefix),
            crawls=crawls.TOPIC.name(prefix),
            budget=budget.TOPIC.name(prefix),
            urls=urls.TOPIC.name(prefix),
            outcomes=outcomes.TOPIC.name(prefix),
            scores=scores.TOPIC.name(prefix),
            fetch=fetch.TOPIC.name(prefix),
            progress=progress.TOPIC.name(prefix),
            deadletter=deadletter.TOPIC.name(prefix),
        )

    @property
    def inputs(self) -> tuple[str, ...]:
        """The co-partitioned inputs of the frontier's group, in the order the spec lists them."""
        return (self.seeds, self.budget, self.urls, self.outcomes, self.scores)


class CrawlDirectory(Protocol):
    """Every crawl's latest CrawlState by crawl id (the `crawls` table)."""

    def get(self, key: str, /) -> CrawlState | None: ...


class ProgressView(Protocol):
    """The latest two snapshots (oldest first) of each partition that reported on a crawl."""

    def snapshots(self, crawl_id: str, /) -> Mapping[int, Sequence[PartitionProgress]]: ...
