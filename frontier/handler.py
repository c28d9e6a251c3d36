"""The frontier's pure logic: message in, messages and state changes out, no Kafka.

DESIGN.md section 3, steps 1-3, 5, 7 and 8. :class:`FrontierHandler` implements the kernel contract
(`streamcrawl.handler.BaseHandler`) and dispatches by input topic:

- `seeds`: crawl requests and commands, on the crawl's owner (`frontier.crawlstate`);
- `budget`: requests on the owner, grants on the partition they name (`frontier.crawlstate`);
- `urls`: DiscoveredUrls (decoded by `frontier.wire`) admitted, or parked until their crawl is
  known (`frontier.admission`), and ParseReports counted (`frontier.reports`);
- `outcomes`: one terminal outcome per lease (`frontier.outcomes`);
- `scores`: PageRank kept for the ``pagerank`` strategy (`frontier.reports`).

Each tick (once per loop cycle per open partition) expires leases, brings due retries and recrawls
back, admits pending messages whose crawl appeared (`frontier.timers`), moves a batch of what an
earlier version left in another layout (`frontier.upgrade`), releases every ready host
(`frontier.release`), and at most every ``progress_interval_ms`` resends unanswered budget requests,
publishes progress and, on owners, flips finished crawls to done (`frontier.progress`). Last, in a
session of its own, it purges crawls finished longer than the retention ago (`frontier.purge`).

One state partition p holds the hosts of partition p of `urls`, `outcomes` and `scores` and the
crawls whose ids land on partition p of `seeds` and `budget`: all inputs share the partition count
and the group uses the range assignor, so p of every input is on one instance. Memory per partition
is `frontier.session.PartitionMemory`, rebuilt in :meth:`on_partition_opened`, which also recounts
the gauges from the tables (`frontier.reconcile`: a crash may have left them off).
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable
from typing import Any

from frontier import admission, crawlstate, purge, release, reports, timers, upgrade, wire
from frontier.config import CrawlDirectory, FrontierConfig, FrontierTopics, ProgressView
from frontier.metrics import CRAWL_COUNTERS, FrontierMetrics, PartitionGauges
from frontier.outcomes import handle_outcome
from frontier.progress import publish_progress
from frontier.reconcile import reconcile
from frontier.records import CRAWL, TABLES
from frontier.retry import RetryPolicy
from frontier.session import FrontierServices, PartitionMemory, PartitionSession
from frontier.wire import ReceivedUrls
from schemas.budget import BUDGET_MESSAGE
from schemas.outcomes import FetchOutcome
from schemas.scores import PageScore
from schemas.seeds import SEED_MESSAGE
from schemas.serde import decode
from streamcrawl.clock import Clock
from streamcrawl.handler import BaseHandler, Context, Record
from streamcrawl.spec import Input

log = logging.getLogger(__name__)

Decoder = Callable[[bytes | None], Any]


def decode_seed(data: bytes | None) -> Any:
    return decode(SEED_MESSAGE, data)


def decode_budget(data: bytes | None) -> Any:
    return decode(BUDGET_MESSAGE, data)


def decode_urls(data: bytes | None) -> Any:
    return wire.decode_urls(data)


def decode_outcome(data: bytes | None) -> Any:
    return decode(FetchOutcome, data)


def decode_score(data: bytes | None) -> Any:
    return decode(PageScore, data)


def random_lease_ids(rng: random.Random) -> Callable[[], str]:
    """Lease ids as uuid4-shaped hex drawn from ``rng`` (deterministic under a seeded RNG)."""
    return lambda: uuid.UUID(int=rng.getrandbits(128), version=4).hex


class FrontierHandler(BaseHandler):
    """See the module docstring; construct from plain objects, wire with :meth:`inputs`."""

    def __init__(
        self,
        config: FrontierConfig,
        topics: FrontierTopics,
        directory: CrawlDirectory,
        progress: ProgressView,
        clock: Clock,
        rng: random.Random,
        new_lease_id: Callable[[], str] | None = None,
        metrics: FrontierMetrics | None = None,
    ) -> None:
        retry = RetryPolicy(clock, rng, base_ms=config.retry_base_ms, cap_ms=config.retry_cap_ms)
        self.services = FrontierServices(
            config=config,
            topics=topics,
            directory=directory,
            progress=progress,
            clock=clock,
            retry=retry,
            new_lease_id=new_lease_id or (lambda: uuid.uuid4().hex),
            metrics=metrics or FrontierMetrics.register(),
        )
        self.memory: dict[int, PartitionMemory] = {}
        self.purges: dict[int, purge.PurgeWork] = {}
        self.purged = 0
        """Crawls whose state a partition of this instance purged (one count per partition)."""
        self._directory_version = 0
        self._gauges: dict[int, PartitionGauges] = {}
        self._host_gauges: dict[int, tuple[int, int, int, int | None]] = {}
        self._crawls_shown: set[str] = set()
        self._dispatch: dict[str, Callable[[PartitionSession, Record], None]] = {
            topics.seeds: lambda s, r: crawlstate.handle_seed_message(s, r.value),
            topics.budget: lambda s, r: crawlstate.handle_budget_message(s, r.value),
            topics.urls: self._handle_urls,
            topics.outcomes: lambda s, r: handle_outcome(s, r.value, r),
            topics.scores: lambda s, r: reports.record_score(s, r.value),
        }

    # ----- wiring -----------------------------------------------------------------------------

    @staticmethod
    def tables() -> tuple[str, ...]:
        return TABLES

    def inputs(self) -> tuple[Input, ...]:
        """The group's inputs with their decoders, for `streamcrawl.service.service_spec`."""
        topics = self.services.topics
        decoders: dict[str, Decoder] = {
            topics.seeds: decode_seed,
            topics.budget: decode_budget,
            topics.urls: decode_urls,
            topics.outcomes: decode_outcome,
            topics.scores: decode_score,
        }
        return tuple(Input(topic, decoders[topic]) for topic in topics.inputs)

    def crawl_changed(self, crawl_id: str) -> None:
        """The directory saw a crawl change (wire to the `crawls` table's on_change, which runs on
        the table's thread): every partition retries its parked hosts at its next tick."""
        self._directory_version += 1

    # ----- kernel hooks -----------------------------------------------------------------------

    def handle(self, record: Record, ctx: Context) -> None:
        handler = self._dispatch.get(record.topic)
        if handler is None:
            raise ValueError(f"the frontier does not consume {record.topic!r}")
        session = self._session(ctx)
        handler(session, record)
        session.finish()

    def on_tick(self, ctx: Context) -> None:
        session = self._session(ctx)
        memory = session.memory
        config = self.services.config
        if session.now_ms - memory.last_progress_ms >= config.progress_interval_ms:
            # Before this tick releases them: how many hosts wait, and since when.
            heap = memory.heap
            due = heap.due(session.now_ms)
            self._host_gauges[session.partition] = (
                due,
                len(heap.queued) - due,
                sum(1 for host in heap.held if heap.held_until(host, session.now_ms)),
                heap.next_ready_at() if due else None,
            )
        timers.expire_leases(session)
        timers.release_due(session)
        if memory.pending_crawls:
            timers.drain_pending(session)
        if memory.legacy_shelved is not None or memory.legacy_hosts:
            upgrade.upgrade(session)
        session.finish()
        now = session.now_ms
        version = self._directory_version
        if (
            memory.wake_all
            or memory.directory_version != version
            or now - memory.last_recheck_ms >= config.parked_recheck_ms
        ):
            memory.wake_all = False
            memory.directory_version = version
            memory.last_recheck_ms = now
            memory.wake_every_host(now)
        release.release_ready_hosts(session)
        if now - memory.last_progress_ms >= config.progress_interval_ms:
            memory.last_progress_ms = now
            self._periodic(session)
        session.finish()
        self._purge(ctx)

    def on_partition_opened(self, ctx: Context) -> None:
        if ctx.partition is None:
            return
        now = self.services.clock.now_ms()
        self.memory[ctx.partition] = PartitionMemory.rebuild(ctx.table, self.services.config, now)
        self.purges[ctx.partition] = purge.PurgeWork()
        session = self._session(ctx)
        if reconcile(session):
            log.info("partition %d: gauges recounted from the tables", ctx.partition)
        session.finish()

    def on_partition_closed(self, partition: int) -> None:
        self.memory.pop(partition, None)
        self.purges.pop(partition, None)
        self._gauges.pop(partition, None)
        self._host_gauges.pop(partition, None)
        self._show_gauges()

    # ----- internals --------------------------------------------------------------------------

    def _session(self, ctx: Context) -> PartitionSession:
        if ctx.partition is None:
            raise ValueError("the frontier's contexts carry a state partition")
        memory = self.memory.get(ctx.partition)
        if memory is None:
            self.on_partition_opened(ctx)
            memory = self.memory[ctx.partition]
        return PartitionSession(self.services, memory, ctx)

    def _handle_urls(self, session: PartitionSession, record: Record) -> None:
        if isinstance(record.value, ReceivedUrls):
            admission.receive_discovered(session, record.value)
        else:
            reports.admit_report(session, record.value)

    def _purge(self, ctx: Context) -> None:
        """A fresh session: one that cached a crawl record would write it back after its purge."""
        session = self._session(ctx)
        work = self.purges.setdefault(session.partition, purge.PurgeWork())
        self.purged += purge.purge_finished_crawls(session, work)
        session.finish()

    def _periodic(self, session: PartitionSession) -> None:
        # The timer tables' due bounds are kept by their writers; forgetting them now and then
        # bounds the delay a writer that did not keep one could cause (one progress interval).
        session.memory.next_due_ms.clear()
        crawl_ids = [key.decode() for key, _ in session.table(CRAWL).scan()]
        for crawl_id in crawl_ids:
            crawlstate.resend_budget(session, crawl_id)
        publish_progress(session)
        release.wake_on_new_depth_limits(session, crawl_ids)
        crawlstate.recheck_held_budget(session)
        crawlstate.flip_done_crawls(session)
        self._gauges[session.partition] = self._partition_gauges(session, crawl_ids)
        self._show_gauges()

    def _partition_gauges(self, session: PartitionSession, crawl_ids: list[str]) -> PartitionGauges:
        queued = leased = 0
        running: dict[str, dict[str, int]] = {}
        for crawl_id in crawl_ids:
            counters = session.counters(crawl_id)
            queued += counters.get("queued", 0)
            leased += counters.get("leased", 0)
            crawl = session.crawl_state(crawl_id)
            if crawl is not None and crawl.status in ("active", "paused"):
                running[crawl_id] = {name: counters.get(name, 0) for name in CRAWL_COUNTERS}
        ready, throttled, held, oldest = self._host_gauges.get(session.partition, (0, 0, 0, None))
        return PartitionGauges(queued, leased, ready, throttled, held, oldest, running)

    def _show_gauges(self) -> None:
        self.services.metrics.show(
            self._gauges.values(), self.services.clock.now_ms(), self._crawls_shown
        )
