"""Per-partition stores and their layered transactions, without a broker."""

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rocksdict import Options, Rdict

from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Table, Transaction
from tests.support import REPO, wait_for


def make_store(tmp_path: Path) -> PartitionStore:
    return PartitionStore(tmp_path / "p0", ("queue",), StoreOptions(StateSettings()))


def test_scan_merges_pending_writes_in_key_order(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.write({"queue": {b"a1": b"1", b"a3": b"3", b"b1": b"x"}}, "cl", 0)
    cycle = Transaction(store)
    message = Transaction(cycle)
    table = Table(message, "queue", source="in:0:5")
    table.put(b"a2", b"2")
    table.delete(b"a3")
    table.put(b"a0", b"0")
    assert list(table.scan(b"a")) == [(b"a0", b"0"), (b"a1", b"1"), (b"a2", b"2")]
    assert cycle.get("queue", b"a2") is None
    message.merge_into_parent()
    assert cycle.get("queue", b"a2") == b"2"
    assert cycle.sources["queue"][b"a2"] == "in:0:5"
    store.write(cycle.writes, "cl", 7)
    assert store.changelog_position() == ("cl", 7)
    assert [key for key, _ in store.scan("queue")] == [b"a0", b"a1", b"a2", b"b1"]
    store.close()


def test_scan_from_a_start_key_skips_what_sorts_before_it_in_every_layer(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.write({"queue": {b"a1": b"1", b"a3": b"3", b"a5": b"5", b"b1": b"x"}}, "cl", 0)
    cycle = Transaction(store)
    cycle.put("queue", b"a2", b"2", None)
    message = Transaction(cycle)
    table = Table(message, "queue", source=None)
    table.put(b"a4", b"4")
    table.put(b"a0", b"0")
    table.delete(b"a5")
    assert [key for key, _ in table.scan(b"a", b"a2")] == [b"a2", b"a3", b"a4"]
    assert [key for key, _ in table.scan(b"a", b"a25")] == [b"a3", b"a4"]
    assert [key for key, _ in table.scan(b"a", b"")] == [b"a0", b"a1", b"a2", b"a3", b"a4"]
    assert list(table.scan(b"a", b"b")) == []
    assert [key for key, _ in store.scan("queue", b"a", b"a2")] == [b"a3", b"a5"]
    store.close()


def test_store_survives_reopen(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.write({"queue": {b"k": b"v"}}, "cl", 41)
    store.close()
    reopened = make_store(tmp_path)
    assert reopened.get("queue", b"k") == b"v"
    assert reopened.changelog_position() == ("cl", 41)
    reopened.close()


def test_a_table_no_longer_named_is_dropped_when_the_store_is_opened(tmp_path: Path) -> None:
    """A handler's next version renamed a table: RocksDB would refuse to open the directory
    without the old column family, so the store opens it and drops it."""
    options = StoreOptions(StateSettings())
    older = PartitionStore(tmp_path / "p0", ("queue", "parked"), options)
    older.write({"queue": {b"k": b"v"}, "parked": {b"old": b"x"}}, "cl", 3)
    older.close()
    newer = PartitionStore(tmp_path / "p0", ("queue", "shelved"), options)
    assert newer.get("queue", b"k") == b"v"
    assert newer.changelog_position() == ("cl", 3)
    assert list(newer.scan("shelved")) == []
    newer.close()
    assert "parked" not in Rdict.list_cf(str(tmp_path / "p0"), Options())


def test_get_many_reads_every_layer_in_key_order_of_the_request(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.write({"queue": {b"a": b"stored", b"b": b"old", b"c": b"c"}}, "cl", 0)
    cycle = Transaction(store)
    cycle.put("queue", b"b", b"cycle", None)
    cycle.delete("queue", b"c", None)
    message = Transaction(cycle)
    table = Table(message, "queue", source=None)
    table.put(b"d", b"message")
    keys = [b"d", b"a", b"missing", b"b", b"c", b"a"]
    assert table.get_many(keys) == [b"message", b"stored", None, b"cycle", None, b"stored"]
    assert table.get_many(keys) == [table.get(key) for key in keys]
    assert table.get_many([]) == []
    assert store.get_many("queue", [b"b", b"zz"]) == [b"old", None]
    store.close()


def test_put_many_is_put_of_each_key_with_its_source(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.write({"queue": {b"b0": b"stored"}}, "cl", 0)
    bulk, single = Transaction(store), Transaction(store)
    bulk.put("queue", b"b2", b"first", "in:0:1")
    single.put("queue", b"b2", b"first", "in:0:1")
    # New keys only (the bulk path), then keys already written, a key twice, a timer's (no source).
    batches: list[tuple[list[bytes], list[bytes], str | None]] = [
        ([b"b3", b"b1"], [b"3", b"1"], "in:0:2"),
        ([b"b2", b"b4"], [b"2", b"4"], "in:0:3"),
        ([b"b5", b"b5"], [b"x", b"5"], "in:0:4"),
        ([b"b3", b"b6"], [b"three", b"6"], None),
    ]
    for keys, values, source in batches:
        bulk.put_many("queue", keys, values, source)
        for key, value in zip(keys, values, strict=True):
            single.put("queue", key, value, source)
        assert bulk.writes == single.writes and bulk.sources == single.sources
        assert list(bulk.scan("queue", b"b")) == list(single.scan("queue", b"b"))
    assert [key for key, _ in bulk.scan("queue", b"b")] == [
        b"b0",
        b"b1",
        b"b2",
        b"b3",
        b"b4",
        b"b5",
        b"b6",
    ]
    assert b"b3" not in bulk.sources["queue"]
    store.close()


def test_put_many_with_a_source_per_key_and_deletes_is_put_of_each(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.write({"queue": {b"c0": b"stored"}}, "cl", 0)
    bulk, single = Transaction(store), Transaction(store)
    # New keys only (the bulk path), then keys already written with a delete among them.
    batches: list[tuple[list[bytes], list[bytes | None], list[str]]] = [
        ([b"c2", b"c1"], [b"2", b"1"], ["in:0:1", "in:0:2"]),
        ([b"c1", b"c0", b"c3"], [b"one", None, b"3"], ["in:0:3", "in:0:4", "in:0:5"]),
    ]
    for keys, values, sources in batches:
        bulk.put_many("queue", keys, values, sources)
        for key, value, source in zip(keys, values, sources, strict=True):
            single.put("queue", key, value, source)
        assert bulk.writes == single.writes and bulk.sources == single.sources
    assert list(bulk.scan("queue", b"c")) == [(b"c1", b"one"), (b"c2", b"2"), (b"c3", b"3")]
    assert bulk.sources["queue"][b"c0"] == "in:0:4"
    store.close()


def test_put_many_wants_a_value_and_a_source_per_key(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    with pytest.raises(ValueError):
        Transaction(store).put_many("queue", [b"a", b"b"], [b"1"], None)
    with pytest.raises(ValueError):
        Transaction(store).put_many("queue", [b"a", b"b"], [b"1", b"2"], ["in:0:1"])
    store.close()


@pytest.mark.parametrize("budget_mib, flushed", [(8, True), (512, False)])
def test_the_memtables_of_every_store_share_one_budget(
    tmp_path: Path, budget_mib: int, flushed: bool
) -> None:
    """48 MiB written over two stores whose tables' write buffers (128 MiB) would hold it all:
    past the shared budget RocksDB flushes, so level-0 files appear and the memtables shrink."""
    settings = StateSettings(
        write_buffer_bytes=128 * 1024 * 1024, memtable_budget_bytes=budget_mib * 1024 * 1024
    )
    options = StoreOptions(settings)
    stores = [PartitionStore(tmp_path / f"p{n}", ("queue",), options) for n in range(2)]
    value = bytes(range(256)) * 16  # 4 KiB
    for cycle in range(48 * 16):
        writes: dict[str, dict[bytes, bytes | None]] = {
            "queue": {f"{cycle:06d}-{n:03d}".encode(): value for n in range(16)}
        }
        stores[cycle % 2].write(writes, "cl", cycle)

    def settled() -> bool:
        return all(
            store.int_property("rocksdb.num-immutable-mem-table") == 0
            and store.int_property("rocksdb.num-running-flushes") == 0
            for store in stores
        )

    wait_for(settled, 30, "the flushes the writes triggered")
    files = sum(store.int_property("rocksdb.num-files-at-level0") for store in stores)
    held = sum(store.int_property("rocksdb.cur-size-all-mem-tables") for store in stores)
    if flushed:
        assert files >= 2 and held < 40 * 1024 * 1024
    else:
        assert files == 0 and held >= 48 * 1024 * 1024
    for n, store in enumerate(stores):
        assert store.get("queue", f"{n:06d}-000".encode()) == value
    for store in stores:
        store.close()


@pytest.mark.parametrize("target_mib, at_least, at_most", [(1, 8, 1_000), (64, 1, 2)])
def test_compactions_cut_their_output_into_files_of_the_target_size(
    tmp_path: Path, target_mib: int, at_least: int, at_most: int
) -> None:
    """16 MiB of incompressible values through 1 MiB memtables, every memtable's keys spread
    over the whole key range (so level-0 files overlap and are merged, not moved): compactions
    out of level 0 write files of at most the target size, so a compaction's in-memory filter
    and index are those of one such file (`StateSettings.target_file_bytes`)."""
    settings = StateSettings(
        write_buffer_bytes=1024 * 1024, target_file_bytes=target_mib * 1024 * 1024
    )
    store = PartitionStore(tmp_path / "p0", ("queue",), StoreOptions(settings))
    values = random.Random(7)
    for cycle in range(64):
        writes: dict[str, dict[bytes, bytes | None]] = {
            "queue": {f"{n:03d}-{cycle:03d}".encode(): values.randbytes(4096) for n in range(64)}
        }
        store.write(writes, "cl", cycle)

    wait_for(lambda: store.background_work() == 0, 30, "the compactions the writes triggered")
    below_level0 = sum(
        store.int_property(f"rocksdb.num-files-at-level{level}") for level in range(1, 7)
    )
    assert at_least <= below_level0 <= at_most
    assert store.get("queue", b"000-000") is not None
    store.close()


_WRITER = """
import os, sys
from pathlib import Path
from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions
settings = StateSettings(write_buffer_bytes=64 * 1024, max_write_buffers=2)
store = PartitionStore(Path(sys.argv[1]), ("pages", "hosts"), StoreOptions(settings))
for cycle in range(int(sys.argv[2])):
    key = b"%06d" % cycle
    store.write({"pages": {key: os.urandom(4096)}, "hosts": {key: b"x"}}, "cl", cycle)
os.kill(os.getpid(), 9)
"""


def test_a_killed_process_leaves_a_store_whose_offset_matches_its_data(tmp_path: Path) -> None:
    """A process killed without closing its store (SIGKILL): on reopen, the changelog offset the
    store records and every table reflect the same cycle, so a tail replay from that offset
    restores exactly what is missing. The big table flushes many times on its own (4 KiB values
    through 64 KiB memtables), the small one and the offset hardly at all: a flush of one table
    alone would leave it ahead of the offset, and its extra cycles would never be replayed."""
    cycles = 400
    path = tmp_path / "p0"
    writer = subprocess.run(
        [sys.executable, "-c", _WRITER, str(path), str(cycles)],
        check=False,
        cwd=REPO,
        timeout=120,
    )
    assert writer.returncode == -signal.SIGKILL
    store = PartitionStore(path, ("pages", "hosts"), StoreOptions(StateSettings()))
    try:
        position = store.changelog_position()
        assert position is not None, "nothing was flushed: the test saw no flush at all"
        last = position[1]
        assert 0 <= last < cycles
        for table in ("pages", "hosts"):
            keys = [int(key) for key, _ in store.scan(table)]
            assert keys == list(range(last + 1)), table
    finally:
        store.close()
