"""Page bytes to text: the order of the rules, hostile labels, and what counts as binary."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parser.decoding import decode_body, is_wide_encoding, looks_binary

CAFE_UTF8 = "<p>Café</p>".encode()
CAFE_LATIN1 = "<p>Café</p>".encode("latin-1")


@pytest.mark.parametrize(
    ("body", "content_type", "encoding", "source", "text"),
    [
        (
            codecs.BOM_UTF8 + CAFE_UTF8,
            "text/html; charset=iso-8859-1",
            "utf-8",
            "bom",
            "<p>Café</p>",
        ),
        (
            codecs.BOM_UTF16_LE + "<p>Café</p>".encode("utf-16-le"),
            "text/html; charset=utf-8",
            "utf-16-le",
            "bom",
            "<p>Café</p>",
        ),
        (
            b'<meta charset="utf-8">' + CAFE_LATIN1,
            "text/html; charset=windows-1252",
            "cp1252",
            "header",
            '<meta charset="utf-8"><p>Café</p>',
        ),
        (
            b'<meta http-equiv="content-type" content="text/html; charset=ISO-8859-1">'
            + CAFE_LATIN1,
            "text/html",
            "cp1252",
            "meta",
            '<meta http-equiv="content-type" content="text/html; charset=ISO-8859-1"><p>Café</p>',
        ),
        (
            b'<meta charset="koi8-r"><p>\xf0\xd2\xc9</p>',
            None,
            "koi8-r",
            "meta",
            '<meta charset="koi8-r"><p>При</p>',
        ),
        (CAFE_UTF8, None, "utf-8", "detected", "<p>Café</p>"),
        (CAFE_LATIN1, "text/html", "cp1252", "detected", "<p>Café</p>"),
        (b"<p>plain ascii</p>", None, "utf-8", "detected", "<p>plain ascii</p>"),
        (b"", None, "utf-8", "detected", ""),
    ],
    ids=[
        "bom-beats-header",
        "utf16-bom",
        "header-beats-meta",
        "meta",
        "meta-koi8",
        "utf8",
        "1252",
        "ascii",
        "empty",
    ],
)
def test_rules_in_order(
    body: bytes, content_type: str | None, encoding: str, source: str, text: str
) -> None:
    decoded = decode_body(body, content_type)
    assert (decoded.encoding, decoded.source, decoded.text) == (encoding, source, text)


@pytest.mark.parametrize(
    "label", ["hex", "base64", "undefined", "utf-7", "rot13", "cp037", "nonsense"]
)
def test_hostile_or_unknown_labels_count_as_no_label(label: str) -> None:
    header = decode_body(CAFE_UTF8, f"text/html; charset={label}")
    meta = decode_body(f'<meta charset="{label}">'.encode() + CAFE_UTF8, "text/html")
    assert (header.encoding, header.source) == ("utf-8", "detected")
    assert (meta.encoding, meta.source) == ("utf-8", "detected")


def test_utf16_label_without_bom_is_little_endian() -> None:
    decoded = decode_body("<p>Hi</p>".encode("utf-16-le"), "text/html; charset=utf-16")
    assert (decoded.encoding, decoded.text) == ("utf-16-le", "<p>Hi</p>")


def test_meta_declaring_utf16_means_utf8() -> None:
    decoded = decode_body(b'<meta charset="utf-16">' + CAFE_UTF8, None)
    assert (decoded.encoding, decoded.source) == ("utf-8", "meta")
    assert decoded.text.endswith("<p>Café</p>")


def test_invalid_bytes_become_replacement_characters() -> None:
    decoded = decode_body(b"<p>ok \xff\xfe \xc3\x28 end</p>", "text/html; charset=utf-8")
    assert decoded.text == "<p>ok \ufffd\ufffd \ufffd( end</p>"


def test_utf8_cut_inside_a_character_is_still_utf8() -> None:
    decoded = decode_body(CAFE_UTF8 + "é".encode()[:1], None)
    assert (decoded.encoding, decoded.text) == ("utf-8", "<p>Café</p>\ufffd")


def test_invalid_utf8_in_the_middle_falls_back_to_1252() -> None:
    decoded = decode_body(b"<p>caf\xe9 and caf\xc3\xa9</p>", None)
    assert (decoded.encoding, decoded.text) == ("cp1252", "<p>café and cafÃ©</p>")


@pytest.mark.parametrize(
    "body",
    [
        b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + bytes(range(256)) * 8,
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00\x01\x02\x03" * 300,
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + b"\x00\x10\x1f\x05" * 300,
    ],
    ids=["pdf", "png", "zip"],
)
def test_binary_bodies_look_binary(body: bytes) -> None:
    assert looks_binary(body)


def test_html_with_a_stray_control_character_is_text() -> None:
    assert not looks_binary(b"<html><body>" + b"text " * 100 + b"\x00\x1b </body></html>")
    assert not looks_binary(b"")


def test_wide_encodings() -> None:
    assert is_wide_encoding("utf-16-le") and is_wide_encoding("utf-32-be")
    assert not is_wide_encoding("utf-8")


_LABELS = st.sampled_from(
    ["utf-8", "utf-16", "utf-32", "utf-16be", "gbk", "shift_jis", "iso-2022-jp", "hex", "bogus"]
)
_CONTENT_TYPES = st.one_of(
    st.none(), st.text(max_size=60), _LABELS.map(lambda label: f"text/html; charset={label}")
)
_BODIES = st.one_of(
    st.binary(max_size=2048),
    st.tuples(
        st.sampled_from([codecs.BOM_UTF8, codecs.BOM_UTF16_BE, b"\xff\xfe\x00\x00"]),
        st.binary(max_size=512),
    ).map(b"".join),
    _LABELS.map(lambda label: f'<meta charset="{label}">'.encode()).flatmap(
        lambda head: st.binary(max_size=512).map(lambda tail: head + tail)
    ),
)


@settings(deadline=None, max_examples=200)
@given(body=_BODIES, content_type=_CONTENT_TYPES)
def test_never_raises(body: bytes, content_type: str | None) -> None:
    decoded = decode_body(body, content_type)
    assert isinstance(decoded.text, str)
    decoded.text.encode("utf-8")  # no lone surrogates either
