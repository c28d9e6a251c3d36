"""The ingest half of `bench_linkgraph`: edges indexed per second against bare WriteBatch puts.

The link graph runs the real handler under the loop's state path without Kafka: per cycle of 500
messages a Record each, one batch (`streamcrawl.batch.apply_batch`, as the loop runs a
`BatchHandler`), `on_tick`, then one `PartitionStore.write`. Its forward pass (PageLinks in)
writes the forward edges, the sources' nodes and produces the re-keyed in-link values; its reverse
pass (those values in) writes the reverse edges, the targets' anchor entries and nodes.

Decoding is the loop's work, off the clock: each cycle's messages are decoded by the handler's own
decoders (`LinkGraphHandler.inputs`) just before the cycle, as the loop decodes a cycle's messages
right before its batch, and freed on the clock once the cycle is written, as the loop frees them
at the cycle's end. Until session 29 every message of a pass was decoded before the pass began,
and all of them stayed alive to its end: the handler then met each in-link long after it was
made, out of the processor's caches, where the loop hands over objects it has just made, and
none of them was ever freed on the clock. Measured in session 29 (12 rounds each, the same
hour): the reverse pass went from 0.55 to 0.57-0.59 of its baseline (2.98 to 2.80-2.81 CPU s),
its in-links now met warm; the forward pass from 0.30 to 0.26 (0.79 to 0.89-0.90), freeing each
cycle's 500 decoded pages being the loop's work too. Both passes: 0.51 (interval 0.49-0.51)
before, 0.50 (0.48-0.51) and 0.51 (0.49-0.52) after. A first version freed a cycle's messages
only after the next cycle's batch, so two cycles' decoded pages were alive in each batch for the
collector to scan: 0.49 and 0.48 (intervals 0.48-0.50, 0.48-0.49).

The baseline of each pass is bare rocksdict: it replays THE SAME RECORDS the pass stored, captured
from the pass's own cycles (every forward, reverse, anchor and node record, the partition stats
record and the changelog offset, same keys, same values, same column families, same cycles), as
`WriteBatch` puts with the kernel's `StoreOptions` and write options (no write-ahead log), one
`write` per cycle. Both passes go into one RocksDB, the reverse after the forward, as the link
graph's two passes share one store: the reverse pass's puts then land on the forward pass's data
and pay for compacting it, on both sides alike (until session 10 each pass had a fresh RocksDB of
its own, which left the baseline's reverse pass that work and understated it by about a sixth). It
does no reads, no decoding, no encoding and produces nothing: it is what storing those bytes costs.
The re-keyed values the forward pass produces go to Kafka, not RocksDB, so the baseline has no
counterpart for them. A third figure, `kernel`, puts the same records through the kernel's state
path with no handler (the loop's Record per message, one batch per cycle, `Transaction` puts,
`PartitionStore.write`): about the highest ratio any handler could reach. CPU time of the process,
so a busy neighbour on the 2-core machine does not count. RocksDB's background work counts on every
side, and completely: each pass ends, on the clock, when the flushes and compactions its writes
triggered are done (`tests.bench.settle`), so a side is charged for all it set off and none of
what the pass before it did. Until session 15 the clock stopped at the last write, which left
whatever was still compacting off the count: the bare reverse pass, done soonest, left 0.44-0.58
CPU s of its 2.1-2.4 that way, the link graph's 0.12-0.29 of its 4.6-5.4: both passes read 0.42
just before the change and 0.44-0.54 (median 0.48) in the hour after it. Neither side forces a
flush of what is still in the memtables.

A round runs its sides as A B B A: the link graph's two passes, the bare puts of the records
they stored twice (each into a fresh RocksDB), then the link graph's passes again (a fresh store;
the same records, the input and the handler being deterministic: checked cycle by cycle on their
counts). Each side's figure is the mean of its two runs, so a drift of the shared machine's speed
across the round weighs on both sides alike. Until session 22 each side ran once, the link graph
first, so a round's ratio could carry the drift between the two. The spread did not clearly
narrow here (two paired 12-round runs: 0.40-0.49 and 0.42-0.56; unpaired: 0.32-0.56 and
0.41-0.48 in 6 rounds, 0.37-0.62 in 12); the order is kept because it favours neither side. The
rows that locate the cost (the encoding alone, the kernel path) run once, after.

The same spans are also timed on the wall clock (`IngestResult.wall_s`, `bare_wall_s`): edges per
second as a user sees them. That reading is the lower one: RocksDB's compactions run on the second
core beside the writer, and the bare side, whose writer is done soonest, overlaps the largest share
of its background work (session 20, five rounds: 0.39-0.53 on the wall clock against 0.43-0.58 by
CPU, lower in every round). The CPU figure stays the one set against the target, as in every
session before, and the wall-clock one is printed beside it.
"""

