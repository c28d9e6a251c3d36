"""Benchmark: the frontier admitting URLs against the bare cost of storing them, per core.

URLs come from a deterministic generator over ``--hosts`` hosts (``https://h{n}.example/...`` in
eight shapes: dated articles, tracking parameters, dot segments, lowercase escapes, an upper-case
host with the default port, fragments), all distinct after canonicalisation and made one cycle at a
time, so the generator's memory stays flat. Message m holds ``--urls-per-message`` URLs of host
``m mod hosts`` at depth 1 with a source page, as the parser sends them. One run:

1. Frontier, in this process, whose ``ru_maxrss`` at the checkpoints is thus its own: a real
   `FrontierHandler` over a real `PartitionStore` with the kernel's default `StoreOptions`, driven
   as `streamcrawl.loop.ServiceLoop` drives it minus Kafka. Per cycle of ``--batch-messages``
   messages (the loop's default batch): one top-level `Transaction`; each message decoded by the
   handler's decoder and handled on a child transaction merged into it; one ``store.write``. The
   directory (a dict) holds the crawl with an unlimited budget and a scope that admits everything
   (``same_domain="any"``, ``max_depth=10_000``, the largest), active and breadth-first, so depth
   by depth: with no partition's progress showing its seeds (`frontier.budget.lease_depth_limit`)
   it may lease depth 0 only, so every URL (depth 1) takes the production admission path, and a
   release leases nothing and moves nothing (it reads the crawl's head, finds its depth held back
   and parks the host: not a paused crawl, whose queue a release passes over unread). The timed
   cycles leave out ``on_tick``, the loop's release step, because with nothing to lease its work
   is re-parking the hosts the cycle woke: release cost, not admission cost, and large (each
   host's queue scan walks every write of the cycle's transaction). So it is not
   hidden, the cycles reaching the memory checkpoints run their tick where the loop does (after the
   messages, on the cycle's transaction), timed apart; hosts woken by earlier, tickless cycles are
   parked first, as their ticks would have left them. ``--recheck`` also times the 30 s parked-host
   recheck (every queued host retried) at the end. The clock is a `FakeClock`, ``CYCLE_MS`` a cycle.
   Then the first tenth of the messages is sent again (later offsets) and timed apart: every URL
   is a duplicate, the common case in a real crawl, where most links point at pages seen before.
2. Baseline, the bare cost: the same URL strings, `canonical_url` + `url_fingerprint` + one put per
   URL (fingerprint -> canonical URL) into a fresh `PartitionStore` with the same options, one
   ``store.write`` per as many URLs as a frontier cycle carries. Each baseline runs in a child
   process of its own, in step with the frontier (`BareWorker`): after every ``BLOCK_CYCLES``
   cycles of the frontier, and after its last, the baseline runs the same cycles while the
   frontier waits. Run one after the other, the two sides saw different minutes of a machine
   whose speed drifts by more than 10 % between runs (three runs of the same code gave 0.53,
   0.46 and 0.46); in step, they see the same ones. Each side waits for its RocksDB to finish
   every flush and compaction it has started or queued (`settle`) before the other's turn, so
   its background work neither spills into the other's turn nor competes with it for the two
   cores, and at the end all of it is counted; each process's CPU time is its own.

The collector. A service runs with `streamcrawl.heap.settle_heap` applied once it has started
(`streamcrawl.service.run_service`: what is alive then frozen, collections in larger batches), so
the frontier runs under it here too (``--default-gc``: under the interpreter's defaults instead).
One baseline runs under the interpreter's defaults, a second one under the service's settings
(``bare, service collector``), so that the ratio is also given against a baseline that the same
settings speed up, the stricter comparison. The frontier, like every service's loop, and the
second baseline also give free memory back to the system every ``GIVE_BACK_EVERY_S`` of their
running time (`streamcrawl.allocator`), which keeps RSS to what the process holds rather than the
most it ever held; the calls are counted in their CPU.

Rates are URLs per CPU second of each process (all threads, so RocksDB's flushes and compactions
count), input generation left out, i.e. per core; wall rates too (a baseline's counts only its
own runs). Target: frontier / bare >= 0.5 (against both baselines).
Memory: current RSS (``/proc/self/statm``) and peak RSS (``ru_maxrss``) after each tenth of the URLs
(0.5 M, 1 M, ... 5 M by default, so that the curve shows what grows), target RSS(5 M) <= 1.5 x
RSS(0.5 M), beside the deep size of the handler's structures (`HostHeap`, all of
`PartitionMemory`) and RocksDB's own estimates (memtables, table readers, block cache). Not a test:
nothing asserts a duration; the run fails only if the frontier did not queue every URL exactly
once, since it would then have measured something else.

``--release`` then times the release path on its own, in a fresh store with the crawl *active*
(``RELEASE_HOSTS`` hosts with ``RELEASE_URLS`` URLs each, admitted first): one tick releasing every
host up to its lease window, per lease, and ``RELEASE_IDLE_TICKS`` ticks with nothing ready or
due, per tick (the cost every loop cycle pays); main-thread CPU, after RocksDB's flush.

    python -m tests.bench.bench_frontier [--urls 5000000] [--hosts 50000] [--recheck] [--release]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypeVar

# Run as a script, the repository root is not on sys.path; put it first so that this checkout's
# packages are measured, not whichever copy an editable install points at.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from frontier.config import FrontierConfig, FrontierTopics
from frontier.handler import FrontierHandler, decode_urls, random_lease_ids
from frontier.progress import ProgressBook
from frontier.records import CRAWL, TABLES, TALLY, CrawlRecord, decode_tally
from frontier.session import PartitionMemory
from schemas.canonical import canonical_url, url_fingerprint
from schemas.crawls import CrawlState, StoredCrawlRequest
from streamcrawl.allocator import GiveBack
from streamcrawl.clock import FakeClock
from streamcrawl.handler import Context, Record
from streamcrawl.heap import GC_THRESHOLDS, settle_heap, settled_heap
from streamcrawl.recovery import source_header
from streamcrawl.settings import LoopSettings, StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Transaction
from tests.bench.settle import settle

TARGET_RATIO = 0.5
TARGET_RSS_GROWTH = 1.5
CRAWL_ID = "bench"
PARTITION = 0
CYCLE_MS = 10
"""Fake time per cycle: short, so no sampled tick finds the 30 s parked-host recheck due before
150 M URLs (``--recheck`` times that recheck on its own)."""
BLOCK_CYCLES = 10
"""Cycles the frontier runs before the baselines run the same ones (500,000 URLs by default)."""
START_MS = 1_700_000_000_000
MIB = 1024 * 1024

T = TypeVar("T")

SECTIONS = ("news", "products", "wiki", "blog", "docs", "forum", "shop", "about", "help")
TRACKING = ("utm_source=newsletter&utm_medium=email", "gclid=Cj0KCQiA", "fbclid=IwAR2x", "_ga=2.1")


# ----- the URL generator ----------------------------------------------------------------------


def host_name(message: int, hosts: int) -> str:
    return f"h{message % hosts}.example"


def raw_url(host: str, index: int) -> str:
    """URL number ``index`` (globally unique) of ``host``, in one of eight shapes."""
    section = SECTIONS[(index >> 3) % len(SECTIONS)]
    shape = index & 7
    if shape == 0:
        return f"https://{host}/{section}/2024/{index % 12 + 1:02d}/article-{index}.html"
    if shape == 1:
        return f"https://{host}/{section}/item/{index}?ref=home&{TRACKING[index % 4]}"
    if shape == 2:
        return f"https://{host}/search?q=term+{index}&page={index % 50}&fbclid=x{index % 997}"
    if shape == 3:
        return f"https://{host}/{section}/a/../b/./page-{index}"
    if shape == 4:
        return f"https://{host}/{section}/Caf%c3%a9_{index}#top"
    if shape == 5:
        return f"HTTPS://{host.upper()}:443/{section}/{index}/"
    if shape == 6:
        return f"https://{host}/{section}/list?sort=desc&id={index}&utm_campaign=spring"
    return f"https://{host}/{section}/tags/{index % 1000}/post-{index}?lang=en"


@dataclass(frozen=True)
class Shape:
    urls: int
    hosts: int
    per_message: int
    batch_messages: int

    @property
    def messages(self) -> int:
        return -(-self.urls // self.per_message)

    @property
    def cycles(self) -> int:
        return -(-self.messages // self.batch_messages)

    def cycle_messages(self, cycle: int) -> range:
        first = cycle * self.batch_messages
        return range(first, min(first + self.batch_messages, self.messages))

    def count(self, message: int) -> int:
        """URLs in a message: all full but perhaps the last."""
        return min(self.per_message, self.urls - message * self.per_message)


def message_urls(shape: Shape, message: int) -> tuple[str, list[str]]:
    """The host and URLs of message number ``message``; URL numbers run on across messages."""
    host = host_name(message, shape.hosts)
    first = message * shape.per_message
    return host, [raw_url(host, index) for index in range(first, first + shape.count(message))]


def message_bytes(shape: Shape, message: int, now_ms: int, origin: str) -> tuple[str, bytes]:
    """The DiscoveredUrls of message number ``message`` as the parser would produce it, sent by
    the page leased as ``origin``."""
    host, urls = message_urls(shape, message)
    value = {
        "kind": "discovered_urls",
        "crawl_id": CRAWL_ID,
        "host": host,
        "depth": 1,
        "source_url": f"https://{host_name(message + 1, shape.hosts)}/index-{message}.html",
        "discovered_at": now_ms,
        "urls": [{"url": url} for url in urls],
        "origin": origin,
    }
    return host, json.dumps(value, separators=(",", ":")).encode()


# ----- measuring ------------------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def deep_size(root: object) -> int:
    """Bytes of ``root`` and all it holds (containers, dataclass fields), each object once."""
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            stack.append(vars(obj))
    return total


@dataclass
class Meter:
    """CPU (all threads) and wall time of a phase, less the time spent on what it must not count:
    generating its input, and the sampled ticks of the frontier."""

    started_cpu: float = field(default_factory=time.process_time)
    started_wall: float = field(default_factory=time.perf_counter)
    excluded_cpu: float = 0.0
    excluded_wall: float = 0.0
    sections: dict[str, float] = field(default_factory=dict)
    """Main-thread CPU seconds per named section."""

    def excluded(self, work: Callable[..., T], *args: Any) -> tuple[T, float, float]:
        """Run ``work(*args)`` outside the phase's time; return its result, CPU and wall seconds."""
        cpu, wall = time.thread_time(), time.perf_counter()
        result = work(*args)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        self.excluded_cpu += cpu
        self.excluded_wall += wall
        return result, cpu, wall

    def section(self, name: str, since: float) -> float:
        now = time.thread_time()
        self.sections[name] = self.sections.get(name, 0.0) + now - since
        return now

    def totals(self) -> tuple[float, float]:
        cpu = time.process_time() - self.started_cpu - self.excluded_cpu
        wall = time.perf_counter() - self.started_wall - self.excluded_wall
        return cpu, wall


