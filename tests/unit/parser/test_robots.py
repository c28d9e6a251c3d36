"""Robots meta tags and X-Robots-Tag headers."""

from __future__ import annotations

import pytest

from parser.robots import RobotsDirectives, meta_robots, x_robots_tag

NOTHING = RobotsDirectives()
NOINDEX = RobotsDirectives(noindex=True)
NOFOLLOW = RobotsDirectives(nofollow=True)
BOTH = RobotsDirectives(noindex=True, nofollow=True)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", NOTHING),
        ("index, follow", NOTHING),
        ("all", NOTHING),
        ("noindex", NOINDEX),
        ("NoFollow", NOFOLLOW),
        ("noindex,nofollow", BOTH),
        ("noindex nofollow", BOTH),
        (" none ", BOTH),
        ("noarchive, max-snippet:20", NOTHING),
        ("nofollowing", NOTHING),
    ],
)
def test_meta_robots(content: str, expected: RobotsDirectives) -> None:
    assert meta_robots(content) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("nofollow", NOFOLLOW),
        ("noindex, nofollow", BOTH),
        ("none", BOTH),
        ("unavailable_after: 25 Jun 2010 15:00:00 PST, nofollow", NOFOLLOW),
        ("max-snippet: 20, noindex", NOINDEX),
        ("otherbot: noindex, nofollow", NOTHING),
        ("otherbot: noindex, streamcrawl: nofollow", NOFOLLOW),
        ("StreamCrawl: noindex", NOINDEX),
        ("nofollow, otherbot: noindex", NOFOLLOW),
        ("", NOTHING),
    ],
)
def test_x_robots_tag_scopes_directives_to_user_agents(
    value: str, expected: RobotsDirectives
) -> None:
    assert x_robots_tag(value, frozenset({"robots", "streamcrawl"})) == expected


def test_directives_merge_by_restriction() -> None:
    assert NOINDEX.merge(NOFOLLOW) == BOTH
    assert NOTHING.merge(NOTHING) == NOTHING
