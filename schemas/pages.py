"""`pages`: fetched page bodies, keyed by the requested URL.

Producer: the fetcher. Consumers: the parser group and the storage group, independently. Keyed by
URL (not host) so a giant host's pages spread over every parser and storage instance. The value is
the body envelope of `schemas.serde` (JSON metadata, a newline, then the raw body bytes: no base64),
compressed with zstd by the producer; `max.message.bytes` is 16 MiB and the fetcher caps bodies
below it. A recrawl that finds unchanged content sends a `revisit` page with an empty body, so
storage can record the visit without a copy.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from schemas.base import EpochMillis, InternalModel
from schemas.items import Extraction
from schemas.topic import MIB, TopicSpec

TOPIC = TopicSpec(suffix="pages", key="url", max_message_bytes=16 * MIB, compression="zstd")

MAX_BODY_BYTES = 15 * MIB
"""Bodies are cut here (and `truncated` set), leaving room for metadata under the topic limit."""


def key(url: str) -> str:
    return url


class FetchedPage(InternalModel):
    """Everything about one fetch except the body, which travels beside it in the envelope."""

    crawl_id: str
    url: str
    final_url: str
    lease_id: str
    depth: Annotated[int, Field(ge=0)]
    status: int
    headers: dict[str, str] = Field(default_factory=dict)
    content_type: str | None = None
    body_size: Annotated[int, Field(ge=0)]
    sha256: str
    truncated: bool = False
    fetched_at: EpochMillis
    elapsed_ms: Annotated[int, Field(ge=0)] = 0
    follow_nofollow: bool = False
    revisit: bool = False
    """A recrawl found the content it was told of (a 304, or a body with the same sha256): no body
    travels, `sha256` is the known content's hash, the parser skips the page and storage records a
    WARC revisit. The outcome's `page_sent` stays false, since no ParseReport follows."""
    extract: Extraction | None = Field(default=None, exclude_if=lambda extract: extract is None)
    """The request's selectors, for the parser (`schemas.items`); left out when none."""
    follow_within: str | None = Field(default=None, exclude_if=lambda selector: selector is None)
    """The request's `follow_within`, for the parser; left out when none."""
    redirect_hops: Annotated[int, Field(ge=0)] = Field(default=0, exclude_if=lambda hops: hops == 0)
    """The redirects followed to reach `url`, for the parser: a page's refresh is one more
    (`parser.refresh`). Left out when none."""
    use_feeds: bool = Field(default=False, exclude_if=lambda use: not use)
    """The request's `use_feeds`: the parser discovers the feeds the page announces."""
    find_requisites: bool = Field(default=False, exclude_if=lambda find: not find)
    """The request's `find_requisites`: the parser sends the page's requisites (an HTML page's,
    a stylesheet's) at its own depth (`parser.requisites`)."""
    sign_text: bool = Field(default=False, exclude_if=lambda sign: not sign)
    """The request's `sign_text`: the parser signs the page's main text (`parser.minhash`)."""
