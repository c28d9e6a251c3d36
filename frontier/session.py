"""One handler call's view of a frontier partition, and the partition's small in-memory view.

A :class:`PartitionSession` is made for each record handled and each tick. It reads and writes the
partition's tables through the kernel's `Context` (so every change lands in the call's transaction),
caches the crawl and host records it touched and writes them back once in :meth:`finish`, and queues
its changes to memory (host counts and ready times) until then: a handler call that raises leaves
neither its state writes nor its memory changes behind.

:class:`PartitionMemory` is all a partition keeps in memory (DESIGN.md section 3, step 3): the
`HostHeap` (per host: queued count and ready time, plus the heap), per host with queued URLs the
floor of each crawl's queue there (``queue_floors``), the ids of crawls with DiscoveredUrls waiting
in `pending`, and timer bookkeeping. It grows with hosts and crawls, never with URLs, and is
rebuilt from the tables when the partition is opened.

Where counters are kept, and why (crash recovery). The kernel restores a partition from its
changelog skipping the writes made for input records that were never committed (they are handled
again) but applying every write of timer work, which has no source. A record that an input and the
tick of the same cycle both rewrite therefore survives a crash between delivery and commit with
the input's changes in it, and the input then applies them a second time. So:

- cumulative counters counted while handling an input go to the crawl's ``tally`` record, which
  only inputs write: after such a crash it is skipped with the input, and counted once on replay;
  those counted by timer work (a session with no source) go to the crawl record;
- gauges (:data:`GAUGES`, the per-depth ``unfinished`` counts, ``waiting_budget``, a host's
  ``in_flight``) change with both, stay in the crawl and host records, and are recomputed from the
  tables whenever a partition is opened (`frontier.reconcile`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pydantic import BaseModel

from frontier.bloom import BloomFilter
from frontier.budget import BudgetAccount, lease_depth_limit
from frontier.config import CrawlDirectory, FrontierConfig, FrontierTopics, ProgressView
from frontier.metrics import FrontierMetrics
from frontier.queues import HostHeap, QueueCensus, queue_of
from frontier.records import (
    CRAWL,
    HOSTS,
    META,
    PENDING,
    QUEUE,
    SEQUENCE_KEY,
    SHELVED,
    TALLY,
    VISITED,
    CrawlRecord,
    HostState,
    VisitedRecord,
    decode_tally,
    dump,
    pending_crawl_of,
    read_u64,
    u64,
    visited_key,
)
from frontier.retry import RetryPolicy
from frontier.scope import ScopeRules
from schemas.crawls import CrawlState
from schemas.serde import encode
from streamcrawl.clock import Clock
from streamcrawl.handler import Context
from streamcrawl.state import Table

NOTHING_DUE = 2**63
"""`PartitionMemory.next_due_ms` of a timer table found empty."""

GAUGES = frozenset({"queued", "leased", "delayed", "recrawl_scheduled", "reports_waiting"})
"""Counters that go up and down with the tables' contents (see the module docstring)."""


@dataclass
class FrontierServices:
    """The plain objects every session uses; built once per handler."""

    config: FrontierConfig
    topics: FrontierTopics
    directory: CrawlDirectory
    progress: ProgressView
    clock: Clock
    retry: RetryPolicy
    new_lease_id: Callable[[], str]
    metrics: FrontierMetrics
    _scope: dict[str, ScopeRules] = field(default_factory=dict)

    def scope_rules(self, crawl: CrawlState) -> ScopeRules:
        """The crawl's compiled scope; a crawl's request never changes, so cache by id."""
        rules = self._scope.get(crawl.crawl_id)
        if rules is None:
            rules = ScopeRules.from_request(crawl.request, self.config.trap_limits)
            self._scope[crawl.crawl_id] = rules
        return rules