@dataclass(frozen=True)
class RocksDbMemory:
    """What RocksDB holds in memory, by its own estimates, summed over the column families."""

    memtables: int
    table_readers: int
    block_cache: int

    @classmethod
    def of(cls, store: PartitionStore) -> RocksDbMemory:
        # PartitionStore has no property accessor; its column family views answer per family.
        families = store._families.values()
        cache = next(iter(families)).property_int_value("rocksdb.block-cache-usage") or 0
        return cls(
            memtables=store.int_property("rocksdb.cur-size-all-mem-tables"),
            table_readers=sum(
                f.property_int_value("rocksdb.estimate-table-readers-mem") or 0 for f in families
            ),
            block_cache=cache,
        )

    @property
    def total(self) -> int:
        return self.memtables + self.table_readers + self.block_cache


@dataclass(frozen=True)
class MemoryPoint:
    label: str
    queued: int
    rss: int
    peak: int
    heap_hosts: int
    heap_entries: int
    heap_bytes: int
    memory_bytes: int
    rocksdb: RocksDbMemory
    tick_cpu: float | None = None
    tick_hosts: int = 0


@dataclass
class FrontierRun:
    cpu: float
    wall: float
    sections: dict[str, float]
    points: list[MemoryPoint]
    counters: dict[str, int]
    recheck: Recheck | None
    duplicates: Duplicates


