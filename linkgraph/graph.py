"""The ranker's compact graph: every URL an integer, every source's newest out-links as arrays.

Built from `links` read whole. A source's out-links are those of its newest fetch (all its parts);
an older fetch arriving late is ignored, so edges that disappeared are simply absent here (the
indexes keep them, marked gone). Memory per edge is 5 bytes of arrays; per node one dict entry,
its URL string and its host id, plus the host and registered-domain tables.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from schemas.canonical import host_key, registered_domain
from schemas.links import PageLinks

KINDS = ("INTERNAL", "EXTERNAL", "NOFOLLOW", "UGC", "SPONSORED", "REDIRECT")
KIND_CODES = {kind: code for code, kind in enumerate(KINDS)}
FOLLOWED = np.array([KIND_CODES[k] for k in ("INTERNAL", "EXTERNAL", "REDIRECT")], dtype=np.int8)
"""Link types that pass rank: nofollow, ugc and sponsored ask not to endorse, so they do not."""


@dataclass
class SourceLinks:
    fetched_at: int
    crawl: int
    targets: array[int] = field(default_factory=lambda: array("i"))
    kinds: array[int] = field(default_factory=lambda: array("b"))


@dataclass(frozen=True)
class EdgeArrays:
    """A snapshot of the graph as flat arrays (ids index `urls`)."""

    nodes: int
    src: npt.NDArray[np.int32]
    dst: npt.NDArray[np.int32]
    kind: npt.NDArray[np.int8]
    host: npt.NDArray[np.int32]
    domain_of_host: npt.NDArray[np.int32]
    crawled: npt.NDArray[np.bool_]
    source_crawl: npt.NDArray[np.int32]
    """Per node, the crawl code of its newest fetch, -1 when never fetched."""


class CompactGraph:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.urls: list[str] = []
        self._host_of = array("i")
        self.hosts: list[str] = []
        self._host_ids: dict[str, int] = {}
        self._domain_of_host = array("i")
        self.domains: list[str] = []
        self._domain_ids: dict[str, int] = {}
        self.crawls: list[str] = []
        self._crawl_ids: dict[str, int] = {}
        self.sources: dict[int, SourceLinks] = {}
        self.version = 0
        """Grows with every change, so a ranker knows whether anything is new."""

    def node_id(self, url: str) -> int:
        found = self.ids.get(url)
        if found is not None:
            return found
        node = len(self.urls)
        self.ids[url] = node
        self.urls.append(url)
        self._host_of.append(self._host_id(host_key(url)))
        return node

    def _host_id(self, host: str) -> int:
        found = self._host_ids.get(host)
        if found is not None:
            return found
        self._host_ids[host] = len(self.hosts)
        self.hosts.append(host)
        domain = registered_domain(host) if host else ""
        domain_id = self._domain_ids.get(domain)
        if domain_id is None:
            domain_id = self._domain_ids[domain] = len(self.domains)
            self.domains.append(domain)
        self._domain_of_host.append(domain_id)
        return self._host_ids[host]

    def crawl_code(self, crawl_id: str) -> int | None:
        return self._crawl_ids.get(crawl_id)

    def host_code(self, host: str) -> int | None:
        return self._host_ids.get(host)

    def host_of(self, node: int) -> str:
        return self.hosts[self._host_of[node]]

    def add(self, links: PageLinks) -> bool:
        """Apply one part of one fetch; False when it is older than the source's newest fetch."""
        source = self.node_id(links.from_url)
        current = self.sources.get(source)
        if current is not None and links.fetched_at < current.fetched_at:
            return False
        if current is None or links.fetched_at > current.fetched_at:
            crawl = self._crawl_ids.setdefault(links.crawl_id, len(self.crawls))
            if crawl == len(self.crawls):
                self.crawls.append(links.crawl_id)
            current = self.sources[source] = SourceLinks(links.fetched_at, crawl)
        known = set(current.targets) if current.targets else None
        for edge in links.edges:
            target = self.node_id(edge.to_url)
            if known is not None:
                if target in known:
                    continue
                known.add(target)
            current.targets.append(target)
            current.kinds.append(KIND_CODES[edge.link_type])
        self.version += 1
        return True

    @property
    def edge_count(self) -> int:
        return sum(len(s.targets) for s in self.sources.values())

    def arrays(self) -> EdgeArrays:
        nodes = len(self.urls)
        ids = np.fromiter(self.sources.keys(), dtype=np.int32, count=len(self.sources))
        links = list(self.sources.values())
        counts = np.fromiter((len(s.targets) for s in links), dtype=np.int64, count=len(links))
        src = np.repeat(ids, counts)
        dst = _concatenate([s.targets for s in links], "i").astype(np.int32, copy=False)
        kind = _concatenate([s.kinds for s in links], "b").astype(np.int8, copy=False)
        crawled = np.zeros(nodes, dtype=np.bool_)
        crawled[ids] = True
        source_crawl = np.full(nodes, -1, dtype=np.int32)
        source_crawl[ids] = np.fromiter((s.crawl for s in links), dtype=np.int32, count=len(links))
        return EdgeArrays(
            nodes=nodes,
            src=src,
            dst=dst,
            kind=kind,
            host=np.frombuffer(self._host_of, dtype=np.int32).copy(),
            domain_of_host=np.frombuffer(self._domain_of_host, dtype=np.int32).copy(),
            crawled=crawled,
            source_crawl=source_crawl,
        )


def _concatenate(parts: list[array[int]], typecode: str) -> npt.NDArray[Any]:
    joined = array(typecode)
    for part in parts:
        joined.extend(part)
    return np.frombuffer(joined, dtype=typecode).copy() if joined else np.zeros(0, typecode)