@dataclass
class PartitionMemory:
    """What one open partition keeps in memory; see the module docstring."""

    heap: HostHeap = field(default_factory=HostHeap)
    seen: BloomFilter = field(default_factory=lambda: BloomFilter(8, 1))
    """Keys of the visited table (see `frontier.bloom`); sized by `rebuild` from the config."""
    pending_crawls: set[str] = field(default_factory=set)
    queue_floors: dict[str, dict[str, bytes]] = field(default_factory=dict)
    """Per host with queued URLs, every crawl with URLs queued there and its floor, a key below
    which its queue holds nothing: a release seeks from there (`frontier.release`), not over the
    tombstones of the entries leased before. Every write to `queue` lowers it
    (`PartitionSession.queue_written`), a release raises it past what it leased
    (`PartitionSession.floor_moved`), and it goes with the host's last queued URL."""
    legacy_hosts: dict[str, bytes] = field(default_factory=dict)
    """Hosts with queue entries in an earlier version's layout, not released until
    `frontier.upgrade` has moved them, each with the key its next batch starts from."""
    legacy_shelved: bytes | None = None
    """Where `frontier.upgrade`'s next batch of `shelved` (an earlier version's) starts; None when
    nothing is left there to put back."""
    wake_all: bool = False
    directory_version: int = 0
    last_progress_ms: int = 0
    last_recheck_ms: int = 0
    depth_limits: dict[str, int | None] = field(default_factory=dict)
    """Per depth-ordered crawl, its lease depth limit when last looked at (`frontier.release`)."""
    next_due_ms: dict[str, int] = field(default_factory=dict)
    """Per timer table (`deadlines`, `delayed`, keyed by due time): no key of it is due before
    this time. A lower bound, kept by the table's writers (`PartitionSession.timer_added`) and by
    the tick's scans, so that a tick with nothing due opens no iterator; absent means unknown (the
    next tick scans), as after opening and, as a safety net, every progress interval."""

    @classmethod
    def rebuild(
        cls,
        tables: Callable[[str], Table],
        config: FrontierConfig,
        now_ms: int,
    ) -> PartitionMemory:
        """Every host with queued URLs ready now; crawls with waiting messages and what an earlier
        version left to move remembered; the Bloom filter refilled from the visited set."""
        memory = cls(
            last_recheck_ms=now_ms,
            seen=BloomFilter.for_capacity(
                config.bloom_expected_urls, config.bloom_false_positive_rate
            ),
        )
        for key, _ in tables(VISITED).scan():
            memory.seen.add(key)
        census = QueueCensus.of(tables(QUEUE))
        for host, count in census.queued.items():
            memory.heap.add_queued(host, count, now_ms)
        memory.queue_floors = census.floors
        memory.legacy_hosts = dict.fromkeys(census.legacy_hosts, b"")
        for key, _ in tables(PENDING).scan():
            memory.pending_crawls.add(pending_crawl_of(key))
        memory.legacy_shelved = None if next(tables(SHELVED).scan(), None) is None else b""
        return memory

    def wake(self, host: str, now_ms: int) -> None:
        """Make a host with queued URLs ready now, unless it already is or it is held."""
        if self.heap.held_until(host, now_ms) is not None:
            return
        ready_at = self.heap.ready_at.get(host)
        if ready_at is None or ready_at > now_ms:
            self.heap.schedule(host, now_ms)

    def wake_every_host(self, now_ms: int) -> None:
        for host in list(self.heap.queued):
            self.wake(host, now_ms)


