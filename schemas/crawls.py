"""`crawls`: the compacted table of every crawl's configuration and status.

Producer: only the frontier instance that owns the crawl id's `seeds` partition. Consumers: every
frontier instance reads it whole, outside any group (a table); every fetcher too, for statuses
(a crawl no longer active stops counting for politeness); the link graph for seeds; the API and
CLI for status. Key: crawl id, so compaction keeps each crawl's latest state.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, field_validator

from schemas.base import SCHEMA_VERSION, EpochMillis, InternalModel
from schemas.seeds import CrawlRequest
from schemas.topic import MIB, TopicSpec

TOPIC = TopicSpec(suffix="crawls", key="crawl_id", cleanup="compact", max_message_bytes=4 * MIB)

CrawlStatus = Literal["active", "paused", "cancelled", "done"]
EndedBy = Literal["max_duration"]
"""A limit that ended a crawl before its frontier emptied, its queued URLs dropped."""


def key(crawl_id: str) -> str:
    return crawl_id


class StoredCrawlRequest(CrawlRequest):
    """A CrawlRequest as services store and pass it on: validated once on `seeds`, then read
    leniently, so an older frontier reads a newer request's state instead of rejecting it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    v: Annotated[int, Field(ge=1)] = SCHEMA_VERSION


class CrawlState(InternalModel):
    crawl_id: str
    request: StoredCrawlRequest
    status: CrawlStatus = "active"
    created_at: EpochMillis
    updated_at: EpochMillis
    owner_partition: int
    ended_by: EndedBy | None = None
    """Set when a limit, not an empty frontier, made the crawl done."""

    @field_validator("request", mode="before")
    @classmethod
    def _accept_a_validated_request(cls, value: object) -> object:
        if isinstance(value, CrawlRequest) and not isinstance(value, StoredCrawlRequest):
            return value.model_dump()
        return value