from __future__ import annotations

import gc
import random
import time
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import cast

from rocksdict import Rdict, WriteBatch

from linkgraph.handler import LinkGraphHandler, LinkGraphTopics, decode_page_links
from linkgraph.indexes import PartitionIndexes, _first_crawl
from linkgraph.nodecache import NodeCache
from linkgraph.records import PartitionStats, prefix_of
from schemas.links import LinkEdge, PageLinks, PageMeta
from schemas.serde import encode
from streamcrawl.batch import Batch, BatchHandler, apply_batch
from streamcrawl.handler import Context, Record
from streamcrawl.heap import settle_heap
from streamcrawl.settings import StateSettings
from streamcrawl.spec import Decoder, KeyedDecoder
from streamcrawl.state import (
    CHANGELOG_OFFSET_KEY,
    CHANGELOG_TOPIC_KEY,
    META_TABLE,
    PartitionStore,
    StoreOptions,
    Transaction,
    background_work,
)
from tests.bench.settle import settle

CYCLE = 500
POSITIONS = ("NAV", "CONTENT", "FOOTER", "SIDEBAR")
TYPES = ("INTERNAL", "INTERNAL", "INTERNAL", "EXTERNAL", "NOFOLLOW")


class CycleWrites:
    """One cycle's writes (table, key, value; None: delete) of its one `PartitionStore.write`,
    kept as three lists, iterated as triples: a tuple kept per record would be an object for the
    collector to scan, on the clock of the cycles that follow its capture."""

    def __init__(self, tables: list[str], keys: list[bytes], values: list[bytes | None]) -> None:
        self.tables, self.keys, self.values = tables, keys, values

    def __iter__(self) -> Iterator[tuple[str, bytes, bytes | None]]:
        return zip(self.tables, self.keys, self.values, strict=True)

    def __len__(self) -> int:
        return len(self.keys)


class Packed:
    """Byte strings copied into one buffer: what the bench keeps of a cycle's records (and of its
    produced values) until the baseline replays them (`unpack`), so the link graph's own objects
    are freed after each cycle, as the loop frees them once the cycle is written and delivered.

    Kept as the link graph's objects, every record of a pass stayed alive to its end: the Python
    heap grew by the pass's records on the link graph's clock (about 55 MiB of new allocator
    arenas in the reverse pass, 110 in the forward one, each page of them first touched there),
    a cost a running service does not pay, the baseline neither (its records are made before its
    clock). Measured in session 26: tests/bench/RESULTS.md."""

    __slots__ = ("_buffer", "_lengths")

    def __init__(self, items: Iterable[bytes | None]) -> None:
        kept = list(items)
        self._lengths = array("q", [-1 if item is None else len(item) for item in kept])
        """Each item's length, -1 for None."""
        self._buffer = b"".join([item for item in kept if item])

    def __len__(self) -> int:
        return len(self._lengths)

    def unpack(self) -> list[bytes | None]:
        """The items again, as new objects."""
        buffer, at = self._buffer, 0
        items: list[bytes | None] = []
        for length in self._lengths:
            if length < 0:
                items.append(None)
            else:
                items.append(buffer[at : at + length])
                at += length
        return items


