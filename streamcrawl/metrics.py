"""The kernel's Prometheus metrics, named per stage: `streamcrawl_<role>_<thing>_<unit>`.

Every service loop gets the same set under its role's name, so a dashboard can show throughput, lag
and dead letters per stage. Labels stay bounded: topic and partition, never a URL or a host.
"""

from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram


@dataclass(frozen=True)
class LoopMetrics:
    messages_in: Counter
    messages_out: Counter
    dead_letters: Counter
    errors: Counter
    processing_seconds: Histogram
    cycle_seconds: Histogram
    consumer_lag: Gauge
    assigned_partitions: Gauge
    restored_records: Counter
    restore_seconds: Histogram
    ready: Gauge

    @classmethod
    def for_role(cls, role: str, registry: CollectorRegistry = REGISTRY) -> LoopMetrics:
        roles = _CACHE.get(registry)
        if roles is None:
            roles = _CACHE[registry] = {}
        existing = roles.get(role)
        if existing is not None:
            return existing
        prefix = f"streamcrawl_{role.replace('-', '_')}"
        metrics = cls(
            messages_in=Counter(
                f"{prefix}_messages_in_total", "Messages consumed", ["topic"], registry=registry
            ),
            messages_out=Counter(
                f"{prefix}_messages_out_total", "Messages produced", ["topic"], registry=registry
            ),
            dead_letters=Counter(
                f"{prefix}_dead_letters_total",
                "Messages sent to the dead-letter topic",
                ["topic", "reason"],
                registry=registry,
            ),
            errors=Counter(f"{prefix}_errors_total", "Errors by kind", ["kind"], registry=registry),
            processing_seconds=Histogram(
                f"{prefix}_processing_seconds",
                "Handler time per message",
                ["topic"],
                registry=registry,
                buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5),
            ),
            cycle_seconds=Histogram(
                f"{prefix}_cycle_seconds",
                "Time of one poll-process-produce-commit cycle",
                registry=registry,
                buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            ),
            consumer_lag=Gauge(
                f"{prefix}_consumer_lag_messages",
                "High watermark minus position, per assigned partition",
                ["topic", "partition"],
                registry=registry,
            ),
            assigned_partitions=Gauge(
                f"{prefix}_assigned_partitions", "Input partitions held", registry=registry
            ),
            restored_records=Counter(
                f"{prefix}_state_restored_records_total",
                "Changelog records read while restoring state",
                registry=registry,
            ),
            restore_seconds=Histogram(
                f"{prefix}_state_restore_seconds",
                "Time to open and restore one state partition",
                registry=registry,
                buckets=(0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300),
            ),
            ready=Gauge(f"{prefix}_ready", "1 when the instance is ready", registry=registry),
        )
        roles[role] = metrics
        return metrics


_CACHE: WeakKeyDictionary[CollectorRegistry, dict[str, LoopMetrics]] = WeakKeyDictionary()
"""Per registry, each role's metrics; held weakly, so a registry that is gone leaves no entry for a
new one at its freed address to inherit (see `frontier.metrics`)."""