class PartitionSession:
    """One handler call on one partition; see the module docstring."""

    def __init__(self, services: FrontierServices, memory: PartitionMemory, ctx: Context) -> None:
        if ctx.partition is None:
            raise ValueError("the frontier keeps state partitions: a context needs its partition")
        self.services = services
        self.memory = memory
        self.ctx = ctx
        self.partition: int = ctx.partition
        self.timer = ctx.source is None
        """Timer work (a tick, a partition opening) rather than the handling of an input."""
        self.now_ms = services.clock.now_ms()
        self._tables: dict[str, Table] = {}
        self._crawls: dict[str, CrawlRecord] = {}
        self._changed_crawls: set[str] = set()
        self._tallies: dict[str, dict[str, int]] = {}
        self._changed_tallies: set[str] = set()
        self._metric_counts: dict[str, int] = {}
        self._hosts: dict[str, HostState] = {}
        self._hosts_as_loaded: dict[str, bytes | None] = {}
        self._sequence: int | None = None
        self._memory_changes: list[Callable[[PartitionMemory], None]] = []
        self._floor_writes: dict[tuple[str, str], bytes] = {}
        self._depth_limits: dict[str, int | None] = {}

    @property
    def config(self) -> FrontierConfig:
        return self.services.config

    @property
    def topics(self) -> FrontierTopics:
        return self.services.topics

    def table(self, name: str) -> Table:
        table = self._tables.get(name)
        if table is None:
            table = self.ctx.table(name)
            if name == QUEUE:
                table = _QueueTable(table, self._floor_writes)
            self._tables[name] = table
        return table

    # ----- crawls -----------------------------------------------------------------------------

    def crawl_state(self, crawl_id: str) -> CrawlState | None:
        return self.services.directory.get(crawl_id)

    def record(self, crawl_id: str) -> CrawlRecord:
        """This partition's record of a crawl, created empty on first use."""
        record = self._crawls.get(crawl_id)
        if record is None:
            raw = self.table(CRAWL).get(crawl_id.encode())
            record = CrawlRecord(crawl_id) if raw is None else CrawlRecord.decode(raw)
            self._crawls[crawl_id] = record
        return record

    def changed(self, crawl_id: str, *, progress: bool = True) -> None:
        """Write the crawl record back; ``progress`` marks its counters for publication."""
        self._changed_crawls.add(crawl_id)
        if progress:
            self.record(crawl_id).dirty = True

    def account(self, crawl: CrawlState) -> BudgetAccount | None:
        """The partition's budget account of a finite-budget crawl (created on first use)."""
        if crawl.request.max_links == -1:
            return None
        record = self.record(crawl.crawl_id)
        if record.account is None:
            record.account = BudgetAccount(crawl.crawl_id, self.partition)
            self.changed(crawl.crawl_id)
        return record.account

    def lease_depth_limit(self, crawl_id: str) -> int | None:
        """The deepest depth of a depth-ordered crawl this partition may lease now
        (`frontier.budget.lease_depth_limit`): from the latest snapshot of every other partition
        and this one's live counters. Once per session: leasing does not move it."""
        if crawl_id not in self._depth_limits:
            snapshots = self.services.progress.snapshots(crawl_id)
            others = [h[-1].counters for p, h in snapshots.items() if p != self.partition and h]
            live = self.record(crawl_id).progress_counters(self.tally(crawl_id))
            self._depth_limits[crawl_id] = lease_depth_limit([*others, live])
        return self._depth_limits[crawl_id]

    def tally(self, crawl_id: str) -> dict[str, int]:
        """The crawl's cumulative counters counted while handling inputs (see the docstring)."""
        tally = self._tallies.get(crawl_id)
        if tally is None:
            tally = self._tallies[crawl_id] = decode_tally(self.table(TALLY).get(crawl_id.encode()))
        return tally

    def counters(self, crawl_id: str) -> dict[str, int]:
        """Every counter of the crawl on this partition: the record's and the tally's, summed."""
        counters = dict(self.record(crawl_id).counters)
        for name, value in self.tally(crawl_id).items():
            counters[name] = counters.get(name, 0) + value
        return counters

    def count(self, crawl_id: str, name: str, delta: int = 1) -> None:
        if name in GAUGES or self.timer:
            counters = self.record(crawl_id).counters
        else:
            counters = self.tally(crawl_id)
            self._changed_tallies.add(crawl_id)
        counters[name] = counters.get(name, 0) + delta
        self.changed(crawl_id)
        if delta > 0:
            self._metric_counts[name] = self._metric_counts.get(name, 0) + delta

    def unfinished(self, crawl_id: str, depth: int, delta: int) -> None:
        """Change the crawl's unfinished count at ``depth``; an emptied depth may unblock hosts."""
        if self.record(crawl_id).add_unfinished(depth, delta):
            self.wake_all()
        self.changed(crawl_id)

    # ----- hosts and URLs ---------------------------------------------------------------------

    def host(self, host: str) -> HostState:
        state = self._hosts.get(host)
        if state is None:
            raw = self.table(HOSTS).get(host.encode())
            state = HostState() if raw is None else HostState.decode(raw)
            self._hosts[host] = state
            self._hosts_as_loaded[host] = raw
        return state

    def visited(self, crawl_id: str, fingerprint: bytes) -> VisitedRecord | None:
        raw = self.visited_raw(visited_key(crawl_id, fingerprint))
        return None if raw is None else VisitedRecord.decode(raw)

    def visited_raw(self, key: bytes) -> bytes | None:
        """The encoded visited record under ``key`` (`frontier.records.visited_key`), or None."""
        if not self.memory.seen.might_contain(key):
            return None  # definitely never seen: no RocksDB read
        return self.table(VISITED).get(key)

    def put_visited(self, crawl_id: str, fingerprint: bytes, record: VisitedRecord) -> None:
        self.put_visited_raw(visited_key(crawl_id, fingerprint), record.encode())

    def put_visited_raw(self, key: bytes, encoded: bytes) -> None:
        # Added at once, not in finish(): if this call fails, the key is a false positive, which
        # only costs a RocksDB read later.
        self.memory.seen.add(key)
        self.table(VISITED).put(key, encoded)

    def put_new_visited(self, keys: list[bytes], records: list[bytes], digests: list[int]) -> None:
        """`put_visited_raw` of each key not in the visited set before, whose Bloom hashes
        ``digests`` the lookup that found them absent gave: one bulk write."""
        self.memory.seen.add_digests(digests)
        self.put_many(VISITED, keys, records)

    def put_many(self, table: str, keys: list[bytes], values: list[bytes]) -> None:
        """``table(name).put`` of each key and value in turn, in one `Transaction.put_many`."""
        transaction = self.ctx.transaction
        if transaction is None:
            raise ValueError("this context has no state transaction")
        transaction.put_many(table, keys, values, self.ctx.source)
        if table == QUEUE and keys:
            lowest, highest = min(keys), max(keys)
            if queue_of(lowest) == queue_of(highest):  # one crawl's queue on one host
                self.queue_written(lowest)  # (every key between them shares its prefix)
            else:
                for key in keys:
                    self.queue_written(key)

    def next_sequence(self) -> int:
        """The partition's arrival counter: queue order, delayed keys and lease ranks share it."""
        if self._sequence is None:
            raw = self.table(META).get(SEQUENCE_KEY)
            self._sequence = 0 if raw is None else read_u64(raw)
        self._sequence += 1
        return self._sequence

    # ----- output -----------------------------------------------------------------------------

    def produce(
        self, topic: str, key: str, message: BaseModel, *, partition: int | None = None
    ) -> None:
        self.ctx.produce(topic, key, encode(message), partition=partition)

    # ----- memory, applied in finish() --------------------------------------------------------

    def queued(self, host: str, count: int = 1) -> None:
        """``count`` URLs joined the host's queue; the host becomes ready now if it was idle."""
        last = self._memory_changes[-1] if self._memory_changes else None
        if isinstance(last, _Queued) and last.host == host:
            last.count += count  # the URLs of one message: one change
            return
        self._memory_changes.append(_Queued(host, count, self.now_ms))

    def dequeued(self, host: str, count: int = 1) -> None:
        def change(memory: PartitionMemory) -> None:
            memory.heap.remove_queued(host, count)
            if host not in memory.heap.queued:
                memory.queue_floors.pop(host, None)

        self._memory_changes.append(change)

    def queue_emptied(self, host: str) -> None:
        """The host's queue turned out empty: forget whatever count memory held."""

        def change(memory: PartitionMemory) -> None:
            memory.heap.remove_queued(host, memory.heap.queued.get(host, 0))
            memory.queue_floors.pop(host, None)

        self._memory_changes.append(change)

    def queue_written(self, key: bytes) -> None:
        """A queue entry was written: its crawl's floor on its host comes down to it if it was
        higher. Applied after every other memory change of the session, so after a release's
        advance past entries it leased (`floor_moved`)."""
        _lower_floor(self._floor_writes, key)

    def floor_moved(self, host: str, crawl_id: str, key: bytes | None) -> None:
        """A release read the crawl's queue on the host up to ``key``, its new head; None: to
        its end (the crawl has nothing queued there)."""

        def change(memory: PartitionMemory) -> None:
            if key is not None:
                memory.queue_floors.setdefault(host, {})[crawl_id] = key
                return
            floors = memory.queue_floors.get(host)
            if floors is not None:
                floors.pop(crawl_id, None)
                if not floors:
                    del memory.queue_floors[host]

        self._memory_changes.append(change)

    def wake(self, host: str) -> None:
        now = self.now_ms
        self._memory_changes.append(lambda memory: memory.wake(host, now))

    def hold(self, host: str, until_ms: int) -> None:
        """Park the host until ``until_ms`` (its stored hold, `HostState.held_until_ms`)."""
        self._memory_changes.append(lambda memory: memory.heap.hold(host, until_ms))

    def wake_all(self) -> None:
        """Something crawl-wide changed (budget, depth, status): retry every parked host."""
        self._memory_changes.append(lambda memory: setattr(memory, "wake_all", True))

    def timer_added(self, table: str, due_ms: int) -> None:
        """A key due at ``due_ms`` joined a timer table (see `PartitionMemory.next_due_ms`)."""

        def earlier(memory: PartitionMemory) -> None:
            bound = memory.next_due_ms.get(table)
            if bound is not None and due_ms < bound:
                memory.next_due_ms[table] = due_ms

        self._memory_changes.append(earlier)

    def timer_due(self, table: str) -> bool:
        """Whether a key of the timer table may be due now: if not, a tick need not scan it."""
        bound = self.memory.next_due_ms.get(table)
        return bound is None or bound <= self.now_ms

    def timer_scanned(self, table: str, next_due_ms: int) -> None:
        """A scan of the timer table stopped at a key due at ``next_due_ms`` (`NOTHING_DUE`: it
        reached the end); keys added later in this call lower the bound again, in order."""
        self._memory_changes.append(
            lambda memory: memory.next_due_ms.__setitem__(table, next_due_ms)
        )

    def wait_pending(self, crawl_id: str) -> None:
        self._memory_changes.append(lambda memory: memory.pending_crawls.add(crawl_id))

    def legacy_moving(self, host: str, next_key: bytes) -> None:
        """The host's legacy entries are moved up to ``next_key``: the next batch starts there,
        not at the tombstones of the moved ones."""
        self._memory_changes.append(lambda memory: memory.legacy_hosts.update({host: next_key}))

    def legacy_moved(self, host: str) -> None:
        """Every entry of the host's queue is in this version's layout: it may be released."""
        now = self.now_ms

        def change(memory: PartitionMemory) -> None:
            memory.legacy_hosts.pop(host, None)
            memory.wake(host, now)

        self._memory_changes.append(change)

    def unshelving(self, next_key: bytes | None) -> None:
        """`shelved` (an earlier version's) is put back up to ``next_key``; None: all of it."""
        self._memory_changes.append(lambda memory: setattr(memory, "legacy_shelved", next_key))

    def finish(self) -> None:
        """Write changed records back, then apply the memory changes and the counts to the
        metrics; may be called again."""
        for crawl_id in sorted(self._changed_crawls):
            self.table(CRAWL).put(crawl_id.encode(), self._crawls[crawl_id].encode())
        self._changed_crawls.clear()
        for crawl_id in sorted(self._changed_tallies):
            self.table(TALLY).put(crawl_id.encode(), dump(self._tallies[crawl_id]))
        self._changed_tallies.clear()
        for host, state in self._hosts.items():
            if state.held_until_ms is not None and state.held_until_ms <= self.now_ms:
                state.held_until_ms = None
            loaded = self._hosts_as_loaded[host]
            current = None if state.idle else state.encode()
            if current != loaded:
                if current is None:
                    self.table(HOSTS).delete(host.encode())
                else:
                    self.table(HOSTS).put(host.encode(), current)
                self._hosts_as_loaded[host] = current
        if self._sequence is not None:
            self.table(META).put(SEQUENCE_KEY, u64(self._sequence))
        for change in self._memory_changes:
            change(self.memory)
        self._memory_changes.clear()
        floors = self.memory.queue_floors
        for (host, crawl_id), key in self._floor_writes.items():
            own = floors.setdefault(host, {})
            floor = own.get(crawl_id)
            if floor is None or key < floor:
                own[crawl_id] = key
        self._floor_writes.clear()
        for name, delta in self._metric_counts.items():
            self.services.metrics.count(name, delta)
        self._metric_counts.clear()


