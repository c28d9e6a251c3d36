"""Page extraction beyond the golden files: link types, caps, duplicates, odd documents."""

from __future__ import annotations

import pytest

from parser.extract import (
    CONTEXT_CHARS,
    MAX_ANCHOR_CHARS,
    PageExtract,
    extract_page,
    is_nofollow,
    link_type,
)
from schemas.links import LinkEdge, LinkType

PAGE = "https://www.example.com/dir/page"


def extract(
    html: str, headers: dict[str, str] | None = None, max_links: int = 10_000
) -> PageExtract:
    return extract_page(PAGE, headers or {}, html, discovered_at=1234, max_links=max_links)


@pytest.mark.parametrize(
    ("rel", "internal", "page_nofollow", "expected"),
    [
        ([], True, False, "INTERNAL"),
        ([], False, False, "EXTERNAL"),
        (["nofollow"], True, False, "NOFOLLOW"),
        (["ugc"], False, False, "UGC"),
        (["sponsored"], False, False, "SPONSORED"),
        (["nofollow", "ugc"], False, False, "UGC"),
        (["ugc", "sponsored"], False, False, "SPONSORED"),
        (["nofollow", "ugc", "sponsored"], True, False, "SPONSORED"),
        (["noopener", "noreferrer", "external"], False, False, "EXTERNAL"),
        ([], True, True, "NOFOLLOW"),
        (["ugc"], True, True, "UGC"),
    ],
)
def test_link_type_precedence(
    rel: list[str], internal: bool, page_nofollow: bool, expected: LinkType
) -> None:
    assert link_type(rel, internal, page_nofollow) == expected


def test_is_nofollow_reads_rel_only() -> None:
    def edge(rel: list[str], kind: LinkType) -> LinkEdge:
        return LinkEdge(to_url="https://a.example/", link_type=kind, rel=rel, discovered_at=1)

    assert is_nofollow(edge(["ugc"], "UGC")) and is_nofollow(edge(["sponsored"], "SPONSORED"))
    assert not is_nofollow(edge(["noopener"], "NOFOLLOW"))


def test_one_edge_per_target_with_the_first_anchor_and_a_count() -> None:
    page = extract(
        '<a href="/x">first</a> <a href="/x#frag">second</a> <a href="https://WWW.example.com/x">'
        'third</a> <a href="/y">other</a> <a href="#top">self</a> <a href="">self again</a>'
    )
    assert [(link.edge.to_url, link.edge.anchor_text, link.occurrences) for link in page.links] == [
        ("https://www.example.com/x", "first", 3),
        ("https://www.example.com/y", "other", 1),
        (PAGE, "self", 2),
    ]
    assert page.duplicates == 3
    assert all(link.edge.discovered_at == 1234 for link in page.links)


def test_cap_counts_new_targets_and_still_classifies_known_hrefs() -> None:
    page = extract(
        '<a href="mailto:x@y">m</a><a href="http://[bad">i</a><a href="/a">a</a><a href="/b">b</a>'
        '<a href="/c">c</a><a href="/a">a again</a><a href="mailto:x@y">m again</a>'
        '<a href="http://[bad">i again</a><a href="tel:1">t</a><a href="/d">d</a>',
        max_links=2,
    )
    assert [link.edge.to_url for link in page.links] == [
        "https://www.example.com/a",
        "https://www.example.com/b",
    ]
    # Past the cap, unseen hrefs (/c, tel:, /d) are not even resolved: they count as the cap's.
    assert (page.dropped.cap, page.dropped.scheme, page.dropped.invalid_url) == (3, 2, 2)
    assert page.duplicates == 1


def test_zero_cap_keeps_no_edge() -> None:
    page = extract('<a href="/a">a</a><a href="/b">b</a>', max_links=0)
    assert page.links == [] and page.dropped.cap == 2


