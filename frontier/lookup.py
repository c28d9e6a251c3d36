"""One URL of a crawl as the frontier knows it: ``GET /v1/crawl/{id}/url?url=...`` and
``streamcrawl url`` (StormCrawler's status index, Nutch's ``readdb -url``, Heritrix's URI lookup).

A URL's record lives in the state partition of its host (the partition `urls` and `outcomes` are
keyed to), on the frontier instance consuming that partition. That instance reads it from its
RocksDB:
- the URL's state (queued, leased, waiting for a retry or a recrawl, done, dead);
- its depth, attempts and latest outcome;
- the validators a recrawl sends (ETag, Last-Modified, content hash);
- its recrawl interval (`frontier.recrawl`);
- when a waiting URL is due, and a leased one's lease and deadline.

An instance that does not hold the partition raises :class:`PartitionNotHeldError` with the
partition number; the API answers 421 with it, and the CLI asks the instance that lists the
partition in `members`.

A URL the crawl never admitted has no record. For it, the lookup says whether the crawl's scope
rules that do not depend on where a link is found refuse it: domain, include and exclude
patterns, and URL traps (`frontier.scope`). Depth and budgets depend on the page that links it.
A crawl finished long enough ago has no records left at all (`frontier.purge`): the lookup says
so instead.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from frontier.config import FrontierConfig
from frontier.exceptions import FrontierError
from frontier.records import (
    CRAWL,
    LEASES,
    VISITED,
    LeaseRecord,
    UrlState,
    VisitedRecord,
    visited_key,
)
from frontier.recrawl import waiting_for_recrawl
from frontier.scope import ScopeRules, decide_new, host_scope
from schemas.canonical import canonical_url, host_key, url_fingerprint
from schemas.crawls import CrawlState
from schemas.partitioning import partition_for_key
from streamcrawl.state import PartitionStore, StoreSource

Waiting = Literal["retry", "recrawl"]


class PartitionNotHeldError(FrontierError):
    """The URL's state partition is not open on this instance (another one holds it, or the
    service loop is starting or rebalancing)."""

    def __init__(self, partition: int, detail: str) -> None:
        super().__init__(f"partition {partition} {detail}")
        self.partition = partition


class CrawlStates(Protocol):
    """The `crawls` table: a crawl's state by its id."""

    def get(self, key: str, /) -> CrawlState | None: ...


class UrlStatus(BaseModel):
    """What the frontier knows of one URL of one crawl."""

    model_config = ConfigDict(frozen=True)

    crawl_id: str
    url: str
    """The URL as the crawl keeps it (canonical)."""
    host: str
    partition: int
    admitted: bool
    state: UrlState | None = None
    depth: int | None = None
    attempts: int | None = None
    last_outcome: str | None = None
    """The label of its latest outcome: an HTTP status, or a kind such as robots_denied."""
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    recrawl_interval_ms: int | None = None
    due_ms: int | None = None
    """When a waiting URL is queued again."""
    waiting_for: Waiting | None = None
    lease_id: str | None = None
    lease_deadline_ms: int | None = None
    scope: str | None = None
    """For a URL never admitted: the first scope rule that refuses it, or None when none of the
    rules independent of where it is found does."""
    purged: bool = False
    """The crawl is done or cancelled and this partition keeps none of its state: purged once
    ``finished_crawl_retention_ms`` passed (`frontier.purge`), or it never had URLs here."""


class UrlLookup:
    """This instance's side of the lookup; `attach` it to the service loop once it runs."""

    def __init__(self, partitions: int, config: FrontierConfig, crawls: CrawlStates) -> None:
        self.partitions = partitions
        self._config = config
        self._crawls = crawls
        self._source: StoreSource | None = None

    def attach(self, source: StoreSource) -> None:
        self._source = source

    def partition_of(self, host: str) -> int:
        return partition_for_key(host.encode(), self.partitions)

    def status(self, crawl_id: str, url: str) -> UrlStatus | None:
        """The URL's status in the crawl (None: no such crawl); ValueError when it is not a
        crawlable URL, `PartitionNotHeldError` when this instance does not hold its partition."""
        crawl = self._crawls.get(crawl_id)
        if crawl is None:
            return None
        canonical = canonical_url(url)
        if canonical is None:
            raise ValueError(f"not a crawlable http(s) URL: {url[:200]!r}")
        host = host_key(canonical)
        partition = self.partition_of(host)
        store = None if self._source is None else self._source.store(partition)
        if store is None:
            raise PartitionNotHeldError(partition, "is not held here")
        raw = _read(store, partition, VISITED, visited_key(crawl_id, url_fingerprint(canonical)))
        visited = None if raw is None else VisitedRecord.decode(raw)
        lease = None
        if visited is not None and visited.state == "leased" and visited.lease_id:
            lease_raw = _read(store, partition, LEASES, visited.lease_id.encode())
            lease = None if lease_raw is None else LeaseRecord.decode(lease_raw)
        status = UrlStatus(
            crawl_id=crawl.crawl_id,
            url=canonical,
            host=host,
            partition=partition,
            admitted=visited is not None,
        )
        if visited is None:
            finished = crawl.status in ("done", "cancelled")
            purged = finished and _read(store, partition, CRAWL, crawl_id.encode()) is None
            scope = self._refused_by(crawl, canonical, host)
            return status.model_copy(update={"scope": scope, "purged": purged})
        return _known(visited, lease, status)

    def _refused_by(self, crawl: CrawlState, canonical: str, host: str) -> str | None:
        """The rules checked as for a seed (depth 0, budgets untouched): what refuses a URL there
        refuses it wherever it is found."""
        rules = ScopeRules.from_request(crawl.request, self._config.trap_limits)
        return decide_new(rules, host_scope(rules, host, 0, budget_left=True), canonical, 0)


def _read(store: PartitionStore, partition: int, table: str, key: bytes) -> bytes | None:
    """One value of the store; `PartitionNotHeldError` when the loop closed the store meanwhile
    (the partition moved to another instance)."""
    try:
        return store.get(table, key)
    except Exception as error:  # a closed store has no tables; rocksdict raises its own errors
        raise PartitionNotHeldError(partition, f"just moved: {error}") from error


def _known(visited: VisitedRecord, lease: LeaseRecord | None, base: UrlStatus) -> UrlStatus:
    waiting = visited.state == "waiting"
    waiting_for = "recrawl" if waiting_for_recrawl(visited) else "retry"
    fields = {
        "state": visited.state,
        "depth": visited.depth,
        "attempts": visited.attempts,
        "last_outcome": visited.outcome,
        "etag": visited.etag,
        "last_modified": visited.last_modified,
        "content_hash": visited.content_hash,
        "recrawl_interval_ms": visited.recrawl_interval_ms,
        "due_ms": visited.due_ms if waiting else None,
        "waiting_for": waiting_for if waiting else None,
        "lease_id": None if lease is None else lease.lease_id,
        "lease_deadline_ms": None if lease is None else lease.deadline_ms,
    }
    return base.model_copy(update=fields)
