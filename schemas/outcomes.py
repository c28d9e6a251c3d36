"""`outcomes`: how each lease ended, for the frontier, keyed by the requested URL's host.

Producer: the fetcher (after the page, if any, is delivered to `pages`). Consumer: the frontier
partition holding that host (co-partitioned with `urls`), which accepts one terminal outcome per
lease id: done, redirect (admit the target), retry with backoff, or dead. Small by design: the body
travels on `pages`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.base import EpochMillis, InternalModel
from schemas.topic import TopicSpec

TOPIC = TopicSpec(suffix="outcomes", key="host", co_partitioned=True)

OutcomeKind = Literal["done", "redirect", "unchanged", "retryable", "permanent", "robots_denied"]


MAX_STATUS = 1000
OUTCOME_COUNTER = "outcome_"
"""Progress counters ``outcome_<label>`` (`frontier.outcomes.relabel`) count a crawl's URLs by
their latest outcome's :func:`outcome_label`."""


def key(host: str) -> str:
    return host


class FetchOutcome(InternalModel):
    crawl_id: str
    url: str
    host: str
    lease_id: str
    depth: Annotated[int, Field(ge=0)] = 0
    kind: OutcomeKind
    status: int | None = None
    redirect_to: str | None = None
    redirect_hops: Annotated[int, Field(ge=0)] = 0
    """The redirects followed to reach ``url`` (the request's), not counting this one: the frontier
    adds one when it follows ``redirect_to``."""
    error: str | None = None
    reason: str | None = None
    """A stable label of why a fetch failed (`fetcher.errors.Reason`), for counters."""
    truncated: bool = False
    retry_after_ms: Annotated[int, Field(ge=0)] | None = None
    page_sent: bool = False
    """A FetchedPage went to `pages`, so a ParseReport will follow."""
    sitemaps: list[str] = Field(default_factory=list)
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    fetched_at: EpochMillis
    elapsed_ms: Annotated[int, Field(ge=0)] = 0
    content_type: str | None = Field(default=None, exclude_if=lambda media: media is None)
    """The response's media type, when it had one (`streamcrawl log`'s mimetype column)."""
    body_size: Annotated[int, Field(ge=0)] | None = Field(
        default=None, exclude_if=lambda size: size is None
    )
    """Body bytes kept (decoded, after any cut), when a body was read."""


def outcome_label(outcome: FetchOutcome) -> str:
    """How a fetch ended, in a word users read in a crawl's summary: the HTTP status, or the
    outcome's kind when there was none (a connection error is ``retryable``) or it had more than
    the three digits HTTP allows."""
    if outcome.status is not None and 0 < outcome.status < MAX_STATUS:
        return str(outcome.status)
    return outcome.kind
