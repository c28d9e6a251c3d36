"""The kernel's per-role metrics: one set per registry, found again on the same registry only."""

from __future__ import annotations

import gc

from prometheus_client import CollectorRegistry

from streamcrawl.metrics import LoopMetrics


def test_the_same_registry_and_role_get_the_same_metrics() -> None:
    registry = CollectorRegistry()
    metrics = LoopMetrics.for_role("fetcher", registry)
    assert LoopMetrics.for_role("fetcher", registry) is metrics
    assert LoopMetrics.for_role("parser", registry) is not metrics
    assert LoopMetrics.for_role("fetcher", CollectorRegistry()) is not metrics


def test_a_new_registry_never_inherits_the_metrics_of_one_that_is_gone() -> None:
    # Each registry is dropped before the next is made, so CPython hands most of them the address
    # (and the id) of the one before: metrics cached by id were registered on a dead registry.
    for round_number in range(50):
        registry = CollectorRegistry()
        metrics = LoopMetrics.for_role("frontier", registry)
        metrics.ready.set(1)
        metrics.messages_in.labels("urls").inc(round_number + 1)
        assert registry.get_sample_value("streamcrawl_frontier_ready") == 1
        assert (
            registry.get_sample_value("streamcrawl_frontier_messages_in_total", {"topic": "urls"})
            == round_number + 1
        )
        del registry, metrics
        gc.collect()
