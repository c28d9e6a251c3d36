"""The fetcher's own Prometheus metrics (the names of the contract shared by every service).

On the default registry, so the side server's /metrics shows them beside the kernel's
``streamcrawl_fetcher_*`` loop metrics. No label carries a URL or a host: ``status_class`` is
``2xx``..``5xx`` or ``none`` (no response, or a status outside 200..599) and ``outcome`` is a
FetchOutcome kind or ``robots_txt`` for a robots.txt fetch, so the series stay a few dozen.

Every fetch attempt is counted (pages and robots.txt alike, each robots.txt redirect hop too):
``requests_in_flight`` while it runs and, once it ended, the request count, its duration, the body
bytes read from the connection and a refused address (:func:`counted`, or :func:`attempt_started`,
:func:`attempt_ended` and :func:`record` around an await of its own).

Only the dispatcher's event loop writes these, several times per fetch, so they are plain numbers
(:class:`Tally`, :class:`TallyHistogram`) that one collector reads when /metrics is served, not
prometheus_client's metrics, each of whose updates takes a lock and checks its arguments: 4.6 us
per fetch against 0.9 (tests/bench/bench_fetcher_costs.py, "metrics of one fetch"). A process
runs one dispatcher; should two threads ever write one tally at once, the GIL can interleave an
increment and lose it, never corrupt the value.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Awaitable, Iterator, Sequence

from prometheus_client import REGISTRY
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from fetcher.errors import Reason
from fetcher.results import FetchResult


class Tally:
    """A counter's value; :meth:`inc` is a plain addition."""

    __slots__ = ("documentation", "name", "value")

    def __init__(self, name: str, documentation: str) -> None:
        self.name = name
        self.documentation = documentation
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def family(self) -> Metric:
        return CounterMetricFamily(self.name, self.documentation, value=self.value)


class LabelledTally:
    """A counter with labels: one :class:`Tally` per combination, made on first use."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.label_names = tuple(labels)
        self.children: dict[tuple[str, ...], Tally] = {}

    def labels(self, *values: str) -> Tally:
        child = self.children.get(values)
        if child is None:
            if len(values) != len(self.label_names):
                raise ValueError(f"{self.name} takes labels {self.label_names}, got {values}")
            child = self.children[values] = Tally(self.name, self.documentation)
        return child

    def family(self) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.label_names)
        for values, child in list(self.children.items()):
            family.add_metric(values, child.value)
        return family


class TallyHistogram:
    """A histogram's buckets and sum; :meth:`observe` is a bisection and two additions."""

    __slots__ = ("bounds", "counts", "documentation", "name", "sum")

    def __init__(self, name: str, documentation: str, buckets: Sequence[float]) -> None:
        self.name = name
        self.documentation = documentation
        self.bounds = (*sorted(float(bound) for bound in buckets), math.inf)
        self.counts = [0] * len(self.bounds)
        """Observations per bucket (not cumulative): the first bound at or above each."""
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, amount)] += 1
        self.sum += amount

    def family(self) -> Metric:
        counts, total = list(self.counts), self.sum
        buckets: list[tuple[str, float]] = []
        cumulative = 0
        for bound, count in zip(self.bounds, counts, strict=True):
            cumulative += count
            buckets.append((_le_label(bound), cumulative))
        return HistogramMetricFamily(
            self.name, self.documentation, buckets=buckets, sum_value=total
        )


def _le_label(bound: float) -> str:
    """A bucket's ``le`` as prometheus_client writes it (``0.005``, ``1.0``, ``+Inf``)."""
    return "+Inf" if math.isinf(bound) else repr(bound)


class InFlight:
    """A gauge of fetch attempts under way."""

    __slots__ = ("documentation", "name", "value")

    def __init__(self, name: str, documentation: str) -> None:
        self.name = name
        self.documentation = documentation
        self.value = 0

    def family(self) -> Metric:
        return GaugeMetricFamily(self.name, self.documentation, value=self.value)


REQUESTS = LabelledTally(
    "streamcrawl_fetcher_requests_total",
    "Fetch attempts (robots.txt included), by response status class and outcome",
    ["status_class", "outcome"],
)
REQUEST_DURATION = TallyHistogram(
    "streamcrawl_fetcher_request_duration_seconds",
    "Time of one fetch attempt, connect to last body byte",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 90),
)
RESPONSE_BYTES = Tally(
    "streamcrawl_fetcher_response_bytes_total",
    "Response body bytes read from connections, before decoding",
)
ROBOTS_DENIED = Tally(
    "streamcrawl_fetcher_robots_denied_total",
    "Requests not fetched because robots.txt disallows them",
)
BLOCKED_ADDRESSES = Tally(
    "streamcrawl_fetcher_blocked_addresses_total",
    "Fetches refused because a host resolved to a blocked address",
)
IN_FLIGHT = InFlight(
    "streamcrawl_fetcher_requests_in_flight",
    "Fetch attempts under way",
)
POLITENESS_WAIT = TallyHistogram(
    "streamcrawl_fetcher_politeness_wait_seconds",
    "Time a request waited in its host queue until politeness let it start",
    buckets=(0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
)


class _FetcherCollector(Collector):
    """Reads the tallies above when the registry is collected (/metrics served)."""

    def collect(self) -> Iterator[Metric]:
        for metric in (
            REQUESTS,
            REQUEST_DURATION,
            RESPONSE_BYTES,
            ROBOTS_DENIED,
            BLOCKED_ADDRESSES,
            IN_FLIGHT,
            POLITENESS_WAIT,
        ):
            yield metric.family()


REGISTRY.register(_FetcherCollector())

ROBOTS_TXT = "robots_txt"
"""The ``outcome`` label of a robots.txt fetch."""

_STATUS_CLASSES = {digit: f"{digit}xx" for digit in range(2, 6)}


def status_class(status: int | None) -> str:
    """``2xx``..``5xx``, or ``none`` without a response or for a status outside 200..599."""
    if status is None:
        return "none"
    return _STATUS_CLASSES.get(status // 100, "none") if status >= 0 else "none"


def record(result: FetchResult, outcome: str) -> None:
    """Count one finished fetch attempt; ``outcome`` is its kind or :data:`ROBOTS_TXT`."""
    REQUESTS.labels(status_class(result.status), outcome).value += 1
    REQUEST_DURATION.observe(result.elapsed_s)
    if result.wire_bytes:
        RESPONSE_BYTES.value += result.wire_bytes
    if result.failure is not None and result.failure.reason is Reason.BLOCKED_ADDRESS:
        BLOCKED_ADDRESSES.value += 1


def attempt_started() -> None:
    """A fetch attempt is under way (:func:`counted` without its coroutine, for the page path)."""
    IN_FLIGHT.value += 1


def attempt_ended() -> None:
    """The attempt of :func:`attempt_started` ended, however; :func:`record` it if it returned."""
    IN_FLIGHT.value -= 1


async def counted(fetching: Awaitable[FetchResult], outcome: str | None = None) -> FetchResult:
    """Await one fetch attempt while it counts as in flight, then :func:`record` it (under
    ``outcome``, or its own kind when None)."""
    attempt_started()
    try:
        result = await fetching
    finally:
        attempt_ended()
    record(result, result.kind if outcome is None else outcome)
    return result
