"""The fetcher's own Prometheus metrics (the names of the contract shared by every service).

On the default registry, so the side server's /metrics shows them beside the kernel's
``streamcrawl_fetcher_*`` loop metrics. No label carries a URL or a host: ``status_class`` is
``2xx``..``5xx`` or ``none`` (no response, or a status outside 200..599) and ``outcome`` is a
FetchOutcome kind or ``robots_txt`` for a robots.txt fetch, so the series stay a few dozen.

Every fetch attempt is counted (pages and robots.txt alike, each robots.txt redirect hop too):
:func:`counted`, or :func:`attempt_started`, :func:`attempt_ended` and :func:`record` around an
await of its own (the page path, one coroutine less per fetch). That keeps ``requests_in_flight``
and, once the attempt ended, the request count, its duration, the body bytes read from the
connection and a refused address.

What is written for every fetch (the request count, the two histograms, the bytes, in flight) is
kept in plain numbers that only the dispatcher's event loop writes, and turned into samples when
/metrics is read (:class:`LoopTallies`, registered as a collector): a prometheus_client Counter
takes a lock for each increment and a Histogram two, plus a Python scan of its buckets, about
8 us of CPU per fetch in all. A scrape reads the numbers while the loop may be writing them, so
a histogram's sum can be one observation ahead of or behind its counts; the counts themselves are
copied in one step and stay consistent. The rare events (robots.txt denials, blocked addresses,
proxy errors) stay ordinary Counters.
"""

from __future__ import annotations

import bisect
from collections.abc import Awaitable, Iterator

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from fetcher.errors import Reason
from fetcher.results import FetchResult


class LoopHistogram:
    """A histogram observed by one thread without locks: a count per bucket and a sum."""

    __slots__ = ("bounds", "counts", "documentation", "name", "total")

    def __init__(self, name: str, documentation: str, bounds: tuple[float, ...]) -> None:
        self.name = name
        self.documentation = documentation
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        """Per bucket, not cumulative; the last one is above every bound (``+Inf``)."""
        self.total = 0.0

    def observe(self, value: float) -> None:
        # bisect_left: the first bound >= value, as Prometheus's ``le`` (less or equal) says.
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    def family(self) -> HistogramMetricFamily:
        counts = list(self.counts)  # one copy: the buckets agree with each other and the count
        buckets: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(self.bounds, counts, strict=False):
            running += count
            buckets.append((repr(float(bound)), running))  # "0.005", "1.0": prometheus_client's
        buckets.append(("+Inf", running + counts[-1]))
        return HistogramMetricFamily(
            self.name, self.documentation, buckets=buckets, sum_value=self.total
        )


class LoopTallies(Collector):
    """The per-fetch metrics of the module docstring, written by the dispatcher's loop."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str], int] = {}
        """Fetch attempts by (status class, outcome)."""
        self.response_bytes = 0
        self.in_flight = 0
        self.cookie_jars = 0
        self.request_duration = LoopHistogram(
            "streamcrawl_fetcher_request_duration_seconds",
            "Time of one fetch attempt, connect to last body byte",
            (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 90),
        )
        self.politeness_wait = LoopHistogram(
            "streamcrawl_fetcher_politeness_wait_seconds",
            "Time a request waited in its host queue until politeness let it start",
            (0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
        )

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        requests = CounterMetricFamily(
            "streamcrawl_fetcher_requests",
            "Fetch attempts (robots.txt included), by response status class and outcome",
            labels=("status_class", "outcome"),
        )
        for labels, count in list(self.requests.items()):
            requests.add_metric(labels, count)
        yield requests
        yield CounterMetricFamily(
            "streamcrawl_fetcher_response_bytes",
            "Response body bytes read from connections, before decoding",
            value=self.response_bytes,
        )
        yield GaugeMetricFamily(
            "streamcrawl_fetcher_requests_in_flight", "Fetch attempts under way", self.in_flight
        )
        yield GaugeMetricFamily(
            "streamcrawl_fetcher_cookie_jars",
            "Cookie jars kept for crawls with cookies, one per crawl and host (bounded)",
            self.cookie_jars,
        )
        yield self.request_duration.family()
        yield self.politeness_wait.family()


TALLIES = LoopTallies()
REGISTRY.register(TALLIES)
ROBOTS_DENIED = Counter(
    "streamcrawl_fetcher_robots_denied_total",
    "Requests not fetched because robots.txt disallows them",
)
ROBOTS_UNREACHABLE = Counter(
    "streamcrawl_fetcher_robots_unreachable_total",
    "Requests postponed, or failed when the cause is permanent, because their robots.txt "
    "could not be read",
)
BLOCKED_ADDRESSES = Counter(
    "streamcrawl_fetcher_blocked_addresses_total",
    "Fetches refused because a host resolved to a blocked address",
)
PROXY_ERRORS = Counter(
    "streamcrawl_fetcher_proxy_errors_total",
    "Fetches that failed at the configured proxy: unreachable, a refused tunnel, a 407",
)
LEASES_EXPIRED = Counter(
    "streamcrawl_fetcher_leases_expired_total",
    "Requests dropped unfetched because their lease deadline passed while they waited here",
)

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
    tallies, labels = TALLIES, (status_class(result.status), outcome)
    tallies.requests[labels] = tallies.requests.get(labels, 0) + 1
    tallies.request_duration.observe(result.elapsed_s)
    tallies.response_bytes += result.wire_bytes
    if result.failure is not None:
        if result.failure.reason is Reason.BLOCKED_ADDRESS:
            BLOCKED_ADDRESSES.inc()
        elif result.failure.reason is Reason.PROXY_ERROR:
            PROXY_ERRORS.inc()


def attempt_started() -> None:
    """A fetch attempt is under way (:func:`counted` without its coroutine, for the page path)."""
    TALLIES.in_flight += 1


def attempt_ended() -> None:
    """The attempt of :func:`attempt_started` ended, however; :func:`record` it if it returned."""
    TALLIES.in_flight -= 1


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
