"""A fetch's FetchedPage and FetchOutcome written as JSON straight from their fields.

Every fetch produces both messages, and building them as pydantic models (validation) and
serialising those was the largest single cost of a fetch beyond the HTTP exchange: 179k of the
dispatcher's 1.06M instructions per page (callgrind), 39 us against 8 us on a loaded machine
(tests/bench/bench_fetcher_costs.py: "FetchedPage + FetchOutcome built (before)" plus "page
envelope + outcome encoded" against "page + outcome fields written (now)"). The fields come
from typed code that already holds every value in its schema type (the request was validated
when it was decoded, the result is ours), so here they are typed dicts in the schemas' field
order and orjson writes them: the same bytes as `schemas.serde.encode` of the model, which
tests/unit/fetcher/test_wire.py checks over every kind of result, together with the field lists
against the models' (a field added to a schema fails it until it is added here). The rare
messages (robots.txt denials, internal errors, redirect edges) stay models.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

import orjson

from schemas.outcomes import OutcomeKind


class PageFields(TypedDict):
    """`schemas.pages.FetchedPage`, field for field, in its order."""

    v: int
    crawl_id: str
    url: str
    final_url: str
    lease_id: str
    depth: int
    status: int
    headers: dict[str, str]
    content_type: str | None
    body_size: int
    sha256: str
    truncated: bool
    fetched_at: int
    elapsed_ms: int
    follow_nofollow: bool
    revisit: bool
    extract: NotRequired[ExtractionFields]
    """Only when the request carries selectors (the model leaves it out when None)."""
    follow_within: NotRequired[str]
    """Only when the request carries one (the model leaves it out when None)."""
    redirect_hops: NotRequired[int]
    """Only when the request has some (the model leaves out 0)."""
    use_feeds: NotRequired[bool]
    """Only when the request says so (the model leaves out false)."""
    find_requisites: NotRequired[bool]
    """Only when the request says so (the model leaves out false)."""
    sign_text: NotRequired[bool]
    """Only when the request says so (the model leaves out false)."""


class ExtractionFields(TypedDict):
    """`schemas.items.Extraction`, field for field."""

    v: int
    fields: dict[str, str]


class OutcomeFields(TypedDict):
    """`schemas.outcomes.FetchOutcome`, field for field, in its order."""

    v: int
    crawl_id: str
    url: str
    host: str
    lease_id: str
    depth: int
    kind: OutcomeKind
    status: int | None
    redirect_to: str | None
    redirect_hops: int
    error: str | None
    reason: str | None
    truncated: bool
    retry_after_ms: int | None
    page_sent: bool
    sitemaps: list[str]
    etag: str | None
    last_modified: str | None
    content_hash: str | None
    fetched_at: int
    elapsed_ms: int
    content_type: NotRequired[str]
    """Only when the response had one (the model leaves out None)."""
    body_size: NotRequired[int]
    """Only when a body was read (the model leaves out None)."""


def page_envelope(page: PageFields, body: bytes | bytearray) -> bytes:
    """The `schemas.serde.encode_page` envelope of ``page`` and its body (copied once, into the
    envelope); a revisit's body is empty."""
    if page["body_size"] != len(body):
        raise ValueError(f"body_size {page['body_size']} does not match body of {len(body)} bytes")
    return b"".join((orjson.dumps(page), b"\n", body))


def outcome_value(outcome: OutcomeFields) -> bytes:
    """The `schemas.serde.encode` value of ``outcome``."""
    return orjson.dumps(outcome)
