"""`streamcrawl duplicates --near`: LSH candidates checked on whole signatures, grouped by single
linkage (`streamcrawl.near_duplicates`), and the URLs' latest indexable signed fetches
(`streamcrawl.duplicates_cli`)."""

from __future__ import annotations

import argparse
import itertools
import random
from typing import Any

import numpy as np
import pytest

from parser.minhash import text_minhash
from schemas.links import PageMeta
from streamcrawl.duplicates_cli import (
    NearDuplicateGroup,
    SignedPage,
    _similarity,
    near_duplicate_groups,
    near_summary,
)
from streamcrawl.near_duplicates import (
    MAX_BUCKET_PAIRS_OF,
    near_groups,
    rows_per_band,
    similarities,
)

SITE = "https://shop.example"
VOCABULARY = [f"word{n}" for n in range(20_000)]


def random_signatures(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32, (count, 64), dtype=np.uint32)


def with_shared(signatures: np.ndarray, row: int, like: int, shared: int) -> None:
    """Make ``row`` agree with ``like`` on ``shared`` of the 64 places, spread out."""
    places = np.random.default_rng(row).permutation(64)[:shared]
    signatures[row, places] = signatures[like, places]


def brute_force(signatures: np.ndarray, threshold: float) -> list[set[int]]:
    """Single-linkage groups by comparing every pair."""
    parent = list(range(len(signatures)))

    def root(row: int) -> int:
        while parent[row] != row:
            row = parent[row]
        return row

    for a, b in itertools.combinations(range(len(signatures)), 2):
        if (signatures[a] == signatures[b]).mean() >= threshold:
            parent[root(a)] = root(b)
    groups: dict[int, set[int]] = {}
    for row in range(len(signatures)):
        groups.setdefault(root(row), set()).add(row)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: (-len(g), min(g)))


def test_the_band_width_keeps_pairs_at_the_threshold() -> None:
    assert [rows_per_band(s) for s in (0.5, 0.7, 0.8, 0.9, 0.95, 1.0)] == [2, 2, 4, 4, 8, 8]


def test_groups_equal_comparing_every_pair() -> None:
    signatures = random_signatures(300)
    rng = random.Random(3)
    for row in range(1, 300, 3):  # a third of the rows lean on an earlier one
        with_shared(signatures, row, rng.randrange(row), rng.choice([40, 52, 58, 61, 64]))
    for threshold in (0.6, 0.8, 0.9, 0.95):
        found = near_groups(signatures, threshold)
        # LSH finds a pair at the threshold 99 times in 100: with these seeds, every one.
        assert [set(rows) for rows in found] == brute_force(signatures, threshold), threshold


def test_each_row_reads_its_similarity_to_the_first() -> None:
    signatures = random_signatures(5)
    with_shared(signatures, 3, 1, 60)
    signatures[4] = signatures[1]
    assert near_groups(signatures, 0.9) == [[1, 3, 4]]
    assert similarities(signatures, [1, 3, 4]) == [1.0, 60 / 64, 1.0]
    assert similarities(signatures, [3, 1]) == [1.0, 60 / 64]
    assert near_groups(signatures[:1], 0.9) == []


def test_a_bucket_of_many_alike_pages_stays_one_group() -> None:
    count = 3 * MAX_BUCKET_PAIRS_OF
    signatures = random_signatures(count + 10)
    for row in range(1, count):
        with_shared(signatures, row, 0, 62)  # all alike, none identical
    assert near_groups(signatures, 0.9) == [list(range(count))]


def signed_page(path: str, text: str | None, at: int, **meta: Any) -> SignedPage:
    fields: dict[str, Any] = {"status": 200, **meta}
    if text is not None:
        fields["text_minhash"] = text_minhash(text)
    return SignedPage(
        crawl_id="c1", from_url=f"{SITE}{path}", fetched_at=at, page=PageMeta(**fields)
    )


def article(seed: int, changed: int = 0) -> str:
    rng = random.Random(seed)
    words = [rng.choice(VOCABULARY) for _ in range(200)]
    for place in random.Random(seed + changed).sample(range(200), changed):
        words[place] = "changed"
    return " ".join(words)


def test_the_latest_indexable_signed_fetch_of_each_url_counts() -> None:
    pages = [
        signed_page("/shoe", article(1), 1),
        signed_page("/shoe?colour=red", article(1, changed=2), 2),
        signed_page("/shoe-old", article(1), 3),
        signed_page("/shoe-old", article(9), 9),  # rewritten since: no longer alike
        signed_page("/shoe-print", article(1), 4, canonical=f"{SITE}/shoe"),
        signed_page("/shoe-hidden", article(1), 5, noindex=True),
        signed_page("/shoe-missing", article(1), 6, status=404),
        signed_page("/shoe-short", None, 7),  # too short to sign
        signed_page("/hat", article(2), 8),
        signed_page("/shoe-self", article(1), 10, canonical=f"{SITE}/shoe-self"),
    ]
    pages.append(pages[0].model_copy(update={"part": 1, "page": None}))  # a later part
    groups, signed = near_duplicate_groups(lambda: iter(pages), 0.9)
    [group] = groups
    assert group.urls == [f"{SITE}/shoe", f"{SITE}/shoe-self", f"{SITE}/shoe?colour=red"]
    assert group.similarities[:2] == [1.0, 1.0]
    assert 0.9 <= group.similarities[2] < 1.0
    assert signed == 5  # shoe, shoe?colour=red, shoe-old, hat, shoe-self
    assert near_summary(groups, signed, "c1", 0.9) == (
        "1 group of near-duplicate pages in crawl c1: 3 of 5 signed pages share 90% of their "
        "main text or more with another"
    )
    assert group.lines()[:2] == ["3 URLs nearly alike", f"  100%  {SITE}/shoe"]


def test_a_crawl_without_signatures_says_how_to_get_them() -> None:
    pages = [signed_page("/a", None, 1)]
    assert near_duplicate_groups(lambda: iter(pages), 0.9) == ([], 0)
    assert near_duplicate_groups(lambda: iter([]), 0.9) == ([], 0)  # no such crawl
    assert "crawl with --near-duplicates" in near_summary([], 0, "c1", 0.9)
    assert (
        near_summary([], 4, "c1", 0.9) == "no near-duplicate pages among 4 signed pages of crawl c1"
    )


@pytest.mark.parametrize("value", ["0.4", "1.5", "nan"])
def test_a_similarity_outside_its_range_is_refused(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        _similarity(value)


def test_group_lines_show_each_urls_similarity() -> None:
    group = NearDuplicateGroup([f"{SITE}/a", f"{SITE}/b"], [1.0, 0.921875])
    assert group.lines() == ["2 URLs nearly alike", f"  100%  {SITE}/a", f"   92%  {SITE}/b"]
