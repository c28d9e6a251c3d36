"""Trap guards: URL length, path segments, repeated segments and runs, query parameters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier.traps import (
    TrapLimits,
    check_traps,
    has_repeated_segments,
    path_segments,
    query_param_count,
)

BASE = "https://example.com"


def test_ordinary_urls_pass() -> None:
    for url in (
        f"{BASE}/",
        f"{BASE}/docs/api/auth",
        f"{BASE}/2024/01/01/post?page=2&sort=new",
        f"{BASE}/a/b/a/b",
        f"{BASE}/a/x/a/y/a",
    ):
        assert check_traps(url) is None, url


def test_url_length_limit_is_inclusive() -> None:
    at_limit = f"{BASE}/" + "x" * (2048 - len(BASE) - 1)
    assert len(at_limit) == 2048
    assert check_traps(at_limit) is None
    assert check_traps(at_limit + "x") == "trap_url_length"


def test_path_segment_limit_counts_empty_segments_but_not_a_trailing_slash() -> None:
    segments = [f"s{i}" for i in range(32)]
    assert check_traps(BASE + "/" + "/".join(segments) + "/") is None
    assert check_traps(BASE + "/" + "/".join([*segments, "one-more"])) == "trap_path_segments"
    assert path_segments("/a//b/") == ["a", "", "b"]
    assert path_segments("/") == []
    assert check_traps(BASE + "/a" + "/" * 40 + "b") == "trap_path_segments"


def test_a_segment_repeated_more_than_three_times_is_a_trap() -> None:
    assert check_traps(f"{BASE}/a/x/a/y/a/z") is None
    assert check_traps(f"{BASE}/a/x/a/y/a/z/a") == "trap_repeated_segments"


@pytest.mark.parametrize(
    ("path", "trapped"),
    [
        ("/a/b/a/b", False),
        ("/a/b/a/b/a/b", True),
        ("/x/a/b/c/a/b/c/a/b/c/y", True),
        ("/a/b/c/a/b/c", False),
        ("/a/b/a/c/a/b", False),
        ("/q/calendar/2024/calendar/2024/calendar/2024", True),
    ],
)
def test_a_run_repeated_back_to_back_more_than_twice_is_a_trap(path: str, trapped: bool) -> None:
    assert (check_traps(BASE + path) == "trap_repeated_segments") is trapped


def test_query_parameter_limit() -> None:
    params = "&".join(f"p{i}=1" for i in range(32))
    assert check_traps(f"{BASE}/search?{params}") is None
    assert check_traps(f"{BASE}/search?{params}&p32=1") == "trap_query_params"
    assert query_param_count("") == 0
    assert query_param_count("a=1&&b") == 2


def test_rules_report_in_order_and_limits_are_configurable() -> None:
    limits = TrapLimits(max_url_length=35, max_path_segments=3, max_query_params=1)
    assert check_traps(f"{BASE}/a/b/c/d?x=1&y=2&z=3", limits) == "trap_url_length"
    assert check_traps(f"{BASE}/a/b/c/d?x=1&y=2", limits) == "trap_path_segments"
    assert check_traps(f"{BASE}/a/b?x=1&y=2", limits) == "trap_query_params"
    strict = TrapLimits(max_segment_repeats=1, max_run_repeats=1)
    assert check_traps(f"{BASE}/a/x/a", strict) == "trap_repeated_segments"
    assert check_traps(f"{BASE}/a/b/a/b", strict) == "trap_repeated_segments"
    with pytest.raises(ValueError):
        TrapLimits(max_url_length=0)
    with pytest.raises(ValueError):
        TrapLimits(max_run_repeats=0)


@settings(deadline=None, max_examples=200)
@given(st.lists(st.text("abcdef", min_size=1, max_size=3), unique=True, max_size=32))
def test_distinct_segments_never_count_as_repeated(segments: list[str]) -> None:
    assert not has_repeated_segments(segments, 3, 2)
    assert check_traps(BASE + "/" + "/".join(segments)) is None


@settings(deadline=None, max_examples=200)
@given(
    st.lists(st.text("ab", min_size=1, max_size=2), min_size=2, max_size=4),
    st.integers(min_value=3, max_value=5),
)
def test_any_run_repeated_three_times_is_caught(run: list[str], repeats: int) -> None:
    path = "/x/" + "/".join(run * repeats) + "/y"
    assert check_traps(BASE + path) == "trap_repeated_segments"


def _check_traps_in_full(url: str, limits: TrapLimits) -> str | None:
    """The rules as the module docstring states them, every one evaluated on the segment list."""
    if len(url) > limits.max_url_length:
        return "trap_url_length"
    path, _, query = url.removeprefix(BASE).partition("?")
    segments = path_segments(path)
    if len(segments) > limits.max_path_segments:
        return "trap_path_segments"
    if has_repeated_segments(segments, limits.max_segment_repeats, limits.max_run_repeats):
        return "trap_repeated_segments"
    if query_param_count(query) > limits.max_query_params:
        return "trap_query_params"
    return None


@settings(deadline=None, max_examples=400)
@given(
    st.lists(st.sampled_from(["a", "b", ""]), max_size=9),
    st.booleans(),
    st.lists(st.sampled_from(["p=1", "q=2", ""]), max_size=6),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(1, 5),
    st.integers(1, 4),
)
def test_the_shortcuts_for_short_paths_and_queries_change_no_answer(
    segments: list[str],
    trailing_slash: bool,
    params: list[str],
    max_segments: int,
    max_repeats: int,
    max_runs: int,
    max_params: int,
) -> None:
    limits = TrapLimits(
        max_path_segments=max_segments * 2,
        max_segment_repeats=max_repeats,
        max_run_repeats=max_runs,
        max_query_params=max_params,
    )
    path = "/" + "/".join(segments) + ("/" if trailing_slash and segments else "")
    url = BASE + path + ("?" + "&".join(params) if params else "")
    assert check_traps(url, limits) == _check_traps_in_full(url, limits)
    # Admission passes where the path starts (it knows the host): the same answer.
    assert check_traps(url, limits, len(BASE)) == _check_traps_in_full(url, limits)
