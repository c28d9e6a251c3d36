"""The link-graph bench's packed records: what it keeps of a cycle comes back byte for byte."""

from __future__ import annotations

from tests.bench.linkgraph_ingest import Packed, PackedCycle, unpack


def test_packed_items_come_back_equal_and_in_order_with_none_and_empty_ones() -> None:
    items = [b"to\tfrom", None, b"", b"\x00stats", b"x" * 70_000, None]
    packed = Packed(iter(items))
    assert len(packed) == len(items)
    assert packed.unpack() == items


def test_a_packed_cycle_unpacks_to_the_same_writes_as_new_objects() -> None:
    key, value = b"https://a.example/\thttps://b.example/", b'{"gone":false}'
    cycle = PackedCycle(["reverse", "anchors", "nodes"], [key, b"k2", b"k3"], [value, b"", None])
    [writes] = unpack([cycle])
    expected = [("reverse", key, value), ("anchors", b"k2", b""), ("nodes", b"k3", None)]
    assert list(writes) == expected
    assert len(cycle) == len(writes) == 3
    assert writes.keys[0] is not key  # copied: the link graph's objects die with their cycle