@dataclass
class _Queued:
    """URLs joined a host's queue: count them and make the host ready now (one memory change)."""

    host: str
    count: int
    now_ms: int

    def __call__(self, memory: PartitionMemory) -> None:
        memory.heap.add_queued(self.host, self.count, self.now_ms)
        memory.wake(self.host, self.now_ms)


def _lower_floor(floor_writes: dict[tuple[str, str], bytes], key: bytes) -> None:
    """Note a key written to `queue` (`PartitionSession.queue_written`)."""
    queue = queue_of(key)
    if queue is None:
        return  # an earlier version's key (`frontier.upgrade`): memory learns of it moved
    lowest = floor_writes.get(queue)
    if lowest is None or key < lowest:
        floor_writes[queue] = key


class _QueueTable(Table):
    """The `queue` table, noting every key written in the session's floor writes. It holds the
    dict, not the session: a reference back to the session would make a cycle, and sessions (with
    their transactions) would then wait for the cycle collector instead of going at once."""

    def __init__(self, table: Table, floor_writes: dict[tuple[str, str], bytes]) -> None:
        self._table = table
        self._floor_writes = floor_writes

    def get(self, key: bytes) -> bytes | None:
        return self._table.get(key)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        return self._table.get_many(keys)

    def put(self, key: bytes, value: bytes) -> None:
        self._table.put(key, value)
        _lower_floor(self._floor_writes, key)

    def delete(self, key: bytes) -> None:
        self._table.delete(key)

    def scan(self, prefix: bytes = b"", start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        return self._table.scan(prefix, start)
