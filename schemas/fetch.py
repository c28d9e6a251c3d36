"""`fetch`: leased URLs for the fetchers, keyed by host.

Producer: the frontier, releasing only as many leases per host as politeness allows in flight, so no
host builds a backlog inside this topic. Consumer: the fetcher group; the fetcher owning a host's
partition is that host's only rate owner. A request whose deadline passed is dropped by the fetcher:
the frontier has queued it again. Cleanup: delete.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from schemas.base import EpochMillis, InternalModel
from schemas.items import Extraction
from schemas.topic import TopicSpec

TOPIC = TopicSpec(suffix="fetch", key="host")


def key(host: str) -> str:
    return host


class FetchRequest(InternalModel):
    crawl_id: str
    url: str
    host: str
    depth: Annotated[int, Field(ge=0)]
    lease_id: str
    deadline: EpochMillis
    politeness_delay_ms: Annotated[int, Field(ge=0)] = 0
    respect_robots: bool = True
    content_types: list[str] = Field(default_factory=list)
    redirect_hops: Annotated[int, Field(ge=0)] = 0
    follow_nofollow: bool = False
    """Carried to the FetchedPage so the parser knows whether nofollow links are followed."""
    use_feeds: bool = Field(default=False, exclude_if=lambda use: not use)
    """The crawl's `use_feeds`, carried to the FetchedPage; left out when false."""
    find_requisites: bool = Field(default=False, exclude_if=lambda find: not find)
    """The crawl's `fetch_page_requisites`, carried to the FetchedPage; left out when false."""
    sign_text: bool = Field(default=False, exclude_if=lambda sign: not sign)
    """The crawl's `find_near_duplicates`, carried to the FetchedPage; left out when false."""
    check_only: bool = Field(default=False, exclude_if=lambda check: not check)
    """Only the status is wanted (a link outside the crawl's domains, `check_external`): the body
    is not read and no page is sent. Left out when false."""
    use_cookies: bool = Field(default=False, exclude_if=lambda use: not use)
    """The crawl's `use_cookies`: the fetch sends and keeps the crawl's cookies of the host."""
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    """sha256 hex of the body last fetched: a recrawl that gets the same body is `unchanged`."""
    extract: Extraction | None = Field(default=None, exclude_if=lambda extract: extract is None)
    """The crawl's selectors when this URL's fields are extracted (`schemas.items`); left out of
    the JSON otherwise."""
    follow_within: str | None = Field(default=None, exclude_if=lambda selector: selector is None)
    """The crawl's `follow_within`: the parser discovers only the links inside what it matches."""
    headers: dict[str, str] | None = Field(default=None, exclude_if=lambda headers: headers is None)
    """The crawl's own request headers (`CrawlRequest.headers`); left out when none."""
