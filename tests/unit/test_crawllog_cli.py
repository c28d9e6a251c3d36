"""`streamcrawl log`: one line a fetch, and the count by how fetches ended."""

from __future__ import annotations

from collections import Counter

from schemas.outcomes import FetchOutcome
from streamcrawl.crawllog_cli import HostFetches, hosts_report, line, summary_line

AT = 1_796_678_471_109  # 2026-12-07 21:21:11.109 UTC


def _outcome(**fields: object) -> FetchOutcome:
    base: dict[str, object] = {
        "crawl_id": "c1",
        "url": "https://example.com/a",
        "host": "example.com",
        "lease_id": "l1",
        "depth": 2,
        "kind": "done",
        "status": 200,
        "fetched_at": AT,
        "elapsed_ms": 55,
    }
    return FetchOutcome.model_validate({**base, **fields})


def test_a_line_says_when_how_how_deep_how_long_and_what() -> None:
    assert line(_outcome()) == (
        "2026-12-07 21:21:11.109        200  d2       55ms  https://example.com/a"
    )
    moved = line(_outcome(kind="redirect", status=301, redirect_to="https://example.com/b"))
    assert moved.endswith("301  d2       55ms  https://example.com/a  -> https://example.com/b")
    failed = line(_outcome(kind="retryable", status=None, error="timeout: total deadline"))
    assert "retryable  d2" in failed and failed.endswith("retryable: timeout: total deadline")


def test_the_summary_counts_every_fetch_by_its_last_word() -> None:
    counts = Counter({"200": 40, "404": 2, "retryable": 3})
    assert summary_line("c1", counts, 10) == (
        "45 fetches of crawl c1, the last 10 listed: 200=40, retryable=3, 404=2"
    )
    assert summary_line("c1", counts, 45).startswith("45 fetches of crawl c1: ")
    assert summary_line("c1", Counter(), 0) == "no fetches of crawl c1 in outcomes"


def test_the_hosts_report_counts_each_hosts_fetches_by_status_class() -> None:
    by_host: dict[str, HostFetches] = {}
    for host, status, kind, elapsed in (
        ("a.example", 200, "done", 10),
        ("a.example", 301, "redirect", 20),
        ("a.example", None, "retryable", 30),
        ("b.example", 404, "permanent", 5),
    ):
        fetched = _outcome(host=host, status=status, kind=kind, elapsed_ms=elapsed)
        by_host.setdefault(host, HostFetches()).add(fetched)
    assert hosts_report(by_host) == [
        "host       fetches     2xx     3xx     4xx     5xx    none  mean ms",
        "a.example        3       1       1       0       0       1       20",
        "b.example        1       0       0       1       0       0        5",
    ]
    assert hosts_report({}) == ["no fetches in outcomes"]