class PackedCycle:
    """One cycle's writes as the bench keeps them (`Packed`): tables, then keys and values."""

    __slots__ = ("_keys", "_tables", "_values")

    def __init__(self, tables: list[str], keys: Iterable[bytes], values: Iterable[bytes | None]):
        self._tables = tables
        self._keys, self._values = Packed(keys), Packed(values)

    def __len__(self) -> int:
        return len(self._tables)

    def unpack(self) -> CycleWrites:
        keys: list[bytes] = self._keys.unpack()  # type: ignore[assignment]  # keys are never None
        return CycleWrites(self._tables, keys, self._values.unpack())


Message = tuple[bytes | None, bytes | None]
"""A consumed message: key and value (None: none)."""
MessageDecoder = Callable[[bytes | None, bytes | None], object]
"""A decoder as `_run_cycles` calls it: key, value."""
Cycles = list[CycleWrites]
"""Per cycle, the writes of its one `PartitionStore.write`."""
PackedCycles = list[PackedCycle]
"""The same as the bench keeps them between the sides (`Packed`)."""


def unpack(cycles: PackedCycles) -> Cycles:
    return [cycle.unpack() for cycle in cycles]


@dataclass(frozen=True)
class IngestResult:
    edges: int
    forward_s: float
    reverse_s: float
    bare_forward_s: float
    bare_reverse_s: float
    kernel_forward_s: float
    kernel_reverse_s: float
    encode_forward_s: float
    wall_s: float
    """Both passes of the link graph on the wall clock (the module docstring)."""
    bare_wall_s: float
    changelog_records: int
    """Changelog records the loop would produce for both passes (derived tables have none)."""
    derived_records: int
    """Writes of derived tables (anchor entries): in the store, not in the changelog."""
    forward_records: int
    reverse_records: int

    @property
    def bare_s(self) -> float:
        return self.bare_forward_s + self.bare_reverse_s


def pages(count: int, per_page: int, hosts: int, seed: int = 1) -> list[PageLinks]:
    """A site-like graph: per page `per_page` out-links, nav links shared, content links spread."""
    rng = random.Random(seed)
    nav = [f"https://h{h}.example/section/{s}" for h in range(hosts) for s in range(8)]
    made = []
    for n in range(count):
        host = n % hosts
        targets = {nav[host * 8 + s] for s in range(8)}
        while len(targets) < per_page:
            targets.add(f"https://h{rng.randrange(hosts)}.example/page/{rng.randrange(count * 4)}")
        edges = [
            LinkEdge.model_construct(
                to_url=target,
                anchor_text=f"anchor {i % 40}",
                context_window=f"text before the link {i} and after it",
                link_type=rng.choice(TYPES),
                rel=[],
                position=POSITIONS[i % 4],
                discovered_at=1_795_000_000_000 + n,
            )
            for i, target in enumerate(sorted(targets))
        ]
        made.append(
            PageLinks.model_construct(
                crawl_id="bench",
                from_url=f"https://h{host}.example/page/{n}",
                fetched_at=1_795_000_000_000 + n,
                edges=edges,
                part=0,
                parts=1,
                page=PageMeta(status=200, title=f"page {n}"),
            )
        )
    return made