def test_head_facts() -> None:
    page = extract(
        "<html lang=' PT-br '><head><title>\n  A   title \n</title><title>Second</title>"
        "<base href='javascript:alert(1)'><base href='/other/'>"
        "<link rel='alternate canonical' href='/canonical?b=1&a=2#x'>"
        "<meta name='robots' content='noindex'></head><body><a href='rel'>r</a></body></html>",
        {"X-Robots-Tag": "nofollow"},
    )
    assert page.title == "A title"
    assert page.language == "pt-br"
    # A base that is no http(s) URL is ignored, and only the first base element counts.
    assert page.base_url == PAGE
    assert page.edges[0].to_url == "https://www.example.com/dir/rel"
    assert page.canonical == "https://www.example.com/canonical?a=2&b=1"
    assert (page.robots.noindex, page.robots.nofollow) == (True, True)


def test_language_falls_back_to_the_header() -> None:
    page = extract("<p>no lang</p>", {"content-language": "de-AT, en"})
    assert page.language == "de-at"
    assert extract("<p>none</p>").language is None


def test_anchor_text_is_capped_and_context_is_bounded() -> None:
    long_anchor = "word " * 400
    before, after = "b" * 10 + " before " * 30, " after " * 30
    page = extract(f"<p>{before}<a href='/long'>{long_anchor}</a>{after}</p>")
    edge = page.edges[0]
    assert len(edge.anchor_text) == MAX_ANCHOR_CHARS
    assert len(edge.context_window) <= 2 * CONTEXT_CHARS + MAX_ANCHOR_CHARS + 2
    assert edge.context_window.startswith("before") and edge.context_window.endswith("after")


def test_context_drops_words_cut_at_the_edges() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda"
    page = extract(f"<p>{text} <a href='/x'>LINK</a> {text}</p>")
    context = page.edges[0].context_window
    before, _, after = context.partition(" LINK ")
    assert text.endswith(before) and text.startswith(after)
    assert before.split()[0] in text.split() and after.split()[-1] in text.split()
    assert 0 < len(before) <= CONTEXT_CHARS and 0 < len(after) <= CONTEXT_CHARS


def test_deeply_nested_markup_does_not_recurse() -> None:
    depth = 2000  # libxml2 drops what lies deeper than about 2048 elements
    html = "<div>" * depth + "<nav><a href='/deep'>deep</a></nav>" + "</div>" * depth
    page = extract(html)
    assert [(edge.to_url, edge.position) for edge in page.edges] == [
        ("https://www.example.com/deep", "NAV")
    ]


@pytest.mark.parametrize(
    "html",
    ["", "   ", "<!-- only a comment -->", "\x00\x00", "<?xml version='1.0'?><a href='/x'>x</a>"],
)
def test_empty_and_odd_documents(html: str) -> None:
    page = extract(html)
    assert page.visible_text_length >= 0
    assert all(edge.to_url.startswith("https://") for edge in page.edges)


def test_lone_surrogates_in_text_are_replaced() -> None:
    page = extract("<a href='/x\ud800'>bad \udfff text</a>")
    assert page.edges[0].to_url == "https://www.example.com/x%EF%BF%BD"
    assert page.edges[0].anchor_text == "bad \ufffd text"


def test_a_page_url_that_is_not_http_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="not an http"):
        extract_page("ftp://example.com/", {}, "<p>x</p>", discovered_at=1)


@pytest.mark.parametrize(
    ("html", "context"),
    [
        ("<p>foo<a href='/x'>bar</a>baz</p>", "foobarbaz"),
        ("<p>foo<a href='/x'> bar </a>baz</p>", "foo bar baz"),
        ("<p>foo <a href='/x'>bar</a>\n baz</p>", "foo bar baz"),
        ("<p>foo</p><a href='/x'>bar</a><p>baz</p>", "foo bar baz"),
        ("<p>foo<a href='/x'><img alt='pic'></a>baz</p>", "foo baz"),
    ],
)
def test_context_keeps_the_spacing_of_the_page(html: str, context: str) -> None:
    assert extract(html).edges[0].context_window == context