@dataclass(frozen=True)
class Duplicates:
    urls: int
    cpu: float
    wall: float


@dataclass(frozen=True)
class Recheck:
    cpu: float
    wall: float
    hosts: int


@dataclass(frozen=True)
class BareRun:
    cpu: float
    wall: float
    sections: dict[str, float]


# ----- the frontier ---------------------------------------------------------------------------


def blocked_crawl() -> CrawlState:
    """The crawl the URLs belong to: admitted, never leased (see the module docstring)."""
    request = StoredCrawlRequest(
        crawl_id=CRAWL_ID,
        seeds=["https://h0.example/"],
        max_depth=10_000,
        max_links=-1,
        same_domain="any",
    )
    return CrawlState(
        crawl_id=CRAWL_ID,
        request=request,
        status="active",
        created_at=START_MS,
        updated_at=START_MS,
        owner_partition=PARTITION,
    )


class Frontier:
    """One frontier partition, driven like the service loop drives it (without Kafka)."""

    def __init__(self, path: Path, options: StoreOptions, expected_urls: int) -> None:
        self.clock = FakeClock(now_ms=START_MS)
        self.topics = FrontierTopics.from_prefix("bench.")
        self.directory: dict[str, CrawlState] = {CRAWL_ID: blocked_crawl()}
        self.store = PartitionStore(path, TABLES, options)
        self.handler = FrontierHandler(
            # The Bloom filter sized for the run, as a deployment sizes it for its partitions.
            FrontierConfig(bloom_expected_urls=expected_urls),
            self.topics,
            self.directory,
            ProgressBook(),
            self.clock,
            random.Random(0),
            random_lease_ids(random.Random(1)),
        )
        self.changelog_offset = -1
        self.outputs = 0
        self.dead_letters = 0
        opening = Transaction(self.store)
        self.handler.on_partition_opened(Context(partition=PARTITION, transaction=opening))
        self._write(opening)

    @property
    def memory(self) -> PartitionMemory:
        return self.handler.memory[PARTITION]

    def cycle(
        self, inputs: list[tuple[int, str, bytes]], meter: Meter, tick: bool
    ) -> tuple[float, int]:
        """One loop cycle: each record on a child transaction, the tick if asked, one write.

        Returns the tick's CPU seconds, which the meter leaves out, and the hosts it released."""
        began = time.thread_time()
        cycle = Transaction(self.store)
        records = []
        for offset, key, raw in inputs:
            value = decode_urls(raw)
            records.append(
                Record(self.topics.urls, PARTITION, offset, key, value, [], self.clock.now_ms())
            )
        began = meter.section("decode", began)
        for record in records:
            ctx = Context(
                partition=PARTITION,
                transaction=Transaction(cycle),
                source=source_header(record.topic, record.partition, record.offset),
            )
            self.handler.handle(record, ctx)
            if ctx.dead_letter_reason is not None:
                self.dead_letters += 1
                continue
            if ctx.transaction is not None:
                ctx.transaction.merge_into_parent()
            self.outputs += len(ctx.outputs)
        began = meter.section("handle", began)
        tick_cpu, tick_hosts = 0.0, 0
        if tick:
            tick_hosts = len(self.memory.heap.ready_at)
            _, tick_cpu, _ = meter.excluded(self.tick, cycle)
            began = time.thread_time()
        self._write(cycle)
        meter.section("store.write", began)
        self.clock.advance_ms(CYCLE_MS)
        return tick_cpu, tick_hosts

    def park_woken_hosts(self) -> None:
        """Leave the HostHeap as the ticks the timed cycles skip would have: with the crawl's
        depth blocked, a tick's release parks every host it pops (no writes, no reschedule), so
        popping them is the same state without the scans (whose cost the recheck measures)."""
        heap = self.memory.heap
        while heap.pop_ready(self.clock.now_ms()) is not None:
            pass

    def tick(self, cycle: Transaction) -> None:
        ctx = Context(partition=PARTITION, transaction=cycle)
        self.handler.on_tick(ctx)
        self.outputs += len(ctx.outputs)

    def _write(self, transaction: Transaction) -> None:
        if transaction.writes:
            self.changelog_offset += sum(map(len, transaction.writes.values()))
            self.store.write(transaction.writes, "bench.changelog", self.changelog_offset)

    def recheck_all_hosts(self) -> Recheck:
        """The parked-host safety net (``parked_recheck_ms``): one tick that retries every host."""
        hosts = len(self.memory.heap.queued)
        self.clock.advance_ms(FrontierConfig().parked_recheck_ms)
        cpu, wall = time.process_time(), time.perf_counter()
        cycle = Transaction(self.store)
        self.tick(cycle)
        self._write(cycle)
        return Recheck(time.process_time() - cpu, time.perf_counter() - wall, hosts)

    def memory_point(
        self, label: str, queued: int, tick_cpu: float | None = None, tick_hosts: int = 0
    ) -> MemoryPoint:
        heap = self.memory.heap
        return MemoryPoint(
            label=label,
            queued=queued,
            rss=rss_bytes(),
            peak=peak_rss_bytes(),
            heap_hosts=len(heap.queued),
            heap_entries=len(heap._heap),  # stale entries included: they are memory too
            heap_bytes=deep_size(heap),
            memory_bytes=deep_size(self.handler.memory) + deep_size(self.handler.services._scope),
            rocksdb=RocksDbMemory.of(self.store),
            tick_cpu=tick_cpu,
            tick_hosts=tick_hosts,
        )

    def counters(self) -> dict[str, int]:
        """The crawl's counters: its record's and its tally's (`frontier.session`), summed."""
        raw = self.store.get(CRAWL, CRAWL_ID.encode())
        counters = {} if raw is None else dict(CrawlRecord.decode(raw).counters)
        for name, value in decode_tally(self.store.get(TALLY, CRAWL_ID.encode())).items():
            counters[name] = counters.get(name, 0) + value
        return counters

    def close(self) -> None:
        self.store.close()


