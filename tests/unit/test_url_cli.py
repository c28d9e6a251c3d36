"""`streamcrawl url`: how a URL's status reads, whatever state it is in."""

from __future__ import annotations

from typing import Any

from frontier.lookup import UrlStatus
from streamcrawl.url_cli import status_lines

NOW_MS = 1_796_000_000_000  # 2026-11-30 00:53:20 UTC


def _lines(**fields: Any) -> list[str]:
    base = {"crawl_id": "c1", "url": "https://a.example/x", "host": "a.example", "partition": 2}
    status = UrlStatus.model_validate({**base, **fields})
    return status_lines(status.model_dump(mode="json"), NOW_MS)


def test_a_url_waiting_for_its_recrawl_says_when_and_how_often() -> None:
    lines = _lines(
        admitted=True,
        state="waiting",
        waiting_for="recrawl",
        depth=1,
        attempts=1,
        last_outcome="304",
        due_ms=NOW_MS + 12 * 60_000 + 3_000,
        recrawl_interval_ms=40 * 60_000,
        etag='"v3"',
        content_hash="ab12" * 16,
    )
    assert lines == [
        "https://a.example/x",
        "crawl: c1  host: a.example  partition: 2",
        "state: waiting for a recrawl, due 2026-11-30 01:05:23 UTC (in 12m 3s)",
        "depth: 1  attempts: 1  last outcome: 304",
        "recrawl interval: 40m",
        'etag: "v3"  sha256: ab12ab12ab12ab12',
    ]


def test_a_leased_url_names_its_lease_and_deadline() -> None:
    lines = _lines(
        admitted=True,
        state="leased",
        depth=0,
        attempts=2,
        lease_id="l-7",
        lease_deadline_ms=NOW_MS + 9 * 60_000,
    )
    assert lines[2] == (
        "state: leased to a fetcher (lease l-7, deadline 2026-11-30 01:02:20 UTC (in 9m))"
    )
    assert lines[3] == "depth: 0  attempts: 2  last outcome: none yet"


def test_a_url_never_admitted_says_why_when_the_scope_knows() -> None:
    refused = _lines(admitted=False, scope="exclude")
    assert refused[2] == (
        "not admitted: the crawl's scope refuses it: it matches the crawl's --exclude pattern"
    )
    trap = _lines(admitted=False, scope="trap_path_segments")
    assert trap[2].endswith("it looks like a crawler trap (trap_path_segments)")
    unseen = _lines(admitted=False)
    assert unseen[2].startswith("not admitted: no page of the crawl has linked it so far")
    purged = _lines(admitted=False, purged=True)
    assert purged[2].startswith("not known: the crawl has finished and this frontier keeps none")
