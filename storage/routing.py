"""A URL's history from any storage instance: read here, or asked of the instance that holds it.

The index is partitioned like `pages` (murmur2 of the URL), each state partition on the instance
that consumes that partition. An instance answers from its own RocksDB when it holds the URL's
partition, and otherwise forwards the lookup to the live member of `members` that lists the
partition (once: a forwarded request that misses again answers 503, the partition is moving).
Bodies need no forwarding: blobs are under the shared `storage.root`.
"""

from __future__ import annotations

import logging
from typing import Protocol

import aiohttp

from schemas import members
from schemas.partitioning import partition_for_key
from storage.exceptions import StorageError
from storage.index import TABLE, PageHistory, PageVersion, decode_history
from streamcrawl.membership import is_live
from streamcrawl.state import StoreSource

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Streamcrawl-Forwarded"
FORWARD_TIMEOUT_S = 10.0


class IndexUnavailableError(StorageError):
    """No instance can answer for the URL's partition right now (starting, rebalancing)."""


class MemberSource(Protocol):
    def snapshot(self) -> dict[str, members.Member]: ...


class LocalIndex:
    """This instance's state partitions, once the service loop is running (`attach`)."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._source: StoreSource | None = None

    def attach(self, source: StoreSource) -> None:
        self._source = source

    def partition_of(self, url: str) -> int:
        return partition_for_key(url.encode(), self.partitions)

    def holds(self, partition: int) -> bool:
        return self._source is not None and self._source.store(partition) is not None

    def lookup(self, url: str) -> PageHistory | None:
        """The URL's history from this instance; IndexUnavailableError when not held here."""
        partition = self.partition_of(url)
        store = self._source.store(partition) if self._source is not None else None
        if store is None:
            raise IndexUnavailableError(f"pages partition {partition} is not held here")
        try:
            raw = store.get(TABLE, url.encode())
        except Exception as error:  # the loop closed the store mid-read (a rebalance)
            moved = f"pages partition {partition} just moved: {error}"
            raise IndexUnavailableError(moved) from error
        return decode_history(raw)


class PageRouter:
    def __init__(
        self,
        local: LocalIndex,
        member_table: MemberSource | None,
        pages_topic: str,
        instance_id: str,
    ) -> None:
        self._local = local
        self._members = member_table
        self._pages_topic = pages_topic
        self._instance = instance_id

    def owner_address(self, partition: int) -> str | None:
        """The API address of the live storage member holding `partition`, other than this one."""
        if self._members is None:
            return None
        wanted = f"{self._pages_topic}:{partition}"
        for member in self._members.snapshot().values():
            if (
                member.role == "storage"
                and member.instance != self._instance
                and member.api_address
                and wanted in member.partitions
                and is_live(member)
            ):
                return member.api_address
        return None

    async def history(self, url: str, *, forwarded: bool) -> PageHistory | None:
        partition = self._local.partition_of(url)
        if self._local.holds(partition) or forwarded:
            return self._local.lookup(url)
        owner = self.owner_address(partition)
        if owner is None:
            missing = f"no live storage instance holds pages partition {partition}"
            raise IndexUnavailableError(missing)
        return await self._ask(owner, url)

    async def _ask(self, owner: str, url: str) -> PageHistory | None:
        timeout = aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(
                    f"http://{owner}/v1/page/history",
                    params={"url": url},
                    headers={FORWARDED_HEADER: "1"},
                ) as response,
            ):
                if response.status == 404:
                    return None
                document = await response.json()
                if response.status != 200:
                    reason = document.get("error", response.status)
                    raise IndexUnavailableError(f"{owner}: {reason}")
        except (aiohttp.ClientError, TimeoutError) as error:
            raise IndexUnavailableError(f"{owner} did not answer: {error}") from error
        versions = [PageVersion.model_validate(v) for v in document["history"]]
        return PageHistory(url=document["url"], versions=versions)
