"""An in-process frontier deployment for unit tests: N partitions, real RocksDB, no Kafka.

Each partition has its own `PartitionStore` and `FrontierHandler`, driven like the kernel's loop
drives it: one record per cycle, a child transaction merged into the cycle's, then the tick on the
cycle's transaction, then one WriteBatch. Produced messages are routed like Kafka would route them
(`partition_for_key`, or the explicit partition) into one FIFO per topic partition; a seeded RNG
picks which non-empty FIFO delivers next, so deliveries interleave across topics and partitions
deterministically while each partition keeps its order.

`crawls` feeds a dict-backed directory, `progress` a `ProgressBook`, `deadletter` a list. `fetch`
goes to a fake fetcher and parser that answer from a site graph: a FetchOutcome (done, page sent),
the page's links grouped by host as DiscoveredUrls at depth + 1 (and its refresh, if `refreshes`
names one, at the page's depth with one more redirect hop, as `parser.handler` sends it), then a
ParseReport, or a scripted outcome for a URL (retry, redirect, 429, ...).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from pydantic import BaseModel

from frontier.config import FrontierConfig, FrontierTopics
from frontier.handler import FrontierHandler, random_lease_ids
from frontier.metrics import FrontierMetrics
from frontier.progress import ProgressBook
from frontier.queues import QueuedUrl, host_of, queue_of, release_order
from frontier.records import (
    CRAWL,
    QUEUE,
    TABLES,
    TALLY,
    CrawlRecord,
    decode_tally,
)
from schemas.canonical import canonical_url, host_key
from schemas.crawls import CrawlState
from schemas.deadletter import DeadLetter
from schemas.fetch import FetchRequest
from schemas.outcomes import FetchOutcome
from schemas.partitioning import partition_for_key
from schemas.progress import PartitionProgress
from schemas.seeds import CrawlCommand, CrawlRequest
from schemas.serde import encode
from schemas.urls import DiscoveredUrl, DiscoveredUrls, ParseReport
from streamcrawl.clock import FakeClock
from streamcrawl.handler import Context, Output, Record
from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Transaction

Site = dict[str, list[str]]
"""Page URL -> the hrefs on it (relative or absolute)."""
Script = Callable[[FetchRequest, int], dict[str, Any] | None]
"""(request, attempt of this URL) -> FetchOutcome fields overriding a plain `done`, or None."""


class FakeDirectory:
    """The `crawls` table: a dict the simulation updates from the handlers' own outputs."""

    def __init__(self) -> None:
        self.states: dict[str, CrawlState] = {}
        self.history: list[CrawlState] = []

    def get(self, key: str, /) -> CrawlState | None:
        return self.states.get(key)


