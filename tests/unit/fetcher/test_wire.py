"""`fetcher.wire` writes the same bytes as pydantic would for the model of the same fields, for
every kind of result, and its field lists are the schemas' (a field added to a schema fails here
until the fetcher writes it)."""

from __future__ import annotations

import hashlib
from typing import get_type_hints

import pytest

from fetcher.errors import Reason, permanent, retryable
from fetcher.results import FetchResult
from fetcher.wire import OutcomeFields, PageFields, outcome_value, page_envelope
from schemas.fetch import FetchRequest
from schemas.items import Extraction
from schemas.outcomes import FetchOutcome
from schemas.pages import FetchedPage
from schemas.serde import decode, decode_page, encode, encode_page

BODY = bytearray(b"<html>caf\xc3\xa9 \x00\x01\n\r\n" + bytes(range(256)))
SHA = hashlib.sha256(BODY).hexdigest()
FETCHED_AT = 1_796_000_000_123
HEADERS = {
    "content-type": "text/html; charset=utf-8",
    "x-odd": 'quote " backslash \\ tab \t control \x01\x1f del \x7f',
    "x-latin-1": "caf\xe9 \xff",
    "location": "https://example.com/ünïcode/☃?q=\u2028",
}


def _request(**update: object) -> FetchRequest:
    request = FetchRequest(
        crawl_id="crawl-1",
        url="https://example.com/a?b=1",
        host="example.com",
        depth=3,
        lease_id="lease-7",
        deadline=FETCHED_AT + 60_000,
        redirect_hops=2,
        follow_nofollow=True,
        content_hash="ab" * 32,
    )
    return request.model_copy(update=update)


def _result(kind: str, **fields: object) -> FetchResult:
    return FetchResult(
        url="https://example.com/a?b=1",
        kind=kind,  # type: ignore[arg-type]
        fetched_at_ms=FETCHED_AT,
        elapsed_s=0.0125,
        **fields,  # type: ignore[arg-type]
    )


RESULTS = {
    "done": _result(
        "done",
        status=200,
        headers=HEADERS,
        content_type="text/html",
        body=BODY,
        sha256=SHA,
        wire_bytes=len(BODY),
        etag='W/"e"',
        last_modified="Tue, 14 Nov 2023 22:13:20 GMT",
    ),
    "done, truncated, no content type": _result(
        "done", status=203, body=BODY, sha256=SHA, truncated=True, wire_bytes=99
    ),
    "unchanged by hash": _result("unchanged", status=200, headers=HEADERS, sha256="ab" * 32),
    "304": _result("unchanged", status=304, etag='"v1"'),
    "redirect": _result("redirect", status=301, redirect_to="https://example.com/b"),
    "429 with Retry-After": _result(
        "retryable",
        status=429,
        failure=retryable(Reason.HTTP_STATUS, "status 429", retry_after_s=1.2345),
    ),
    "no response": _result("retryable", failure=retryable(Reason.CONNECTION_ERROR, "refused ☃")),
    "too large": _result("permanent", status=200, failure=permanent(Reason.TOO_LARGE, "big")),
}


@pytest.mark.parametrize("name", list(RESULTS))
@pytest.mark.parametrize("depth", [0, 3])
def test_the_outcome_is_written_as_pydantic_writes_it(name: str, depth: int) -> None:
    result, request = RESULTS[name], _request(depth=depth)
    sitemaps = ["https://example.com/sitemap.xml"] if depth == 0 else []
    for page_sent in (False, True):
        fields = result.outcome_fields(request, page_sent=page_sent, sitemaps=sitemaps)
        model = result.outcome(request, page_sent=page_sent, sitemaps=sitemaps)
        assert outcome_value(fields) == encode(model)
        assert decode(FetchOutcome, outcome_value(fields)) == model


EXTRACTION = Extraction(fields={"title": "h1::text", "price": "xpath://span[@id='p']/text()"})


@pytest.mark.parametrize("name", list(RESULTS))
@pytest.mark.parametrize(("extract", "follow_within"), [(None, None), (EXTRACTION, ".products")])
def test_the_page_envelope_is_written_as_pydantic_writes_it(
    name: str, extract: Extraction | None, follow_within: str | None
) -> None:
    result, request = RESULTS[name], _request(extract=extract, follow_within=follow_within)
    fields, model = result.page_fields(request), result.page(request)
    if model is None:
        assert fields is None
        return
    assert fields is not None
    body = b"" if model.revisit else result.body
    envelope = page_envelope(fields, body)
    assert envelope == encode_page(model, body)
    assert decode_page(envelope) == (model, bytes(body))


def test_a_page_whose_body_is_not_its_size_is_refused() -> None:
    fields = RESULTS["done"].page_fields(_request())
    assert fields is not None
    with pytest.raises(ValueError, match="does not match"):
        page_envelope(fields, BODY + b"more")


@pytest.mark.parametrize(
    ("fields", "model"), [(PageFields, FetchedPage), (OutcomeFields, FetchOutcome)]
)
def test_the_fields_are_the_schemas_in_their_order(fields: type, model: type) -> None:
    assert list(get_type_hints(fields)) == list(model.model_fields)
