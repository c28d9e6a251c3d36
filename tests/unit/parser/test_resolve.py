"""The page link resolver must answer exactly as ``canonical_url``: a table, then a differential
property over hrefs built from the pieces that trip canonicalisation up."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parser.resolve import LinkResolver
from schemas.canonical import canonical_url

BASES = [
    "https://www.example.com/blog/2025/some-article",
    "http://x.example/a/b?c=1&utm_source=2",
    "https://x.example/",
    "http://[::1]:8080/p/q",
    "https://EXAMPLE.com:443/a/../b/c?z=1&a=2",
    "http://xn--bcher-kva.example/d/",
    "https://bücher.example/x",
    "https://shop.example/cart;jsessionid=0A1B2C/item?PHPSESSID=f00",
    "not a url",
]

_PIECES = st.sampled_from(
    [
        *("/", "//", "///", "a", "B", ".", "..", "./", "../", "?", "&", "=", "a=1", "b=", "&&"),
        *("utm_source=1", "gclid=x", "UTM_Medium=y", "%2e", "%41", "%zz", "%", ":", "@", "~"),
        *("http://", "https://", "HTTP://", "http:", "ftp://", "mailto:", "javascript:"),
        *("x.example", "EXAMPLE.com", "xn--bcher-kva.example", "bücher.example", "[::1]"),
        *("1.2.3.4", "0x7f.1", "user:pw@", ":80", ":443", ":8080", ":0", ":99999"),
        *("#", "#frag", "\\", " ", "\t", "\n", "é", "\u200b", "-", "_", "!", "$", "'", "(", "*"),
        *("+", ",", ";", "[", "]", "/./", "/../", "index.html", "?page=2", "?q=a b"),
        *(";jsessionid=A1", ";JSessionID=", "jsessionid=x", "phpsessid=1", "sid=0123456789abcdef"),
    ]
)
_HREFS = st.one_of(st.lists(_PIECES, max_size=8).map("".join), st.text(max_size=20))


@pytest.mark.parametrize(
    "href",
    [
        "/about",
        "about/team",
        "?page=2&sort=asc",
        "?utm_source=x",
        "",
        "#top",
        "//cdn.example.net/lib.js",
        "https://Example.COM:443/x?b=2&a=1",
        "http://[::1]:80/",
        "https://bad host/",
        "https://example.com:99999/",
        "../up/./here",
        "mailto:someone@example.com",
        "a:b",
        "/shop;jsessionid=0A1B2C3D?x=1",
        "item;jsessionid=0A1B2C3D",
        "?PHPSESSID=abc&page=2",
    ],
)
@pytest.mark.parametrize("base", BASES)
def test_table(href: str, base: str) -> None:
    assert LinkResolver(base).resolve(href) == canonical_url(href, base)


def test_answers_are_remembered() -> None:
    resolver = LinkResolver(BASES[0])
    assert not resolver.seen("/a")
    first = resolver.resolve("/a")
    assert resolver.seen("/a") and resolver.resolve("/a") == first


@settings(deadline=None, max_examples=500)
@given(hrefs=st.lists(_HREFS, min_size=1, max_size=6), base=st.sampled_from(BASES))
def test_same_answers_as_canonical_url(hrefs: list[str], base: str) -> None:
    # One resolver for several hrefs, as on a page, so its host and query memories are exercised.
    resolver = LinkResolver(base)
    for href in hrefs:
        assert resolver.resolve(href) == canonical_url(href, base), href