@dataclass
class Simulation:
    root: Path
    partitions: int = 1
    site: Site = field(default_factory=dict)
    config: FrontierConfig = field(default_factory=FrontierConfig)
    seed: int = 0
    script: Script | None = None
    step_ms: int = 10
    auto_fetch: bool = True
    """Answer fetch requests with the fake fetcher; False leaves them in `held_fetches`."""
    registry: CollectorRegistry | None = None
    """Where the handlers' metrics go; None: one registry of the simulation's own."""
    blocked: set[tuple[str, int]] = field(default_factory=set)
    """(topic, partition) FIFOs that deliver nothing until removed: a slow or stalled partition."""
    refreshes: dict[str, str] = field(default_factory=dict)
    """Page URL -> the href its meta refresh redirects to."""
    requisites: dict[str, list[str]] = field(default_factory=dict)
    """Page URL -> the hrefs of its requisites, sent when the fetch asks for them."""

    def __post_init__(self) -> None:
        self.clock = FakeClock()
        self.metrics = FrontierMetrics.register(self.registry or CollectorRegistry())
        self.rng = random.Random(self.seed)
        self.topics = FrontierTopics.from_prefix("t.")
        self.directory = FakeDirectory()
        self.book = ProgressBook()
        self.options = StoreOptions(StateSettings(block_cache_bytes=8 * 1024 * 1024))
        self.stores = [self._open_store(p) for p in range(self.partitions)]
        self.incarnations: dict[int, int] = {}
        self.handlers = [self._new_handler(p) for p in range(self.partitions)]
        self.queues: dict[tuple[str, int], deque[Output]] = {}
        self.offsets: dict[tuple[str, int], int] = {}
        self.fetches: list[FetchRequest] = []
        self.held_fetches: list[FetchRequest] = []
        self.outcomes: list[FetchOutcome] = []
        self.dead_letters: list[DeadLetter] = []
        self.handler_dead_letters: list[str] = []
        self.attempts: dict[str, int] = {}
        self.done_while_busy: list[str] = []
        self._decoders = {i.topic: i.decode for i in self.handlers[0].inputs()}
        for partition in range(self.partitions):
            self._open_partition(partition)

    # ----- setup ------------------------------------------------------------------------------

    def _open_store(self, partition: int) -> PartitionStore:
        return PartitionStore(self.root / f"p{partition}", TABLES, self.options)

    def _new_handler(self, partition: int) -> FrontierHandler:
        # A restarted handler draws other lease ids, as uuid4 does in production.
        incarnation = self.incarnations.get(partition, 0)
        self.incarnations[partition] = incarnation + 1
        return FrontierHandler(
            self.config,
            self.topics,
            self.directory,
            self.book,
            self.clock,
            random.Random(self.seed * 100 + partition),
            random_lease_ids(random.Random(f"{self.seed}-{partition}-{incarnation}")),
            self.metrics,
        )

    def _open_partition(self, partition: int) -> None:
        transaction = Transaction(self.stores[partition])
        ctx = Context(partition=partition, transaction=transaction)
        self.handlers[partition].on_partition_opened(ctx)
        self._complete(partition, transaction, ctx.outputs)

    def restart(self, partition: int) -> None:
        """Close the partition's store and handler, reopen from disk with a fresh handler."""
        self.handlers[partition].on_partition_closed(partition)
        self.stores[partition].close()
        self.stores[partition] = self._open_store(partition)
        self.handlers[partition] = self._new_handler(partition)
        self._open_partition(partition)

    def close(self) -> None:
        for store in self.stores:
            store.close()

    # ----- producing --------------------------------------------------------------------------

    def partition_of(self, key: str) -> int:
        return partition_for_key(key.encode(), self.partitions)

    def inject(
        self, topic: str, key: str, message: BaseModel, partition: int | None = None
    ) -> None:
        self._route(Output(topic, key, encode(message), partition))

    def start(self, request: CrawlRequest) -> None:
        self.inject(self.topics.seeds, request.crawl_id, request)

    def command(self, crawl_id: str, action: str) -> None:
        self.inject(self.topics.seeds, crawl_id, CrawlCommand(crawl_id=crawl_id, action=action))  # type: ignore[arg-type]

    def _route(self, output: Output) -> None:
        key = output.key.decode() if isinstance(output.key, bytes) else output.key
        if key is None:
            raise AssertionError(f"a message to {output.topic} without key")
        partition = output.partition if output.partition is not None else self.partition_of(key)
        if output.topic == self.topics.fetch:
            self.fetches.append(FetchRequest.model_validate_json(output.value or b""))
        self.queues.setdefault((output.topic, partition), deque()).append(output)

    # ----- delivering -------------------------------------------------------------------------

    def pending(self, topics: Iterable[str] | None = None) -> list[tuple[str, int]]:
        wanted = None if topics is None else set(topics)
        return sorted(
            key
            for key, queue in self.queues.items()
            if queue and key not in self.blocked and (wanted is None or key[0] in wanted)
        )

    def step(self, topics: Iterable[str] | None = None) -> bool:
        """Deliver one message from a randomly chosen non-empty FIFO; False when none is left."""
        candidates = self.pending(topics)
        if not candidates:
            return False
        topic, partition = self.rng.choice(candidates)
        output = self.queues[(topic, partition)].popleft()
        self.clock.advance_ms(self.step_ms)
        self._deliver(topic, partition, output)
        self.tick_all()
        return True

    def run(self, topics: Iterable[str] | None = None, max_steps: int = 100_000) -> int:
        wanted = None if topics is None else list(topics)
        steps = 0
        while steps < max_steps and self.step(wanted):
            steps += 1
        if steps >= max_steps:
            raise AssertionError("simulation did not drain")
        self.assert_floors_cover_queues()
        return steps

    def assert_floors_cover_queues(self) -> None:
        """Every queued entry is at or above its crawl's floor on its host in memory: a release
        reads each crawl's queue from its floor (`frontier.release`), so an entry below it would
        never be leased."""
        for partition, store in enumerate(self.stores):
            floors = self.handlers[partition].memory[partition].queue_floors
            for key, _ in store.scan(QUEUE):
                queue = queue_of(key)
                if queue is None:
                    continue  # an earlier version's layout, not moved yet
                host, crawl_id = queue
                floor = floors.get(host, {}).get(crawl_id)
                assert floor is not None and floor <= key, f"{key!r} is below its floor {floor!r}"

    def settle(self, until: Callable[[], bool] | None = None, rounds: int = 40) -> int:
        """Drain, then let time pass (1 s per round) so timers, heartbeats and done run; returns
        the messages delivered."""
        steps = 0
        for _ in range(rounds):
            steps += self.run()
            if until is not None and until():
                return steps
            self.clock.advance_ms(1_000)
            self.tick_all()
        return steps + self.run()

    def tick_all(self) -> None:
        for partition in range(self.partitions):
            transaction = Transaction(self.stores[partition])
            ctx = Context(partition=partition, transaction=transaction)
            self.handlers[partition].on_tick(ctx)
            self._complete(partition, transaction, ctx.outputs)

    def _complete(self, partition: int, transaction: Transaction, outputs: list[Output]) -> None:
        for output in outputs:
            self._route(output)
        self.stores[partition].write(transaction.writes, "changelog", None)

    def _deliver(self, topic: str, partition: int, output: Output) -> None:
        value = output.value or b""
        if topic == self.topics.fetch:
            request = FetchRequest.model_validate_json(value)
            if self.auto_fetch:
                self.fetch(request)
            else:
                self.held_fetches.append(request)
        elif topic == self.topics.crawls:
            self._crawl_state(CrawlState.model_validate_json(value))
        elif topic == self.topics.progress:
            self.book.record(PartitionProgress.model_validate_json(value))
        elif topic == self.topics.deadletter:
            self.dead_letters.append(DeadLetter.model_validate_json(value))
        else:
            self._handle(topic, partition, output)

    def _handle(self, topic: str, partition: int, output: Output) -> None:
        offset = self.offsets.get((topic, partition), 0)
        self.offsets[(topic, partition)] = offset + 1
        record = self._record(topic, partition, offset, output)
        cycle = Transaction(self.stores[partition])
        child = Transaction(cycle)
        ctx = Context(
            partition=partition, transaction=child, source=f"{topic}:{partition}:{offset}"
        )
        self.handlers[partition].handle(record, ctx)
        if ctx.dead_letter_reason is not None:
            self.handler_dead_letters.append(ctx.dead_letter_reason)
            return
        child.merge_into_parent()
        self._complete(partition, cycle, ctx.outputs)

    def crash_after_delivery(self, topics: Iterable[str] | None = None) -> bool:
        """One cycle that dies between delivery and commit (crash point ``after_delivery``).

        The next message of a chosen FIFO is handled and the tick runs in the same cycle
        transaction; its outputs are delivered. The partition then restarts the way the kernel's
        changelog restore rebuilds it: writes made for the uncommitted message (those with a
        source) are skipped, writes made by the tick (no source) are applied. The message is
        delivered again, first in its FIFO. False when nothing was left to deliver.
        """
        candidates = self.pending(set(topics or ()) - {self.topics.fetch} or None)
        candidates = [c for c in candidates if c[0] in self._decoders]
        if not candidates:
            return False
        topic, partition = self.rng.choice(candidates)
        output = self.queues[(topic, partition)].popleft()
        self.clock.advance_ms(self.step_ms)
        offset = self.offsets.get((topic, partition), 0)
        cycle = Transaction(self.stores[partition])
        child = Transaction(cycle)
        ctx = Context(
            partition=partition, transaction=child, source=f"{topic}:{partition}:{offset}"
        )
        self.handlers[partition].handle(self._record(topic, partition, offset, output), ctx)
        child.merge_into_parent()
        tick = Context(partition=partition, transaction=cycle)
        self.handlers[partition].on_tick(tick)
        for produced in [*ctx.outputs, *tick.outputs]:
            self._route(produced)
        restored = {
            table: {k: v for k, v in writes.items() if k not in cycle.sources[table]}
            for table, writes in cycle.writes.items()
        }
        self.stores[partition].write(restored, "changelog", None)
        self.restart(partition)
        self.queues[(topic, partition)].appendleft(output)
        return True

    def _record(self, topic: str, partition: int, offset: int, output: Output) -> Record:
        key = output.key.decode() if isinstance(output.key, bytes) else output.key
        return Record(
            topic=topic,
            partition=partition,
            offset=offset,
            key=key,
            value=self._decoders[topic](output.value),
            headers=[],
            timestamp_ms=self.clock.now_ms(),
        )

    def _crawl_state(self, state: CrawlState) -> None:
        if state.status == "done" and self.busy(state.crawl_id):
            self.done_while_busy.append(state.crawl_id)
        self.directory.states[state.crawl_id] = state
        self.directory.history.append(state)
        for handler in self.handlers:
            handler.crawl_changed(state.crawl_id)

    # ----- the fake fetcher and parser --------------------------------------------------------

    def fetch(self, request: FetchRequest) -> None:
        """Answer a FetchRequest: outcome, then the page's DiscoveredUrls and ParseReport."""
        attempt = self.attempts.get(request.url, 0) + 1
        self.attempts[request.url] = attempt
        fields: dict[str, Any] = {"kind": "done", "status": 200, "page_sent": True}
        if self.script is not None:
            fields.update(self.script(request, attempt) or {})
        outcome = FetchOutcome(
            crawl_id=request.crawl_id,
            url=request.url,
            host=request.host,
            lease_id=request.lease_id,
            depth=request.depth,
            redirect_hops=request.redirect_hops,
            fetched_at=self.clock.now_ms(),
            **fields,
        )
        self.outcomes.append(outcome)
        self.inject(self.topics.outcomes, request.host, outcome)
        if outcome.page_sent:
            self._parse(request)

    def _parse(self, request: FetchRequest) -> None:
        by_host = _by_host(self.site.get(request.url, []), request.url)
        for host, items in by_host.items():
            message = DiscoveredUrls(
                crawl_id=request.crawl_id,
                host=host,
                depth=request.depth + 1,
                source_url=request.url,
                discovered_at=self.clock.now_ms(),
                urls=items,
                origin=request.lease_id,
            )
            self.inject(self.topics.urls, host, message)
        href = self.refreshes.get(request.url)
        refresh = None if href is None else canonical_url(href, request.url)
        if refresh is not None:
            message = DiscoveredUrls(
                crawl_id=request.crawl_id,
                host=host_key(refresh),
                depth=request.depth,
                source_url=request.url,
                redirect_hops=request.redirect_hops + 1,
                discovered_at=self.clock.now_ms(),
                urls=[DiscoveredUrl(url=refresh)],
                origin=f"{request.lease_id}/refresh",
            )
            self.inject(self.topics.urls, message.host, message)
        embeds = self._send_requisites(request) if request.find_requisites else 0
        same_depth = int(refresh is not None) + embeds
        report = ParseReport(
            crawl_id=request.crawl_id,
            page_url=request.url,
            lease_id=request.lease_id,
            discovered_messages=len(by_host) + same_depth,
            redirect_messages=same_depth,
        )
        self.inject(self.topics.urls, request.host, report)

    def _send_requisites(self, request: FetchRequest) -> int:
        """The page's requisites as the parser sends them (by host, at the page's depth, one
        more hop); returns how many messages."""
        by_host = _by_host(self.requisites.get(request.url, []), request.url)
        for host, items in by_host.items():
            message = DiscoveredUrls(
                crawl_id=request.crawl_id,
                host=host,
                depth=request.depth,
                source_url=request.url,
                redirect_hops=request.redirect_hops + 1,
                discovered_at=self.clock.now_ms(),
                urls=items,
                origin=f"{request.lease_id}/requisites",
                requisites=True,
            )
            self.inject(self.topics.urls, host, message)
        return len(by_host)

    # ----- inspection -------------------------------------------------------------------------

    def busy(self, crawl_id: str) -> bool:
        """Work of the crawl still travelling or held anywhere (progress and crawls aside).

        Once the owner granted the whole budget, queued URLs and travelling DiscoveredUrls no
        longer count: nothing can lease them.
        """
        state = self.directory.get(crawl_id)
        max_links = -1 if state is None else state.request.max_links
        spent = max_links != -1 and self.total(crawl_id, "budget_granted") >= max_links
        topics = {self.topics.outcomes, self.topics.fetch, self.topics.budget}
        names = ["leased", "delayed"]
        if not spent:
            topics |= {self.topics.seeds, self.topics.urls}
            names.append("queued")
        if any(self.pending(topics)):
            return True
        return any(
            self.counters(crawl_id, p).get(name, 0) > 0
            for p in range(self.partitions)
            for name in names
        )

    def record(self, crawl_id: str, partition: int) -> CrawlRecord | None:
        raw = self.stores[partition].get(CRAWL, crawl_id.encode())
        return None if raw is None else CrawlRecord.decode(raw)

    def counters(self, crawl_id: str, partition: int) -> dict[str, int]:
        """The crawl's counters on a partition: its record's and its tally's, summed."""
        record = self.record(crawl_id, partition)
        counters = {} if record is None else dict(record.counters)
        tally = self.stores[partition].get(TALLY, crawl_id.encode())
        for name, value in decode_tally(tally).items():
            counters[name] = counters.get(name, 0) + value
        return counters

    def total(self, crawl_id: str, name: str) -> int:
        return sum(self.counters(crawl_id, p).get(name, 0) for p in range(self.partitions))

    def queue(self, partition: int = 0) -> list[QueuedUrl]:
        """The partition's queued entries, per host in release order (the crawls' queues merged,
        `frontier.release`)."""
        entries = self.stores[partition].scan(QUEUE)
        ordered = sorted(entries, key=lambda item: (host_of(item[0]), release_order(item[0])))
        return [QueuedUrl.decode(raw) for _, raw in ordered]

    def fetched_urls(self, crawl_id: str) -> list[str]:
        return [f.url for f in self.fetches if f.crawl_id == crawl_id]

    def status(self, crawl_id: str) -> str | None:
        state = self.directory.get(crawl_id)
        return None if state is None else state.status


def _by_host(hrefs: list[str], page_url: str) -> dict[str, list[DiscoveredUrl]]:
    """A page's hrefs resolved, the page itself left out, grouped by host as the parser sends
    them."""
    by_host: dict[str, list[DiscoveredUrl]] = {}
    for href in hrefs:
        target = canonical_url(href, page_url)
        if target is not None and target != page_url:
            by_host.setdefault(host_key(target), []).append(DiscoveredUrl(url=target))
    return by_host
