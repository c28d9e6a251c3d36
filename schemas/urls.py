"""`urls`: newly found URLs for the frontier, keyed by their host.

Producers: the frontier (seed URLs of a new crawl, redirect targets) and the parser (links of each
page, grouped by target host: one DiscoveredUrls per host per page, in numbered parts if large),
then one ParseReport per page saying how many DiscoveredUrls messages it sent. Consumer: the
frontier instance owning the host's partition, which admits them (dedup, scope, budget) into the
host's queue. Key: host, co-partitioned with `outcomes` and `scores` so one frontier partition
holds all of a host's state. The ParseReport is keyed by the fetched page's host: the partition
that leased the page counts its reports to know when a crawl is done.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from schemas.base import EpochMillis, InternalModel
from schemas.topic import MIB, TopicSpec

TOPIC = TopicSpec(suffix="urls", key="host", max_message_bytes=4 * MIB, co_partitioned=True)


def key(host: str) -> str:
    return host


class DiscoveredUrl(InternalModel):
    url: str
    priority: float | None = None
    """A hint from the source (a sitemap's <priority>), 0.0 to 1.0."""
    modified_at: EpochMillis | None = Field(default=None, exclude_if=lambda time: time is None)
    """When the source says the page last changed (a sitemap's <lastmod>): a recrawling crawl
    fetches again at once a page last fetched before that. Left out of the JSON when absent: a
    page's links carry none, and every one would pay its bytes on `urls`."""


class DiscoveredUrls(InternalModel):
    """URLs of one crawl, one host and one depth, found on one source page (or seeded)."""

    kind: Literal["discovered_urls"] = "discovered_urls"
    crawl_id: str
    host: str
    depth: Annotated[int, Field(ge=0)]
    source_url: str | None = None
    """None for seeds; the page that linked to these URLs, or the URL that redirected here."""
    redirect_hops: Annotated[int, Field(ge=0)] = 0
    discovered_at: EpochMillis
    urls: list[DiscoveredUrl]
    part: Annotated[int, Field(ge=0)] = 0
    parts: Annotated[int, Field(ge=1)] = 1
    origin: str | None = None
    """What announced this message, so the receiving partition counts it once however often it
    is delivered: the fetched page's lease id (the parser, with ``/refresh`` or ``/requisites``
    for those), ``seeds``, or an outcome's lease id with ``/redirect`` or ``/sitemaps`` (the
    frontier). With host and part it names the message."""
    requisites: bool = Field(default=False, exclude_if=lambda requisites: not requisites)
    """The URLs are the source page's requisites (`parser.requisites`): admitted from any site,
    the include pattern and scope score not applied (`frontier.scope`). Left out when false."""


class ParseReport(InternalModel):
    """How many DiscoveredUrls messages (parts included) the parser sent for one fetched page."""

    kind: Literal["parse_report"] = "parse_report"
    crawl_id: str
    page_url: str
    lease_id: str
    discovered_messages: Annotated[int, Field(ge=0)]
    redirect_messages: Annotated[int, Field(ge=0)] = Field(
        default=0, exclude_if=lambda count: count == 0
    )
    """How many of ``discovered_messages`` carry the page's own depth, not one more: its refresh
    target, a redirect (`parser.refresh`), and its requisites (`parser.requisites`), which are
    one more hop of the page as a redirect is. Left out when none."""


UrlsMessage = Annotated[DiscoveredUrls | ParseReport, Field(discriminator="kind")]
URLS_MESSAGE: TypeAdapter[DiscoveredUrls | ParseReport] = TypeAdapter(UrlsMessage)
