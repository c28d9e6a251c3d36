"""The fetcher hands `encode_page` its body buffer as it is: a bytearray or a view of one gives the
same envelope, byte for byte, as bytes would, and a wrong size is still refused."""

from __future__ import annotations

import hashlib

import pytest

from schemas.pages import FetchedPage
from schemas.serde import decode_page, encode_page

BODY = bytes(range(256)) * 40 + b"\n\r\n"


def _page(body: bytes) -> FetchedPage:
    return FetchedPage(
        crawl_id="crawl",
        url="https://example.com/a",
        final_url="https://example.com/a",
        lease_id="lease",
        depth=0,
        status=200,
        body_size=len(body),
        sha256=hashlib.sha256(body).hexdigest(),
        fetched_at=1_700_000_000_000,
    )


@pytest.mark.parametrize("buffer", [bytearray, memoryview], ids=["bytearray", "memoryview"])
def test_a_buffer_encodes_like_bytes(buffer: type) -> None:
    page = _page(BODY)
    envelope = encode_page(page, buffer(bytearray(BODY)))
    assert envelope == encode_page(page, BODY)
    assert decode_page(envelope) == (page, BODY)


def test_a_view_of_part_of_a_buffer() -> None:
    body = bytearray(BODY + b"not sent")
    page = _page(BODY)
    assert decode_page(encode_page(page, memoryview(body)[: len(BODY)])) == (page, BODY)
    with pytest.raises(ValueError, match="does not match"):
        encode_page(page, memoryview(body))