def bare(passes: list[Cycles], path: Path, tables: tuple[str, ...]) -> tuple[list[float], float]:
    """Put the captured records as they are, one WriteBatch per cycle, each pass after the one
    before INTO THE SAME RocksDB, as the link graph's passes share one store (see the module
    docstring); returns each pass's CPU seconds and all passes' wall-clock seconds."""
    options = StoreOptions(StateSettings())
    families = {name: options.build() for name in (*tables, META_TABLE)}
    db = Rdict(str(path), options=options.build(), column_families=families)
    handles = {name: db.get_column_family_handle(name) for name in families}
    views = [db.get_column_family(name) for name in families]
    write_options = options.write_options()  # the kernel's: no write-ahead log
    elapsed = []
    wall = 0.0
    for cycles in passes:
        started, started_wall = time.process_time(), time.perf_counter()
        for writes in cycles:
            batch = WriteBatch(raw_mode=True)
            for table, key, value in writes:
                if value is None:
                    batch.delete(key, handles[table])
                else:
                    batch.put(key, value, handles[table])
            db.write(batch, write_options)
        settle(lambda: background_work(views), str(path))
        elapsed.append(time.process_time() - started)
        wall += time.perf_counter() - started_wall
    for view in views:
        view.close()
    handles.clear()
    db.close()
    return elapsed, wall


class _Replay(BatchHandler):
    """Writes one captured cycle's records as it is handed a batch, and nothing else."""

    def __init__(self) -> None:
        self.writes = CycleWrites([], [], [])

    def handle_batch(self, batch: Batch) -> None:
        top, source = batch.transaction, batch.source(batch.records[-1])
        for table, key, value in self.writes:
            if table == META_TABLE:
                continue  # the offset is part of `PartitionStore.write`
            if value is None:
                top.delete(table, key, source)
            else:
                top.put(table, key, value, source)


def encode_forward(batch_of_pages: list[PageLinks]) -> float:
    """The forward pass's per-edge encoding alone, no state: each page's forward keys and values
    and its re-keyed messages (key, in-link value, partition), as the handler builds them for a
    first crawl (`linkgraph.indexes._first_crawl`, the partitions per cycle of pages), with no
    read, write, node or kernel object. Its ratio to the bare puts bounds the forward pass's
    from above: the re-keyed messages are work the baseline has no counterpart for."""
    started = time.process_time()
    for start in range(0, len(batch_of_pages), CYCLE):
        indexes = PartitionIndexes(None, NodeCache(), PartitionStats(), 1)  # type: ignore[arg-type]
        for page in batch_of_pages[start : start + CYCLE]:
            indexes.begin(None)
            prefix = prefix_of(page.from_url).decode()
            _first_crawl(indexes, page, prefix)
            indexes.keep_rekeyed()
        indexes.rows()
    return time.process_time() - started


def kernel(passes: list[tuple[Cycles, int]], path: Path, tables: tuple[str, ...]) -> list[float]:
    """The kernel's state path alone for the same records, no handler: per message the Record the
    loop makes, per cycle one batch (`apply_batch`) putting every captured write into the cycle's
    Transaction, one at a time, and one `PartitionStore.write`; the passes (their cycles and
    message counts) one after the other into one store. Its ratio to the bare puts is about the
    most a handler could reach on this state path (`_run_cycles` minus the handler)."""
    store = PartitionStore(path, tables, StoreOptions(StateSettings()))
    replay = _Replay()
    elapsed = []
    offset = 0
    for cycles, messages in passes:
        started = time.process_time()
        last = offset + messages
        for writes in cycles:
            top = Transaction(store)
            records = []
            for _ in range(min(CYCLE, last - offset)):
                offset += 1
                records.append(Record("t", 0, offset, None, None, [], 0))
            replay.writes = writes
            apply_batch(replay, 0, records, top)
            store.write(top.writes, "changelog", offset)
        settle(store.background_work, str(path))
        elapsed.append(time.process_time() - started)
    store.close()
    return elapsed


@dataclass(frozen=True)
class PassTimes:
    cpu_s: float
    wall_s: float

    def mean_with(self, other: PassTimes) -> PassTimes:
        return PassTimes(mean((self.cpu_s, other.cpu_s)), mean((self.wall_s, other.wall_s)))


