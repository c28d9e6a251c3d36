"""`fetcher.urls` gives exactly `canonical_url`'s answers, the host's part cached: over the
canonical module's own generated URLs, over URLs with plain starts (the cached path), and over
the spellings where a start only looks plain."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fetcher.urls import fetch_url, origin
from schemas.canonical import MAX_URL_LENGTH, canonical_url
from tests.unit.test_canonical import _PATHS, _PORTS, _QUERIES, _URLISH

_PLAIN_HOSTS = st.one_of(
    st.sampled_from(
        [
            "example.com",
            "EXAMPLE.com.",
            "127.0.0.1",
            "127.1",
            "2130706433",
            "0x7f.1",
            "256.1.1.1",
            "a..b",
            "-a.b",
            "x" * 64 + ".com",
            "localhost",
        ]
    ),
    st.from_regex(r"[A-Za-z0-9.\-]{1,20}", fullmatch=True),
)
_PLAIN_URLS = st.builds(
    lambda scheme, host, port, tail: f"{scheme}://{host}{port}{tail}",
    st.sampled_from(["http", "https", "HTTP", "hTtPs"]),
    _PLAIN_HOSTS,
    _PORTS,
    st.one_of(
        st.builds(lambda path, query: f"/{path}{query}", _PATHS, _QUERIES),
        st.from_regex(r"(/[A-Za-z0-9._~!$&'()*+,;=:@%\-]{0,8}){1,4}", fullmatch=True),
        st.sampled_from(["", "?", "?b=2&a=1", "#frag", "?utm_source=x", "/\t/x ", "/%7e/../a"]),
    ),
)


def _assert_same_origin(url: str) -> None:
    """For an URL that has a canonical form, its origin (for others, such as one too long, the
    origin of the start is all robots.txt needs, and the fetch reports the URL itself)."""
    canonical = canonical_url(url)
    if canonical is not None:
        assert origin(url) == "/".join(canonical.split("/")[:3])


@settings(deadline=None, max_examples=400)
@given(url=st.one_of(_PLAIN_URLS, _URLISH))
def test_the_same_answer_as_canonical_url(url: str) -> None:
    assert fetch_url(url) == canonical_url(url)
    _assert_same_origin(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com",
        "http://example.com/",
        "http://example.com/a/b.html",
        "http://example.com/.well-known/x",
        "http://example.com/a/..",
        "http://example.com/a/%7e",
        "http://example.com/a;p=1:@!$&'()*+,=~",
        "http://example.com?b=1&a=2&utm_source=x#top",
        "https://example.com:443/a/./b/../c",
        "http://127.1:80/",
        "http://user@127.0.0.1/",
        "http://example.com\\evil.com/",
        "http://example.com\t/x",
        "http://exa\tmple.com/x",
        "http://[::ffff:127.0.0.1]/",
        "http://example.com:99999/",
        "http://ex%41mple.com/",
        "ftp://example.com/",
        " http://example.com/ ",
        "http://example.com/" + "a" * (MAX_URL_LENGTH - 20),
        "http://" + "a" * 60 + ".example.com/" + "b" * (MAX_URL_LENGTH - 85),
        # Too long with its host, not with the stand-in's.
        "http://" + "a" * 60 + ".example.com/" + "b" * (MAX_URL_LENGTH - 75),
    ],
)
def test_starts_that_only_look_plain(url: str) -> None:
    assert fetch_url(url) == canonical_url(url)
    _assert_same_origin(url)
