"""`links`: every out-link of one fetch, keyed by the source URL.

Producers: the parser (one PageLinks per fetched page, an empty list included, in numbered parts
when large) and the fetcher's redirects (a REDIRECT edge). Consumers: the link-graph group (forward
index) and its ranker (reads the topic whole). Keyed by from_url so one link-graph instance owns
each source's whole edge set. The edge record is seed document 002's.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.base import EpochMillis, InternalModel
from schemas.topic import MIB, TopicSpec

TOPIC = TopicSpec(suffix="links", key="from_url", max_message_bytes=4 * MIB, compression="zstd")

LinkType = Literal["INTERNAL", "EXTERNAL", "NOFOLLOW", "UGC", "SPONSORED", "REDIRECT"]
LinkPosition = Literal["NAV", "CONTENT", "FOOTER", "SIDEBAR"]
RelFlag = Literal["nofollow", "ugc", "sponsored", "noopener", "noreferrer", "external"]


def key(from_url: str) -> str:
    return from_url


class LinkEdge(InternalModel):
    to_url: str
    anchor_text: str = ""
    context_window: str = ""
    link_type: LinkType
    rel: list[str] = Field(default_factory=list)
    position: LinkPosition = "CONTENT"
    discovered_at: EpochMillis


MAX_TITLE_CHARS = 1024
MINHASH_CHARS = 344
"""`parser.minhash.SIGNATURE_CHARS`: 64 32-bit values in base64."""


class PageMeta(InternalModel):
    """What a fetched page says about itself, sent once with part 0 of its PageLinks."""

    status: int
    content_type: str | None = None
    title: Annotated[str, Field(max_length=MAX_TITLE_CHARS)] | None = None
    canonical: str | None = None
    """The page's `<link rel=canonical>`, canonicalised."""
    language: str | None = None
    noindex: bool = False
    nofollow: bool = False
    """From meta robots or X-Robots-Tag: the page asked crawlers not to follow its links."""
    text_length: Annotated[int, Field(ge=0)] = 0
    text_minhash: Annotated[str, Field(max_length=MINHASH_CHARS)] | None = Field(
        default=None, exclude_if=lambda signature: signature is None
    )
    """The MinHash signature of the page's main text (`parser.minhash`), when its crawl finds
    near duplicates (`find_near_duplicates`) and the text has words enough; left out otherwise."""


class PageLinks(InternalModel):
    crawl_id: str
    from_url: str
    fetched_at: EpochMillis
    edges: list[LinkEdge]
    part: Annotated[int, Field(ge=0)] = 0
    parts: Annotated[int, Field(ge=1)] = 1
    page: PageMeta | None = None
    """Set on part 0 of a fetched page's links (None on REDIRECT edges from the fetcher)."""