def _run_cycles(
    handler: LinkGraphHandler, store: PartitionStore, topic: str, messages: list[Message]
) -> tuple[PassTimes, list[tuple[Packed, Packed]], PackedCycles]:
    """Handle `messages` in cycles as the loop does; returns CPU and wall seconds, each cycle's
    produced keys and values and every cycle's writes, copied out (`Packed`: the link graph's
    objects are freed with the cycle, as the loop frees them once it is written and delivered).
    Each cycle's messages are decoded by the handler's own decoder of `topic` just before the
    cycle, off the clock, as the loop decodes a cycle's messages right before its batch (module
    docstring). The pass's CPU is the process's from its start to its settled end less the main
    thread's own bookkeeping between cycles: RocksDB's threads keep working while the bench
    copies a cycle out, and that work is the pass's."""
    decode = _decoder(handler, topic)
    outputs: list[tuple[Packed, Packed]] = []
    cycles: PackedCycles = []
    bookkeeping = bookkeeping_wall = 0.0
    offset = 0
    values = [decode(key, value) for key, value in messages[:CYCLE]]
    started, started_wall = time.process_time(), time.perf_counter()
    for start in range(0, len(messages), CYCLE):
        top = Transaction(store)
        records = []
        for value in values:  # the loop's Record per message
            offset += 1
            records.append(Record(topic, 0, offset, None, value, [], 0))
        batch = apply_batch(handler, 0, records, top)  # the loop's batch, then its tick
        tick = Context(partition=0, transaction=top)
        handler.on_tick(tick)
        store.write(top.writes, "changelog", offset)
        records.clear()  # the cycle's decoded messages freed, as at the end of the loop's cycle
        values.clear()
        # The bench's own bookkeeping, off the clock: the produced values for the next pass and
        # the cycle's records for the baseline, copied; then the next cycle's messages decoded.
        # The cycle's other references go before the clock runs again, so its writes are freed
        # at the next cycle's start, on the clock.
        copying, copying_wall = time.thread_time(), time.perf_counter()
        produced = [(o.key, o.value) for o in batch.outputs if o.value is not None]
        for _, rows in batch.rows:
            produced.extend((key, value) for key, value, _ in rows if value is not None)
        outputs.append(
            (Packed(_as_bytes(key) for key, _ in produced), Packed(value for _, value in produced))
        )
        tables: list[str] = []
        keys: list[bytes] = []
        written: list[bytes | None] = []
        for table, writes in top.writes.items():
            tables.extend([table] * len(writes))
            keys.extend(writes)
            written.extend(writes.values())
        tables.extend((META_TABLE, META_TABLE))
        keys.extend((CHANGELOG_TOPIC_KEY, CHANGELOG_OFFSET_KEY))
        written.extend((b"changelog", str(offset).encode()))
        cycles.append(PackedCycle(tables, keys, written))
        del produced, keys, written
        values = [decode(key, value) for key, value in messages[start + CYCLE : start + 2 * CYCLE]]
        bookkeeping += time.thread_time() - copying
        bookkeeping_wall += time.perf_counter() - copying_wall
    settle(store.background_work, str(store.path))
    elapsed = time.process_time() - started - bookkeeping
    wall = time.perf_counter() - started_wall - bookkeeping_wall
    return PassTimes(elapsed, wall), outputs, cycles


def _decoder(handler: LinkGraphHandler, topic: str) -> MessageDecoder:
    """The handler's decoder of `topic` as the loop calls it (`Input`), taking key and value."""
    (given,) = [one for one in handler.inputs() if one.topic == topic]
    if given.keyed:
        keyed = cast(KeyedDecoder, given.decode)
        return lambda key, value: keyed(value, key)
    plain = cast(Decoder, given.decode)
    return lambda _, value: plain(value)


def _as_bytes(key: str | bytes | None) -> bytes | None:
    """A produced key as the consumer receives it."""
    return key.encode() if isinstance(key, str) else key


