"""The service's start-up heap settling: what is alive is frozen, later garbage still collected."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from streamcrawl.heap import GC_THRESHOLDS, settle_heap, settled_heap


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_gc")
def test_settle_heap_freezes_what_is_alive_and_still_collects_new_cycles() -> None:
    settle_heap()
    assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.get_freeze_count() > 1000, "modules and schemas are out of the collector's sight"

    class Node:
        partner: object = None

    first, second = Node(), Node()
    first.partner, second.partner = second, first
    del first, second
    assert gc.collect() >= 2, "a cycle made after start-up is still garbage to the collector"


@pytest.mark.usefixtures("restored_gc")
def test_settled_heap_applies_the_settings_for_its_block_only() -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    with settled_heap():
        assert gc.get_threshold() == GC_THRESHOLDS
        assert gc.get_freeze_count() > 1000
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
