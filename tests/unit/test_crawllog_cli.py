"""`streamcrawl log`: one line a fetch, and the count by how fetches ended."""

from __future__ import annotations

from collections import Counter

from schemas.outcomes import FetchOutcome
from streamcrawl.crawllog_cli import (
    HostFetches,
    hosts_report,
    line,
    mimetypes_report,
    seeds_report,
    summary_line,
)

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


def test_a_line_says_when_how_how_deep_how_long_how_big_and_what() -> None:
    page = _outcome(content_type="text/html", body_size=18_230)
    assert line(page) == (
        "2026-12-07 21:21:11.109        200  d2       55ms     18230  text/html  https://example.com/a"
    )
    moved = line(_outcome(kind="redirect", status=301, redirect_to="https://example.com/b"))
    assert moved.endswith(
        "301  d2       55ms         -  -          https://example.com/a  -> https://example.com/b"
    )
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


def test_the_mimetypes_report_counts_fetches_and_bytes_by_media_type() -> None:
    by_type = {"text/html": [120, 3_456_789], "application/pdf": [3, 123_456], "-": [5, 0]}
    assert mimetypes_report(by_type) == [
        "mimetype         fetches          bytes",
        "text/html            120        3456789",
        "-                      5              0",
        "application/pdf        3         123456",
    ]
    assert mimetypes_report({}) == ["no fetches in outcomes"]


def test_the_seeds_report_follows_each_seed_to_where_its_redirects_end() -> None:
    base = "https://example.com"
    fetches = {
        f"{base}/": _outcome(url=f"{base}/"),
        f"{base}/old": _outcome(
            url=f"{base}/old", kind="redirect", status=301, redirect_to=f"{base}/new"
        ),
        f"{base}/new": _outcome(
            url=f"{base}/new", kind="redirect", status=302, redirect_to=f"{base}/newest"
        ),
        f"{base}/newest": _outcome(url=f"{base}/newest", status=200),
        f"{base}/gone": _outcome(url=f"{base}/gone", kind="permanent", status=404, error="404"),
        f"{base}/loop": _outcome(
            url=f"{base}/loop", kind="redirect", status=302, redirect_to=f"{base}/loop"
        ),
        f"{base}/away": _outcome(
            url=f"{base}/away", kind="redirect", status=301, redirect_to=f"{base}/unseen"
        ),
    }
    asked: list[set[str]] = []

    def latest(urls: set[str]) -> dict[str, FetchOutcome]:
        asked.append(urls)
        return {url: fetches[url] for url in urls if url in fetches}

    seeds = [f"{base}/", "HTTPS://EXAMPLE.COM/old", f"{base}/gone", f"{base}/loop"]
    seeds += [f"{base}/away", f"{base}/never"]
    assert seeds_report(seeds, latest) == [
        f"      200  {base}/",
        f"      301  HTTPS://EXAMPLE.COM/old  -> {base}/newest (200)",
        f"      404  {base}/gone  permanent: 404",
        f"      302  {base}/loop  -> {base}/loop (more than 10 redirects)",
        f"      301  {base}/away  -> {base}/unseen (not fetched)",
        f"        -  {base}/never  not fetched (yet, or before outcomes' retention)",
        "6 seeds: 4 fetched, 1 failed, 1 not fetched",
    ]
    assert len(asked) == 3, "one read for the seeds, then one a hop"
