"""The metadata index: URL -> its history, one RocksDB table of the storage's state partitions.

Keyed by the requested URL (the `pages` key, so partition p of `pages` owns it). A history is a
list of versions, oldest first: a version is one distinct content (and status) of the page, with
when it was first and last fetched, its blob and where its response record is in the WARC files.
A fetch whose body hashes to the latest version's content (same status) is *unchanged*: it only
moves that version's `last_fetched_at` and bumps `fetches` (its revisit record's location is kept
as `last_revisit`); anything else appends a version. The last fetches' identities (fetch time and
lease id) are kept too, so a redelivered page is recognised and changes nothing.

The table goes through the kernel's per-partition state, so every change reaches the storage
changelog before the page's offset is committed and a restarted or rebalanced instance restores
exactly the committed index.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, TypedDict

import orjson
from pydantic import BaseModel, ConfigDict, Field

from schemas.pages import FetchedPage

TABLE = "pages"
RECENT_FETCHES = 16


class Change(Enum):
    NEW = "new"
    CHANGED = "changed"
    UNCHANGED = "unchanged"
    REDELIVERED = "redelivered"
    UNMATCHED_REVISIT = "unmatched_revisit"
    """A bodiless revisit of content this index does not hold as the URL's latest version."""


class RecordRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    warc_file: str
    warc_offset: int
    warc_length: int
    record_id: str


class PageVersion(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    fetched_at: int
    """When this content was first fetched."""
    last_fetched_at: int
    fetches: Annotated[int, Field(ge=1)] = 1
    status: int
    content_hash: str
    content_type: str | None = None
    body_size: int
    truncated: bool = False
    crawl_id: str
    final_url: str
    blob: str
    """Relative to `storage.root`."""
    warc_file: str
    """Relative to `storage.root`: the file holding the response record."""
    warc_offset: int
    warc_length: int
    warc_record_id: str
    warc_date: str
    last_revisit: RecordRef | None = None


class PageHistory(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    v: int = 1
    url: str
    versions: list[PageVersion]
    recent_fetches: list[str] = Field(default_factory=list)

    @property
    def latest(self) -> PageVersion:
        return self.versions[-1]


def fetch_identity(page: FetchedPage) -> str:
    return f"{page.fetched_at}:{page.lease_id}"


def classify(history: PageHistory | None, page: FetchedPage) -> Change:
    """What this fetch is to the index: pure, so a redelivery gets the same answer."""
    if history is None or not history.versions:
        return Change.UNMATCHED_REVISIT if page.revisit else Change.NEW
    if fetch_identity(page) in history.recent_fetches:
        return Change.REDELIVERED
    latest = history.latest
    if page.revisit:  # a 304's status differs from the stored 200; the hash is what counts
        same = latest.content_hash == page.sha256
        return Change.UNCHANGED if same else Change.UNMATCHED_REVISIT
    if latest.content_hash == page.sha256 and latest.status == page.status:
        return Change.UNCHANGED
    return Change.CHANGED


def _recent(history: PageHistory | None, page: FetchedPage) -> list[str]:
    previous = history.recent_fetches if history is not None else []
    return [*previous, fetch_identity(page)][-RECENT_FETCHES:]


def with_new_version(
    history: PageHistory | None, page: FetchedPage, version: PageVersion, limit: int
) -> PageHistory:
    versions = [*(history.versions if history is not None else []), version][-limit:]
    return PageHistory(url=page.url, versions=versions, recent_fetches=_recent(history, page))


def with_revisit(history: PageHistory, page: FetchedPage, revisit: RecordRef) -> PageHistory:
    latest = history.latest
    moved = latest.model_copy(
        update={
            "last_fetched_at": max(latest.last_fetched_at, page.fetched_at),
            "fetches": latest.fetches + 1,
            "last_revisit": revisit,
        }
    )
    return PageHistory(
        url=history.url,
        versions=[*history.versions[:-1], moved],
        recent_fetches=_recent(history, page),
    )


def encode_history(history: PageHistory) -> bytes:
    return history.__pydantic_serializer__.to_json(history)


class VersionFields(TypedDict):
    """`PageVersion`'s fields, every one, in its order (what the first fetch's encoding writes)."""

    fetched_at: int
    last_fetched_at: int
    fetches: int
    status: int
    content_hash: str
    content_type: str | None
    body_size: int
    truncated: bool
    crawl_id: str
    final_url: str
    blob: str
    warc_file: str
    warc_offset: int
    warc_length: int
    warc_record_id: str
    warc_date: str
    last_revisit: RecordRef | None


def version_fields(
    page: FetchedPage,
    *,
    blob: str,
    warc_file: str,
    warc_offset: int,
    warc_length: int,
    warc_record_id: str,
    warc_date: str,
) -> VersionFields:
    """A new version of `page`, as fields."""
    return {
        "fetched_at": page.fetched_at,
        "last_fetched_at": page.fetched_at,
        "fetches": 1,
        "status": page.status,
        "content_hash": page.sha256,
        "content_type": page.content_type,
        "body_size": page.body_size,
        "truncated": page.truncated,
        "crawl_id": page.crawl_id,
        "final_url": page.final_url,
        "blob": blob,
        "warc_file": warc_file,
        "warc_offset": warc_offset,
        "warc_length": warc_length,
        "warc_record_id": warc_record_id,
        "warc_date": warc_date,
        "last_revisit": None,
    }


def encode_first_history(page: FetchedPage, version: VersionFields) -> bytes:
    """`encode_history(with_new_version(None, page, PageVersion(**version), limit))`, the same
    bytes, without building the two models: a URL's first fetch is the common case, and the models
    (validation, then serialization) cost a fifth of what storing a 20 KB page costs beyond
    compressing it. tests/unit/storage/test_index.py holds the two encodings equal."""
    history = {
        "v": 1,
        "url": page.url,
        "versions": [version],
        "recent_fetches": [fetch_identity(page)],
    }
    return orjson.dumps(history)


def decode_history(raw: bytes | None) -> PageHistory | None:
    if raw is None:
        return None
    return PageHistory.model_validate_json(raw)


def page_metadata(history: PageHistory) -> dict[str, object]:
    """The API's latest-metadata document: the latest version, `fetched_at` the latest fetch."""
    latest = history.latest
    return {
        "url": history.url,
        **latest.model_dump(mode="json"),
        "fetched_at": latest.last_fetched_at,
        "first_fetched_at": latest.fetched_at,
        "versions": len(history.versions),
    }
