"""Page bytes to text: which encoding a page is in, decided the way a browser decides it.

The order is the HTML standard's (and w3lib's ``html_to_unicode``):

1. a byte order mark (UTF-8, UTF-16 and, as w3lib reads them, UTF-32), which is stripped;
2. the ``charset`` of the Content-Type header;
3. a ``<meta charset>`` / ``<meta http-equiv=Content-Type>`` or XML declaration in the first 4 KiB;
4. detection: the body is UTF-8 if it decodes as strict UTF-8 (a multi-byte character cut by the
   fetcher's body limit still counts), and windows-1252 otherwise, the WHATWG fallback for
   unlabelled documents. No statistical detector: none is a dependency, and UTF-8-or-1252 is right
   for the vast majority of unlabelled pages while staying deterministic.

Labels are resolved with w3lib (which applies the WHATWG substitutions: latin-1 and ascii become
windows-1252, gbk becomes gb18030, and so on), then only encodings of the WHATWG Encoding Standard
are accepted. Anything else (``hex``, ``base64``, ``undefined``, EBCDIC, ``utf-7``, the
"replacement" encodings iso-2022-kr and hz) is treated as no label at all, as browsers do, so a
hostile header can neither make the decoder raise nor smuggle markup past it. Following WHATWG,
the label ``utf-16`` without a BOM means UTF-16LE (w3lib guesses BE), and a ``<meta>`` that
declares UTF-16 or UTF-32 means UTF-8: a document whose markup was readable as ASCII is not UTF-16.

Decoding replaces undecodable bytes with U+FFFD and never raises. :func:`looks_binary` is the
separate judgement "this is not text at all" (a PDF or image served as text/html), after the
WHATWG MIME sniffing rule for binary data bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from w3lib.encoding import (
    html_body_declared_encoding,
    http_content_type_encoding,
    read_bom,
    to_unicode,
)

EncodingSource = Literal["bom", "header", "meta", "detected"]

# Python codec names (as ``codecs.lookup(...).name`` spells them) of the WHATWG encodings.
_WHATWG_CODECS = frozenset(
    {
        "utf-8",
        "utf-16-be",
        "utf-16-le",
        "utf-32-be",
        "utf-32-le",
        "cp866",
        *(f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)),
        "koi8-r",
        "koi8-u",
        "mac-roman",
        "mac-cyrillic",
        "cp874",
        *(f"cp125{n}" for n in range(9)),
        "gb18030",
        "big5hkscs",
        "euc_jp",
        "iso2022_jp",
        "cp932",
        "cp949",
    }
)
_UNICODE_WITHOUT_ORDER = {"utf-16": "utf-16-le", "utf-32": "utf-32-le"}
_WIDE_ENCODINGS = frozenset({"utf-16-be", "utf-16-le", "utf-32-be", "utf-32-le"})

_SNIFF_BYTES = 1445
"""How much of a body the WHATWG sniffing rules look at."""
_BINARY_DATA_BYTES = bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)])
_TEXT_BYTES = bytes(byte for byte in range(256) if byte not in _BINARY_DATA_BYTES)
_BINARY_TOLERANCE = 64
"""A body is binary when more than 1/64 of its sniffed bytes are binary data bytes: real HTML with
a stray control character from a broken CMS is still parsed."""


@dataclass(frozen=True, slots=True)
class DecodedBody:
    """A body as text, the codec that decoded it and which rule chose that codec."""

    text: str
    encoding: str
    source: EncodingSource


def decode_body(body: bytes, content_type: str | None) -> DecodedBody:
    """Decode ``body`` by BOM, header charset, in-document declaration, then detection.

    ``content_type`` is the Content-Type header value (parameters included), or None.
    """
    bom_encoding, bom = read_bom(body)
    if bom_encoding is not None and bom is not None:
        return DecodedBody(to_unicode(body[len(bom) :], bom_encoding), bom_encoding, "bom")
    encoding = _whatwg_codec(http_content_type_encoding(content_type))
    if encoding is not None:
        return DecodedBody(to_unicode(body, encoding), encoding, "header")
    encoding = _whatwg_codec(html_body_declared_encoding(body))
    if encoding is not None:
        if encoding in _WIDE_ENCODINGS:
            encoding = "utf-8"
        return DecodedBody(to_unicode(body, encoding), encoding, "meta")
    return _detect(body)


def looks_binary(body: bytes) -> bool:
    """True when the start of ``body`` is not text in an ASCII-compatible encoding.

    Meant for bodies without a UTF-16/32 BOM or label, whose NUL bytes are expected.
    """
    head = body[:_SNIFF_BYTES]
    binary_bytes = len(head.translate(None, _TEXT_BYTES))
    return binary_bytes * _BINARY_TOLERANCE > len(head)


def is_wide_encoding(encoding: str) -> bool:
    """UTF-16 and UTF-32 text is full of NUL bytes; :func:`looks_binary` does not apply to it."""
    return encoding in _WIDE_ENCODINGS


def _whatwg_codec(codec: str | None) -> str | None:
    """A resolved codec name if it is a WHATWG encoding, else None (treated as no label)."""
    if codec is None:
        return None
    codec = _UNICODE_WITHOUT_ORDER.get(codec, codec)
    return codec if codec in _WHATWG_CODECS else None


def _detect(body: bytes) -> DecodedBody:
    try:
        return DecodedBody(body.decode("utf-8"), "utf-8", "detected")
    except UnicodeDecodeError as error:
        # Only an incomplete character at the very end (the fetcher cut the body) is forgiven.
        if error.reason == "unexpected end of data" and error.end == len(body):
            return DecodedBody(to_unicode(body, "utf-8"), "utf-8", "detected")
    return DecodedBody(to_unicode(body, "cp1252"), "cp1252", "detected")
