"""Crawler-trap guards: pure checks on a canonical URL's shape (DESIGN.md section 3, step 2).

Calendars, session ids in paths, relative links that stack a directory onto itself
(``/a/b/a/b/a/b``) and faceted search pages generate endless distinct URLs that pass every scope
rule. These checks refuse such URLs by shape alone, before they cost a queue entry. They run after
the scope rules of seed document 000 (see `frontier.scope`) and each failure has a stable reason
string for counters.

The rules, with :class:`TrapLimits` defaults:

1. URL length over ``max_url_length`` (2048, the longest URL old browsers and many servers accept).
2. More than ``max_path_segments`` path segments (32); empty segments count, a trailing slash
   does not.
3. Repeated segments: one non-empty segment occurring more than ``max_segment_repeats`` times (3)
   anywhere in the path, or a run of two or more segments repeated back to back more than
   ``max_run_repeats`` times (2), so ``/a/b/a/b`` passes and ``/a/b/a/b/a/b`` does not.
4. More than ``max_query_params`` query parameters (32).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

TrapReason = Literal[
    "trap_url_length", "trap_path_segments", "trap_repeated_segments", "trap_query_params"
]


@dataclass(frozen=True, slots=True)
class TrapLimits:
    """How far a URL may go before it counts as a trap; see the module docstring."""

    max_url_length: int = 2048
    max_path_segments: int = 32
    max_segment_repeats: int = 3
    max_run_repeats: int = 2
    max_query_params: int = 32
    repeats_from: int = field(init=False, repr=False, compare=False)
    """Segments a path needs before it can break a repeat rule (see `check_traps`)."""

    def __post_init__(self) -> None:
        if min(self.max_url_length, self.max_path_segments, self.max_query_params) < 1:
            raise ValueError("trap limits on length, segments and parameters must be at least 1")
        if self.max_segment_repeats < 1 or self.max_run_repeats < 1:
            raise ValueError("repeat limits must be at least 1")
        # A segment seen more than max_segment_repeats times needs more segments than that, and
        # a run of two or more repeated more than max_run_repeats times twice as many.
        floor = min(self.max_segment_repeats, 2 * self.max_run_repeats + 1)
        object.__setattr__(self, "repeats_from", floor)


DEFAULT_TRAP_LIMITS = TrapLimits()


def check_traps(
    canonical_url: str, limits: TrapLimits = DEFAULT_TRAP_LIMITS, path_start: int = -1
) -> TrapReason | None:
    """The first trap rule ``canonical_url`` breaks, in the module docstring's order, or None.

    ``path_start``, when the caller knows it, is the index of the path's first "/" in a canonical
    URL (admission does: every URL of a message starts with ``scheme://host/``), which spares the
    search for it."""
    if len(canonical_url) > limits.max_url_length:
        return "trap_url_length"
    if path_start < 0:
        path, query = path_and_query(canonical_url)
    else:
        mark = canonical_url.find("?", path_start)
        path = canonical_url[path_start:] if mark < 0 else canonical_url[path_start:mark]
        query = "" if mark < 0 else canonical_url[mark + 1 :]
    # len(path_segments(path)) without the list: a trailing slash ends no segment.
    count = path.count("/") - path.endswith("/")
    if count > limits.max_path_segments:
        return "trap_path_segments"
    # Most URLs are too short to break a repeat rule, and skip the segment list.
    if count > limits.repeats_from:
        # All pieces distinct (the empty ones before and after the slashes included): no segment
        # repeats, the common case, decided without the segment list.
        pieces = path.split("/")
        if len(set(pieces)) != len(pieces) and has_repeated_segments(
            path_segments(path), limits.max_segment_repeats, limits.max_run_repeats
        ):
            return "trap_repeated_segments"
    # Each parameter but the first follows an "&": fewer "&" than the limit is within it.
    if query.count("&") >= limits.max_query_params and (
        query_param_count(query) > limits.max_query_params
    ):
        return "trap_query_params"
    return None


def path_and_query(url: str) -> tuple[str, str]:
    """The path and query of an absolute URL; a canonical one (``scheme://authority/path?query``,
    no fragment) by string search, anything else through `urlsplit`."""
    start = url.find("://")
    if start < 0 or "#" in url:
        parts = urlsplit(url)
        return parts.path, parts.query
    slash = url.find("/", start + 3)
    mark = url.find("?", start + 3)
    if slash < 0 or 0 <= mark < slash:
        parts = urlsplit(url)
        return parts.path, parts.query
    if mark < 0:
        return url[slash:], ""
    return url[slash:mark], url[mark + 1 :]


def path_segments(path: str) -> list[str]:
    """The segments of an absolute path; ``/a//b/`` has three: ``a``, ``""`` and ``b``."""
    segments = path.split("/")[1:]
    if segments and not segments[-1]:
        segments.pop()
    return segments


def has_repeated_segments(
    segments: list[str], max_segment_repeats: int, max_run_repeats: int
) -> bool:
    """True when a segment occurs too often or a run of segments repeats back to back too often."""
    if len(set(segments)) == len(segments):
        return False  # all distinct, empty ones included: the common case, without a new list
    named = [segment for segment in segments if segment]
    if len(set(named)) == len(named):
        return False  # no segment occurs twice, so none and no run repeats: most URLs
    counts: dict[str, int] = {}
    for segment in named:
        counts[segment] = counts.get(segment, 0) + 1
        if counts[segment] > max_segment_repeats:
            return True
    return _longest_run_repeat(named) > max_run_repeats


def query_param_count(query: str) -> int:
    """Non-empty ``&``-separated parameters (canonical URLs already dropped the empty ones)."""
    return sum(1 for param in query.split("&") if param) if query else 0


def _longest_run_repeat(segments: list[str]) -> int:
    """The most times any run of two or more segments occurs back to back (1 when none repeats).

    Quadratic in the segment count, which the segment-count rule bounds before this runs.
    """
    best = 1
    total = len(segments)
    for run in range(2, total // 2 + 1):
        for start in range(total - 2 * run + 1):
            repeats = 1
            block = segments[start : start + run]
            while segments[start + repeats * run : start + (repeats + 1) * run] == block:
                repeats += 1
            best = max(best, repeats)
    return best