def linkgraph(
    links: list[Message], path: Path
) -> tuple[PassTimes, PassTimes, PackedCycles, PackedCycles]:
    """Both passes of the link graph over `links` (the PageLinks messages) in one store: the
    forward pass's produced in-links, as consumed, are the reverse pass's messages."""
    handler = LinkGraphHandler(LinkGraphTopics("links", "links.by-target", 1))
    store = PartitionStore(path, handler.tables(), StoreOptions(StateSettings()))
    try:
        forward, outputs, forward_cycles = _run_cycles(handler, store, "links", links)
        in_links: list[Message] = [
            (key, value)
            for keys, values in outputs
            for key, value in zip(keys.unpack(), values.unpack(), strict=True)
        ]
        del outputs
        gc.collect()
        gc.freeze()
        reverse, _, reverse_cycles = _run_cycles(handler, store, "links.by-target", in_links)
    finally:
        store.close()
    return forward, reverse, forward_cycles, reverse_cycles


def measure(root: Path, count: int, per_page: int, hosts: int) -> IngestResult:
    """One round: the link graph, the bare puts twice, the link graph again (A B B A, see the
    module docstring), each side's figures the mean of its two runs; then the rows that locate
    the cost, once."""
    generated = pages(count, per_page, hosts)
    edges = sum(len(p.edges) for p in generated)
    links: list[Message] = [(None, encode(page)) for page in generated]  # as the parser sends
    del generated
    # The inputs stay alive throughout: keep the collector from re-scanning them on both sides;
    # and collect as a link-graph instance does once started (`streamcrawl.heap`).
    settle_heap()
    forward, reverse, forward_packed, reverse_packed = linkgraph(links, root / "linkgraph")
    tables = LinkGraphHandler.tables()
    forward_cycles, reverse_cycles = unpack(forward_packed), unpack(reverse_packed)
    bare_runs = [
        bare([forward_cycles, reverse_cycles], root / f"bare{n}", tables) for n in range(2)
    ]
    del forward_cycles, reverse_cycles
    again_forward, again_reverse, *again = linkgraph(links, root / "linkgraph-again")
    if [list(map(len, cycles)) for cycles in again] != [
        list(map(len, cycles)) for cycles in (forward_packed, reverse_packed)
    ]:
        raise RuntimeError("the link graph's second run stored other records than its first")
    del again
    forward, reverse = forward.mean_with(again_forward), reverse.mean_with(again_reverse)
    bare_forward_s = mean(passes[0] for passes, _ in bare_runs)
    bare_reverse_s = mean(passes[1] for passes, _ in bare_runs)
    bare_wall_s = mean(wall for _, wall in bare_runs)
    encode_forward_s = encode_forward([decode_page_links(value) for _, value in links])
    forward_cycles, reverse_cycles = unpack(forward_packed), unpack(reverse_packed)
    kernel_forward_s, kernel_reverse_s = kernel(
        [(forward_cycles, count), (reverse_cycles, edges)], root / "kernel", tables
    )
    derived = LinkGraphHandler.derived_tables
    writes = [table for cycle in (*forward_cycles, *reverse_cycles) for table, _, _ in cycle]
    derived_records = sum(1 for table in writes if table in derived)
    changelog_records = sum(1 for table in writes if table != META_TABLE) - derived_records
    return IngestResult(
        edges=edges,
        forward_s=forward.cpu_s,
        reverse_s=reverse.cpu_s,
        bare_forward_s=bare_forward_s,
        bare_reverse_s=bare_reverse_s,
        kernel_forward_s=kernel_forward_s,
        kernel_reverse_s=kernel_reverse_s,
        encode_forward_s=encode_forward_s,
        wall_s=forward.wall_s + reverse.wall_s,
        bare_wall_s=bare_wall_s,
        changelog_records=changelog_records,
        derived_records=derived_records,
        forward_records=sum(len(c) for c in forward_cycles),
        reverse_records=sum(len(c) for c in reverse_cycles),
    )
