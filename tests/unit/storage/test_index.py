"""The index's two encodings of a URL's first version are the same bytes, and read back the same."""

from __future__ import annotations

import pytest

from schemas.pages import FetchedPage
from storage.index import (
    PageVersion,
    decode_history,
    encode_first_history,
    encode_history,
    version_fields,
    with_new_version,
)
from tests.unit.storage.archive import make_page

PAGES = {
    "plain": make_page("https://example.org/a?b=1", b"<html>hello</html>"),
    "truncated": make_page("https://example.org/big", b"x" * 5000, truncated=True),
    "no content type": make_page("https://example.org/n", b"{}").model_copy(
        update={"content_type": None}
    ),
    "not ascii, quotes and a backslash": make_page(
        'https://example.org/caf\u00e9/\u65e5\u672c?q="a\\b"', b"body", crawl_id="crawl-\u00fc"
    ),
    "a redirect": make_page("https://example.org/from", b"to").model_copy(
        update={"final_url": "https://example.org/to", "status": 203}
    ),
}


@pytest.mark.parametrize("case", sorted(PAGES))
def test_a_first_version_encodes_as_the_models_encode_it(case: str) -> None:
    page: FetchedPage = PAGES[case]
    fields = version_fields(
        page,
        blob=f"blobs/{page.sha256[:2]}/{page.sha256[2:4]}/{page.sha256}.zst",
        warc_file="warc/crawl-1/streamcrawl-1.warc.gz",
        warc_offset=1234,
        warc_length=567,
        warc_record_id="<urn:uuid:6f1b8f5e-3c2a-5f4e-9a57-2a0c0e7d7b11>",
        warc_date="2023-11-14T22:13:20.000Z",
    )
    modelled = with_new_version(None, page, PageVersion(**fields), limit=64)
    fast = encode_first_history(page, fields)
    assert fast == encode_history(modelled)
    assert decode_history(fast) == modelled