def run_frontier(
    shape: Shape, root: Path, recheck: bool, baselines: list[BareWorker]
) -> FrontierRun:
    """Admit every URL; memory (and one tick) measured in the cycles reaching each tenth.
    After each `BLOCK_CYCLES` cycles, and after the last, each baseline runs the same cycles
    while the frontier waits (outside its time)."""
    frontier = Frontier(root / "frontier", StoreOptions(StateSettings()), shape.urls)
    points = [frontier.memory_point("start", 0)]
    meter = Meter()
    admitted = 0
    checkpoints = sorted({max(shape.urls * tenth // 10, 1) for tenth in range(1, 11)})
    block_start = 0
    give_back = GiveBack()
    for cycle in range(shape.cycles):
        if cycle - block_start == BLOCK_CYCLES:
            settle(frontier.store.background_work, str(frontier.store.path))
            for baseline in baselines:
                meter.excluded(baseline.run, range(block_start, cycle))
            block_start = cycle
        messages = shape.cycle_messages(cycle)
        inputs, _, _ = meter.excluded(frontier_inputs, shape, messages, frontier.clock)
        before = admitted
        admitted += sum(shape.count(m) for m in messages)
        reached = any(before < mark <= admitted for mark in checkpoints)
        if reached:
            meter.excluded(frontier.park_woken_hosts)
        tick_cpu, tick_hosts = frontier.cycle(inputs, meter, tick=reached)
        give_back.when_due()
        if reached:
            label = f"{admitted / 1e6:g} M"
            point, _, _ = meter.excluded(
                frontier.memory_point, label, admitted, tick_cpu, tick_hosts
            )
            points.append(point)
        progress(admitted, shape.urls, "frontier")
    settle(frontier.store.background_work, str(frontier.store.path))
    cpu, wall = meter.totals()
    for baseline in baselines:
        baseline.run(range(block_start, shape.cycles))
    counters = frontier.counters()
    duplicates = resend_duplicates(frontier, shape)
    rechecked = frontier.recheck_all_hosts() if recheck else None
    frontier.close()
    counters["dead_lettered"] = frontier.dead_letters
    counters["outputs"] = frontier.outputs
    return FrontierRun(cpu, wall, meter.sections, points, counters, rechecked, duplicates)


def resend_duplicates(frontier: Frontier, shape: Shape) -> Duplicates:
    """The first tenth of the messages again, as later offsets and from other pages: every URL
    is already visited, the common case of a real crawl (most links point at pages seen
    before)."""
    before = frontier.counters().get("duplicate", 0)
    meter = Meter()
    resent = 0
    cycles = max(shape.cycles // 10, 1)
    for cycle in range(cycles):
        messages = shape.cycle_messages(cycle)
        inputs, _, _ = meter.excluded(frontier_inputs, shape, messages, frontier.clock, "again")
        inputs = [(shape.messages + offset, key, raw) for offset, key, raw in inputs]
        resent += sum(shape.count(m) for m in messages)
        frontier.cycle(inputs, meter, tick=False)
    cpu, wall = meter.totals()
    counted = frontier.counters().get("duplicate", 0) - before
    if counted != resent:
        raise SystemExit(f"{resent:,} URLs resent but {counted:,} counted as duplicates")
    return Duplicates(resent, cpu, wall)


def progress(done: int, total: int, phase: str) -> None:
    """A line on stderr at each tenth, so that a long run shows it is alive."""
    step = max(total // 10, 1)
    if done // step != (done - 1) // step or done == total:
        print(f"{phase}: {done:,} of {total:,} URLs", file=sys.stderr, flush=True)


def frontier_inputs(
    shape: Shape, messages: range, clock: FakeClock, origin: str = "lease"
) -> list[tuple[int, str, bytes]]:
    """(offset, key, value) of each message of a cycle; the offset is the message number. Each
    message's origin is ``origin-<number>``: another origin makes the same URLs a new message
    (another page linking to them), not a repeat the frontier skips whole."""
    inputs = []
    for message in messages:
        host, raw = message_bytes(shape, message, clock.now_ms(), f"{origin}-{message}")
        inputs.append((message, host, raw))
    return inputs


RELEASE_HOSTS = 2_000
RELEASE_URLS = 50
RELEASE_IDLE_TICKS = 2_000


def run_release(root: Path) -> str:
    """The release path alone (see the module docstring); returns its report lines."""
    shape = Shape(RELEASE_HOSTS * RELEASE_URLS, RELEASE_HOSTS, RELEASE_URLS, 500)
    frontier = Frontier(root / "release", StoreOptions(StateSettings()), shape.urls)
    crawl = frontier.directory[CRAWL_ID]
    unlimited = crawl.request.model_copy(update={"max_depth": -1})  # not depth by depth
    frontier.directory[CRAWL_ID] = crawl.model_copy(update={"request": unlimited})
    for cycle in range(shape.cycles):
        inputs = frontier_inputs(shape, shape.cycle_messages(cycle), frontier.clock)
        frontier.cycle(inputs, Meter(), tick=False)
    frontier.store._db.flush()  # no private accessor; the flush must not land in the timings
    time.sleep(2)
    began, outputs = time.thread_time(), frontier.outputs
    cycle_transaction = Transaction(frontier.store)
    frontier.tick(cycle_transaction)
    frontier._write(cycle_transaction)
    release_cpu, leases = time.thread_time() - began, frontier.outputs - outputs
    began = time.thread_time()
    for _ in range(RELEASE_IDLE_TICKS):
        frontier.clock.advance_ms(CYCLE_MS)
        cycle_transaction = Transaction(frontier.store)
        frontier.tick(cycle_transaction)
        frontier._write(cycle_transaction)
    idle_cpu = time.thread_time() - began
    frontier.close()
    return (
        f"release (crawl active, {RELEASE_HOSTS:,} hosts x {RELEASE_URLS} URLs, main-thread CPU):"
        f" one tick leased {leases:,} URLs in {release_cpu:.2f} s,"
        f" {1e6 * release_cpu / max(leases, 1):.0f} us per lease;"
        f" a tick with nothing ready or due {1e6 * idle_cpu / RELEASE_IDLE_TICKS:.0f} us"
        f" ({leases:,} leases open)"
    )


# ----- the bare baseline ----------------------------------------------------------------------


class Bare:
    """The bare cost of the module docstring, run a range of cycles at a time."""

    def __init__(self, shape: Shape, root: Path, name: str, give_back: bool) -> None:
        self.shape = shape
        self.name = name
        self.give_back = GiveBack() if give_back else None
        self.store = PartitionStore(root / name, ("visited",), StoreOptions(StateSettings()))
        self.meter = Meter()
        self.done = 0
        self.wall = 0.0
        """Wall seconds inside `run`: a worker waits for the frontier between its runs."""

    def run(self, cycles: range) -> None:
        shape, meter = self.shape, self.meter
        started = time.perf_counter()
        for cycle in cycles:
            urls, _, _ = meter.excluded(bare_inputs, shape, shape.cycle_messages(cycle))
            began = time.thread_time()
            visited: dict[bytes, bytes | None] = {}
            for url in urls:
                canonical = canonical_url(url)
                if canonical is not None:
                    visited[url_fingerprint(canonical)] = canonical.encode()
            began = meter.section("canonical+fingerprint", began)
            self.store.write({"visited": visited}, "bench.changelog", None)
            meter.section("store.write", began)
            if self.give_back is not None:
                self.give_back.when_due()
            self.done += len(urls)
            progress(self.done, shape.urls, self.name)
        settle(self.store.background_work, str(self.store.path))
        self.wall += time.perf_counter() - started

    def finish(self) -> BareRun:
        cpu, _ = self.meter.totals()
        self.store.close()
        return BareRun(cpu, self.wall - self.meter.excluded_wall, self.meter.sections)


class BareWorker:
    """A `Bare` baseline in a child process of its own, run in step with the frontier: told to
    run the cycles the frontier has just run, it runs them and answers, while the frontier waits.
    So both see the machine of the same minutes (its speed drifts by more than 10 % between runs
    of a few minutes here), and each process's CPU time is its own, RocksDB's threads included,
    whenever they run. ``service_gc``: under the services' collector settings."""

    def __init__(self, shape: Shape, root: Path, name: str, service_gc: bool) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=bare_worker_main,
            args=(shape, str(root), name, service_gc, child),
            name=f"bench-{name}",
            daemon=True,
        )
        self._process.start()
        child.close()
        self._receive()  # ready

    def run(self, cycles: range) -> None:
        self._conn.send(("run", cycles.start, cycles.stop))
        self._receive()

    def finish(self) -> BareRun:
        self._conn.send(("finish", 0, 0))
        run: BareRun = self._receive()
        self._process.join(60)
        return run

    def _receive(self) -> Any:
        if not self._conn.poll(WORKER_TIMEOUT_S):
            self._process.kill()
            raise SystemExit("a bare baseline worker stopped answering")
        return self._conn.recv()


WORKER_TIMEOUT_S = 600.0
"""Longer than any block of cycles takes; only bounds a worker that died."""


def bare_worker_main(
    shape: Shape, root: str, name: str, service_gc: bool, conn: Connection
) -> None:
    if service_gc:
        settle_heap()
    bare = Bare(shape, Path(root), name, give_back=service_gc)
    conn.send("ready")
    while True:
        command, start, stop = conn.recv()
        if command == "finish":
            conn.send(bare.finish())
            return
        bare.run(range(start, stop))
        conn.send("done")


def bare_inputs(shape: Shape, messages: range) -> list[str]:
    return [url for message in messages for url in message_urls(shape, message)[1]]


# ----- report ---------------------------------------------------------------------------------


def check_admissions(shape: Shape, counters: dict[str, int]) -> None:
    """Every URL admitted once and still queued, nothing rejected, leased or dead-lettered."""
    expected = {"discovered": shape.urls, "admitted": shape.urls, "queued": shape.urls}
    wrong = {name: counters.get(name, 0) for name, value in expected.items()}
    wrong = {name: value for name, value in wrong.items() if value != expected[name]}
    others = {
        name: value
        for name, value in counters.items()
        if value
        and (name.startswith("rejected_") or name in ("duplicate", "leases", "dead_lettered"))
    }
    if wrong or others:
        raise SystemExit(f"the frontier did not queue every URL once: {wrong} {others}")


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}" if seconds > 0 else "-"


def report(
    shape: Shape, frontier: FrontierRun, bare: BareRun, bare_service: BareRun | None, gc_note: str
) -> None:
    print(
        f"frontier admission: {shape.urls:,} URLs over {shape.hosts:,} hosts, "
        f"{shape.per_message} URLs per DiscoveredUrls, {shape.batch_messages} messages "
        f"({shape.batch_messages * shape.per_message:,} URLs) per cycle and per bare WriteBatch"
    )
    print(f"frontier collector: {gc_note}")
    print(f"\n{'':34}{'CPU s':>8}{'wall s':>8}{'URLs/CPU s':>12}{'URLs/wall s':>13}{'ratio':>7}")
    bare_rate = shape.urls / bare.cpu
    rows: list[tuple[str, FrontierRun | BareRun]] = [("bare: canonical + fp + put", bare)]
    if bare_service is not None:
        rows.append(("bare, service collector", bare_service))
    rows.append(("frontier: handle + write", frontier))
    for name, run in rows:
        print(
            f"{name:34}{run.cpu:8.1f}{run.wall:8.1f}{rate(shape.urls, run.cpu):>12}"
            f"{rate(shape.urls, run.wall):>13}{shape.urls / run.cpu / bare_rate:7.2f}"
        )
    if bare_service is not None:
        print(
            f"frontier / bare under the service collector:"
            f" {bare_service.cpu / frontier.cpu:.2f} (ratio of URLs per CPU second)"
        )
    dup = frontier.duplicates
    print(
        f"{'frontier: duplicates (visited)':34}{dup.cpu:8.1f}{dup.wall:8.1f}"
        f"{rate(dup.urls, dup.cpu):>12}{rate(dup.urls, dup.wall):>13}"
        f"{dup.urls / dup.cpu / bare_rate:7.2f}"
    )
    print(f"target: frontier / bare >= {TARGET_RATIO} in URLs per CPU second (per core)")
    print(f"(duplicates: the first {dup.urls:,} URLs sent again, each already visited)")
    for name, run in rows:
        print(f"\n{name}: where the CPU went (sections on the main thread)")
        for section, seconds in run.sections.items():
            print(f"  {section:32}{seconds:8.1f} s{100 * seconds / run.cpu:5.0f} %")
        background = run.cpu - sum(run.sections.values())
        share = 100 * background / run.cpu
        print(f"  {'other threads (RocksDB), rest':32}{background:8.1f} s{share:5.0f} %")
    cycle_urls = shape.batch_messages * shape.per_message
    print("\ntick (release step, the crawl's depth blocked: nothing leased), kept apart:")
    for point in frontier.points:
        if point.tick_cpu is not None:
            print(
                f"  the cycle reaching {point.label}: {point.tick_hosts:,} woken hosts re-parked in"
                f" {point.tick_cpu:.2f} CPU s, i.e. {rate(cycle_urls, point.tick_cpu)} URLs/CPU s"
                " if every cycle paid it"
            )
    if frontier.recheck is not None:
        print(
            f"  parked-host recheck (due every {FrontierConfig().parked_recheck_ms // 1000} s):"
            f" {frontier.recheck.hosts:,} hosts retried in {frontier.recheck.cpu:.1f} CPU s"
            f" ({frontier.recheck.wall:.1f} s wall)"
        )
    print(
        f"\n{'memory':8}{'queued':>10}{'RSS':>6}{'peak':>6}{'heap hosts':>11}{'entries':>8}"
        f"{'HostHeap':>9}{'PartitionMemory':>16}{'RocksDB: memtables':>19}{'readers':>8}"
        f"{'cache':>6}"
    )
    for point in frontier.points:
        rocksdb = point.rocksdb
        print(
            f"{point.label:8}{point.queued:>10,}{point.rss / MIB:6.0f}{point.peak / MIB:6.0f}"
            f"{point.heap_hosts:>11,}{point.heap_entries:>8,}{point.heap_bytes / MIB:9.1f}"
            f"{point.memory_bytes / MIB:16.1f}{rocksdb.memtables / MIB:19.1f}"
            f"{rocksdb.table_readers / MIB:8.1f}{rocksdb.block_cache / MIB:6.1f}"
        )
    print("(MiB; heap entries include stale ones; RocksDB's own estimates, all tables)")
    if len(frontier.points) >= 3:
        tenth, full = frontier.points[1], frontier.points[-1]
        print(
            f"RSS at {full.label} / RSS at {tenth.label}: {full.rss / tenth.rss:.2f}"
            f" (peak: {full.peak / tenth.peak:.2f}); target <= {TARGET_RSS_GROWTH}"
        )
    counters = ", ".join(f"{k}={v:,}" for k, v in sorted(frontier.counters.items()))
    print(f"\nfrontier counters: {counters}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=5_000_000)
    parser.add_argument("--hosts", type=int, default=50_000)
    parser.add_argument("--urls-per-message", type=int, default=100)
    parser.add_argument("--batch-messages", type=int, default=LoopSettings().batch_size)
    parser.add_argument("--state-dir", type=Path, default=None, help="default: a temporary dir")
    parser.add_argument(
        "--recheck", action="store_true", help="also time the 30 s parked-host recheck at the end"
    )
    parser.add_argument(
        "--release", action="store_true", help="also time the release path on its own"
    )
    parser.add_argument(
        "--default-gc",
        action="store_true",
        help="run the frontier under the interpreter's collector defaults, not the services'",
    )
    args = parser.parse_args()
    shape = Shape(args.urls, args.hosts, args.urls_per_message, args.batch_messages)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=args.state_dir) as tmp:
        baselines = [BareWorker(shape, Path(tmp), "bare", service_gc=False)]
        if not args.default_gc:
            baselines.append(BareWorker(shape, Path(tmp), "bare-service", service_gc=True))
        with contextlib.nullcontext() if args.default_gc else settled_heap():
            frontier = run_frontier(shape, Path(tmp), args.recheck, baselines)
        bare, *others = [baseline.finish() for baseline in baselines]
        bare_service = others[0] if others else None
        check_admissions(shape, frontier.counters)
        released = run_release(Path(tmp)) if args.release else None
    gc_note = (
        "the interpreter's defaults"
        if args.default_gc
        else f"the services' (streamcrawl.heap.settle_heap: frozen, thresholds {GC_THRESHOLDS})"
    )
    report(shape, frontier, bare, bare_service, gc_note)
    if released is not None:
        print(released)
    print(
        f"load average (1 min) at start {load:.2f}, at end {os.getloadavg()[0]:.2f}"
        f" on {os.cpu_count()} CPUs: CPU time, unlike wall time, leaves other processes out"
    )
    return 0


if __name__ == "__main__":
    # Through the module's own name, so that what crosses to the baseline workers pickles as
    # tests.bench.bench_frontier.X on both sides rather than as __main__.X.
    from tests.bench.bench_frontier import main as run_main

    sys.exit(run_main())
