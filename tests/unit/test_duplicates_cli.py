"""`streamcrawl duplicates`' grouping (`streamcrawl.duplicates_cli`): URLs whose latest fetch got
the same body, each URL once, only fetches that got a body."""

from __future__ import annotations

from typing import Any

from schemas.outcomes import FetchOutcome
from streamcrawl.duplicates_cli import DuplicateGroup, duplicate_groups, summary

SITE = "https://shop.example"
HOME, OFFER, ERROR = "a" * 64, "b" * 64, "c" * 64


def fetch(path: str, body: str | None, at: int, **fields: Any) -> FetchOutcome:
    values: dict[str, Any] = {"kind": "done", "status": 200, "content_hash": body, **fields}
    return FetchOutcome(
        crawl_id="c1",
        url=f"{SITE}{path}",
        host="shop.example",
        lease_id=f"l{at}",
        fetched_at=at,
        **values,
    )


def test_urls_sharing_their_latest_body_are_grouped() -> None:
    fetches = [
        fetch("/", HOME, 1),
        fetch("/?ref=nav", HOME, 2),
        fetch("/index.html", HOME, 3),
        fetch("/index.html", HOME, 9, kind="unchanged", status=304),  # a recrawl: still once
        fetch("/offer", OFFER, 4),
        fetch("/offer-old", OFFER, 5),
        fetch("/offer-old", "d" * 64, 8),  # changed since: no longer a copy
        fetch("/missing", ERROR, 6),
        fetch("/gone", ERROR, 7, kind="permanent", status=404),  # no body kept: not counted
        fetch("/flaky", None, 10, kind="retryable", status=None),
    ]
    groups = duplicate_groups(lambda: iter(fetches))
    assert groups == [
        DuplicateGroup(HOME, [f"{SITE}/", f"{SITE}/?ref=nav", f"{SITE}/index.html"]),
    ]
    assert summary(groups, "c1") == (
        "1 group of duplicate pages in crawl c1: 3 URLs serve 1 body, 2 copies among them"
    )
    assert groups[0].lines()[0] == f"3 URLs, sha256 {'a' * 16}"


def test_no_fetch_with_a_body_means_no_groups() -> None:
    assert duplicate_groups(lambda: iter([])) == []
    assert summary([], "c1") == "no duplicate pages in crawl c1"


def test_groups_come_largest_first() -> None:
    fetches = [fetch(f"/b{n}", OFFER, n) for n in range(2)]
    fetches += [fetch(f"/a{n}", HOME, 10 + n) for n in range(3)]
    groups = duplicate_groups(lambda: iter(fetches))
    assert [len(group.urls) for group in groups] == [3, 2]
