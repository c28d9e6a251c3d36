"""The fetcher's own Prometheus metrics (the names of the contract shared by every service).

On the default registry, so the side server's /metrics shows them beside the kernel's
``streamcrawl_fetcher_*`` loop metrics. No label carries a URL or a host: ``status_class`` is
``2xx``..``5xx`` or ``none`` (no response, or a status outside 200..599) and ``outcome`` is a
FetchOutcome kind or ``robots_txt`` for a robots.txt fetch, so the series stay a few dozen.

Every fetch attempt is counted (pages and robots.txt alike, each robots.txt redirect hop too):
:func:`counted`, or :func:`attempt_started`, :func:`attempt_ended` and :func:`record` around an
await of its own (the page path, one coroutine less per fetch). That keeps ``requests_in_flight``
and, once the attempt ended, the request count, its duration, the body bytes read from the
connection and a refused address. Labelled children are looked up once and kept, since a labels()
call costs more than the increment.
"""

from __future__ import annotations

from collections.abc import Awaitable

from prometheus_client import Counter, Gauge, Histogram

from fetcher.errors import Reason
from fetcher.results import FetchResult

REQUESTS = Counter(
    "streamcrawl_fetcher_requests_total",
    "Fetch attempts (robots.txt included), by response status class and outcome",
    ["status_class", "outcome"],
)
REQUEST_DURATION = Histogram(
    "streamcrawl_fetcher_request_duration_seconds",
    "Time of one fetch attempt, connect to last body byte",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 90),
)
RESPONSE_BYTES = Counter(
    "streamcrawl_fetcher_response_bytes_total",
    "Response body bytes read from connections, before decoding",
)
ROBOTS_DENIED = Counter(
    "streamcrawl_fetcher_robots_denied_total",
    "Requests not fetched because robots.txt disallows them",
)
BLOCKED_ADDRESSES = Counter(
    "streamcrawl_fetcher_blocked_addresses_total",
    "Fetches refused because a host resolved to a blocked address",
)
IN_FLIGHT = Gauge(
    "streamcrawl_fetcher_requests_in_flight",
    "Fetch attempts under way",
)
_in_flight = [0]
"""Kept by :func:`counted` as a plain count (only the dispatcher's loop writes it) and read when
/metrics is served, which spares two locked updates per fetch."""
IN_FLIGHT.set_function(lambda: _in_flight[0])
POLITENESS_WAIT = Histogram(
    "streamcrawl_fetcher_politeness_wait_seconds",
    "Time a request waited in its host queue until politeness let it start",
    buckets=(0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
)

ROBOTS_TXT = "robots_txt"
"""The ``outcome`` label of a robots.txt fetch."""

_STATUS_CLASSES = {digit: f"{digit}xx" for digit in range(2, 6)}
_children: dict[tuple[str, str], Counter] = {}


def status_class(status: int | None) -> str:
    """``2xx``..``5xx``, or ``none`` without a response or for a status outside 200..599."""
    if status is None:
        return "none"
    return _STATUS_CLASSES.get(status // 100, "none") if status >= 0 else "none"


def record(result: FetchResult, outcome: str) -> None:
    """Count one finished fetch attempt; ``outcome`` is its kind or :data:`ROBOTS_TXT`."""
    labels = (status_class(result.status), outcome)
    child = _children.get(labels)
    if child is None:
        child = _children[labels] = REQUESTS.labels(*labels)
    child.inc()
    REQUEST_DURATION.observe(result.elapsed_s)
    if result.wire_bytes:
        RESPONSE_BYTES.inc(result.wire_bytes)
    if result.failure is not None and result.failure.reason is Reason.BLOCKED_ADDRESS:
        BLOCKED_ADDRESSES.inc()


def attempt_started() -> None:
    """A fetch attempt is under way (:func:`counted` without its coroutine, for the page path)."""
    _in_flight[0] += 1


def attempt_ended() -> None:
    """The attempt of :func:`attempt_started` ended, however; :func:`record` it if it returned."""
    _in_flight[0] -= 1


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
