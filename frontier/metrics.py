"""The frontier's Prometheus metrics (`streamcrawl_frontier_*`, the contract of every service).

Counters follow the per-crawl counters the handler keeps (`frontier.progress` names them), summed
over crawls: a handler call's counts reach Prometheus when its session finishes, so a call that
raises counts nothing. Gauges describe this instance's open partitions and are set by the handler
every progress interval (`FrontierHandler.on_tick`):

- ``urls_queued`` and ``leases_open``: the crawls' ``queued`` and ``leased`` gauges, summed;
- ``hosts_ready``: hosts with queued URLs whose ready time has come; ``hosts_throttled``: hosts with
  queued URLs that wait (for a lease slot to free up, their politeness window, a budget grant, a
  paused crawl); ``hosts_held``: those of them held by a server's Retry-After or an unreadable
  robots.txt (`frontier.outcomes.hold_host`; counter ``host_holds_total``);
- ``recrawls_total{result}``: recrawl fetches that found their page ``changed`` or ``unchanged``
  (their ratio is what an adaptive recrawl interval tunes, `frontier.recrawl`);
- ``oldest_ready_url_age_seconds``: how long the host that has been ready longest has waited to
  be released (0 when none waits): a release loop that falls behind shows here;
- ``crawl_urls{crawl_id,counter}``: per crawl not yet done or cancelled, the counters ``discovered,
  admitted, queued, leased, fetched, failed, dead`` and, for what its recrawls found, ``changed,
  unchanged`` of this instance's partitions; a crawl's series are removed once it finishes, so the
  label set stays bounded.

No label names a URL or a host. Metrics register once per registry (the default one in production,
where the side server's ``/metrics`` serves them); tests pass a registry of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

PREFIX = "streamcrawl_frontier"
CRAWL_COUNTERS = (
    "discovered",
    "admitted",
    "queued",
    "leased",
    "fetched",
    "failed",
    "dead",
    "changed",
    "unchanged",
)
REJECTED = "rejected_"

Increment = Callable[[float], None]


@dataclass(frozen=True)
class PartitionGauges:
    """What one open partition contributes to the instance's gauges."""

    queued: int = 0
    leases_open: int = 0
    hosts_ready: int = 0
    hosts_throttled: int = 0
    hosts_held: int = 0
    oldest_ready_at_ms: int | None = None
    crawls: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Per running crawl, its `CRAWL_COUNTERS` on this partition."""


@dataclass(frozen=True)
class FrontierMetrics:
    discovered: Counter
    admitted: Counter
    duplicate: Counter
    out_of_scope: Counter
    released: Counter
    retried: Counter
    dead: Counter
    host_holds: Counter
    repeated: Counter
    recrawls: Counter
    queued: Gauge
    leases_open: Gauge
    hosts_ready: Gauge
    hosts_throttled: Gauge
    hosts_held: Gauge
    oldest_ready_url_age: Gauge
    crawl_urls: Gauge
    _increments: dict[str, Increment | None] = field(
        default_factory=dict, repr=False, compare=False
    )
    """Per counter name, the bound ``inc`` of its metric, or None when it has none."""

    @classmethod
    def register(cls, registry: CollectorRegistry = REGISTRY) -> FrontierMetrics:
        """The frontier's metrics on ``registry``, created the first time only."""
        existing = _REGISTERED.get(registry)
        if existing is not None:
            return existing

        def counter(name: str, doc: str, labels: Iterable[str] = ()) -> Counter:
            return Counter(f"{PREFIX}_{name}", doc, list(labels), registry=registry)

        def gauge(name: str, doc: str, labels: Iterable[str] = ()) -> Gauge:
            return Gauge(f"{PREFIX}_{name}", doc, list(labels), registry=registry)

        metrics = cls(
            discovered=counter("urls_discovered_total", "URLs found in DiscoveredUrls and seeds"),
            admitted=counter("urls_admitted_total", "URLs admitted into a host queue"),
            duplicate=counter("urls_duplicate_total", "URLs already in their crawl's visited set"),
            out_of_scope=counter(
                "urls_out_of_scope_total", "URLs refused, by the rule they broke", ["reason"]
            ),
            released=counter("urls_released_total", "URLs leased to the fetchers"),
            retried=counter("urls_retried_total", "Fetches queued again after a retryable outcome"),
            dead=counter("urls_dead_total", "URLs given up on (retries spent, permanent errors)"),
            host_holds=counter(
                "host_holds_total",
                "Host holds begun or made longer by a Retry-After or an unreadable robots.txt",
            ),
            repeated=counter(
                "messages_repeated_total",
                "ParseReports and DiscoveredUrls delivered again and counted once, by kind",
                ["kind"],
            ),
            recrawls=counter(
                "recrawls_total",
                "Recrawl fetches, by whether they found the page changed or unchanged",
                ["result"],
            ),
            queued=gauge("urls_queued", "URLs waiting in host queues on this instance"),
            leases_open=gauge("leases_open", "Leases waiting for their outcome on this instance"),
            hosts_ready=gauge("hosts_ready", "Hosts with queued URLs due for release"),
            hosts_throttled=gauge(
                "hosts_throttled", "Hosts with queued URLs waiting (politeness, window, budget)"
            ),
            hosts_held=gauge(
                "hosts_held", "Hosts with queued URLs held back by a Retry-After or robots.txt"
            ),
            oldest_ready_url_age=gauge(
                "oldest_ready_url_age_seconds", "How long the longest-ready host has waited"
            ),
            crawl_urls=gauge(
                "crawl_urls",
                "Per running crawl, its counters on this instance's partitions",
                ["crawl_id", "counter"],
            ),
        )
        for kind in _REPEATED_KIND.values():
            metrics.repeated.labels(kind)  # at 0 from the start: repeats are rare
        for result in _RECRAWL_RESULTS:
            metrics.recrawls.labels(result)
        _REGISTERED[registry] = metrics
        return metrics

    def count(self, name: str, delta: int) -> None:
        """Add a per-crawl counter's increase (``delta`` > 0) to the matching metric, if any. Every
        handled message counts several: each name's metric (or none) is looked up once."""
        if delta <= 0:
            return
        try:
            increment = self._increments[name]
        except KeyError:
            increment = self._increments[name] = self._increment_of(name)
        if increment is not None:
            increment(delta)

    def _increment_of(self, name: str) -> Increment | None:
        if name.startswith(REJECTED):
            return self.out_of_scope.labels(name[len(REJECTED) :]).inc
        if name in _REPEATED_KIND:
            return self.repeated.labels(_REPEATED_KIND[name]).inc
        if name in _RECRAWL_RESULTS:
            return self.recrawls.labels(name).inc
        metric = getattr(self, _METRIC_OF_COUNTER.get(name, ""), None)
        return metric.inc if isinstance(metric, Counter) else None

    def show(self, partitions: Iterable[PartitionGauges], now_ms: int, shown: set[str]) -> None:
        """Set the gauges from every open partition's share; ``shown`` holds the crawls with
        series (updated in place), so those of crawls that finished are removed."""
        parts = list(partitions)
        self.queued.set(sum(p.queued for p in parts))
        self.leases_open.set(sum(p.leases_open for p in parts))
        self.hosts_ready.set(sum(p.hosts_ready for p in parts))
        self.hosts_throttled.set(sum(p.hosts_throttled for p in parts))
        self.hosts_held.set(sum(p.hosts_held for p in parts))
        oldest = [p.oldest_ready_at_ms for p in parts if p.oldest_ready_at_ms is not None]
        self.oldest_ready_url_age.set(max(0, now_ms - min(oldest)) / 1000 if oldest else 0)
        totals: dict[str, dict[str, int]] = {}
        for part in parts:
            for crawl_id, counters in part.crawls.items():
                total = totals.setdefault(crawl_id, dict.fromkeys(CRAWL_COUNTERS, 0))
                for name in CRAWL_COUNTERS:
                    total[name] += counters.get(name, 0)
        for crawl_id in sorted(shown - set(totals)):
            for name in CRAWL_COUNTERS:
                self.crawl_urls.remove(crawl_id, name)
        for crawl_id, total in totals.items():
            for name, value in total.items():
                self.crawl_urls.labels(crawl_id, name).set(value)
        shown.clear()
        shown.update(totals)


_REGISTERED: WeakKeyDictionary[CollectorRegistry, FrontierMetrics] = WeakKeyDictionary()
"""Per registry, its metrics; held weakly, so a registry that is gone leaves no entry behind. (Keyed
by ``id(registry)`` it did: a new registry at the freed address was given the old one's metrics,
registered on the old registry and invisible on its own.)"""
_REPEATED_KIND = {
    "reports_repeated": "parse_report",
    "discovered_messages_repeated": "discovered_urls",
}
_RECRAWL_RESULTS = ("changed", "unchanged")
"""The per-crawl counters of recrawl fetches, each a ``result`` of ``recrawls_total``."""
_METRIC_OF_COUNTER = {
    "discovered": "discovered",
    "admitted": "admitted",
    "duplicate": "duplicate",
    "leases": "released",
    "retried": "retried",
    "dead": "dead",
    "host_holds": "host_holds",
}
"""The per-crawl counter each counter metric follows, by field name."""
