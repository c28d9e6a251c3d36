"""Finding who answers a query: the linkgraph member owning a URL's partition, or the ranker.

Both come from `members` (read whole as a table): a live linkgraph member whose assignment holds
`links` partition p owns every URL of partition p; the ranker publishes itself under the role
`RANKER_ROLE` while it leads.
"""

from __future__ import annotations

from collections.abc import Callable

from schemas import members
from schemas.partitioning import partition_for_key
from streamcrawl.membership import is_live

LINKGRAPH_ROLE = "linkgraph"
RANKER_ROLE = "linkgraph-ranker"

Members = Callable[[], dict[str, members.Member]]


class Router:
    def __init__(self, snapshot: Members, links_topic: str, partitions: int) -> None:
        self._snapshot = snapshot
        self._links_topic = links_topic
        self.partitions = partitions

    def partition_of(self, url: str) -> int:
        return partition_for_key(url.encode("utf-8"), self.partitions)

    def owner_address(self, partition: int, exclude: str | None = None) -> str | None:
        wanted = f"{self._links_topic}:{partition}"
        for member in self._live(LINKGRAPH_ROLE):
            if wanted in member.partitions and member.api_address not in (None, exclude):
                return member.api_address
        return None

    def ranker_address(self) -> str | None:
        for member in self._live(RANKER_ROLE):
            if member.api_address is not None:
                return member.api_address
        return None

    def _live(self, role: str) -> list[members.Member]:
        found = [m for m in self._snapshot().values() if m.role == role and is_live(m)]
        return sorted(found, key=lambda m: -m.updated_at)
