"""`Transaction.scan` over indexed pending writes (the frontier's release scans one host prefix
at a time over a cycle of tens of thousands of writes): the same entries, in the same order, as a
plain sorted merge of the store and every layer."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Transaction

TABLES = ("queue", "other")
PREFIXES = (b"", b"\x00", b"a", b"a\xff", b"\xff", b"\xff\xff", b"ab", b"\x01\x02")


def random_key(rng: random.Random) -> bytes:
    return bytes(rng.choice(b"\x00\x01\x02ab\xff") for _ in range(rng.randint(0, 4)))


@pytest.mark.parametrize("seed", range(6))
def test_scans_see_store_and_layers_merged_in_key_order(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    store = PartitionStore(tmp_path, TABLES, StoreOptions(StateSettings()))
    expected: dict[bytes, bytes | None] = {}
    stored: dict[bytes, bytes | None] = {}
    for index in range(200):
        key = random_key(rng)
        stored[key] = expected[key] = b"s%d" % index
    store.write({"queue": stored}, "changelog", None)
    cycle = Transaction(store)
    for _ in range(rng.randint(1, 4)):
        child = Transaction(cycle)
        for index in range(rng.randint(0, 700)):  # past the index's unsorted tail
            key = random_key(rng)
            if rng.random() < 0.3:
                child.delete("queue", key, None)
                expected[key] = None
            else:
                child.put("queue", key, b"w%d" % index, "t:0:1")
                expected[key] = b"w%d" % index
            child.put("other", key, b"x", None)
            if rng.random() < 0.05:  # scans in between writes, as a release does
                prefix = rng.choice(PREFIXES)
                assert list(child.scan("queue", prefix)) == live(expected, prefix)
        child.merge_into_parent()
    for prefix in PREFIXES:
        assert list(cycle.scan("queue", prefix)) == live(expected, prefix)
    store.close()


def live(entries: dict[bytes, bytes | None], prefix: bytes) -> list[tuple[bytes, bytes]]:
    return sorted((k, v) for k, v in entries.items() if k.startswith(prefix) and v is not None)
