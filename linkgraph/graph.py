"""The ranker's compact graph: every URL an integer, every out-link a row of flat arrays.

Built from `links` read whole. A source's out-links are those of its newest fetch (all its parts);
an older fetch arriving late is ignored, so edges that disappeared are simply absent here (the
indexes keep them, marked gone).

Nothing is a Python object per node or per edge. URLs live in a `UrlTable` (about 100 bytes a
URL at Wikipedia's URL lengths); each node has 25 bytes of arrays (host, and its newest fetch:
time, crawl, generation, out-link count, whether it was a document). Out-links are an append-only
log of 5 bytes a link (target, link type) in runs, one per record applied, of 12 bytes each
(source, length, and the source's generation when applied). A newer fetch of a source bumps its
generation, which makes its earlier runs stale; the log is compacted once more than half of it is
stale, and a snapshot (`arrays`) keeps only the runs of each newest fetch.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from linkgraph.hosts import host_and_domain, origin_of
from linkgraph.urltable import EMPTY, UrlBatch, UrlTable
from schemas.links import PageLinks

KINDS = ("INTERNAL", "EXTERNAL", "NOFOLLOW", "UGC", "SPONSORED", "REDIRECT")
KIND_CODES = {kind: code for code, kind in enumerate(KINDS)}
FOLLOWED = np.array([KIND_CODES[k] for k in ("INTERNAL", "EXTERNAL", "REDIRECT")], dtype=np.int8)
"""Link types that pass rank: nofollow, ugc and sponsored ask not to endorse, so they do not."""
_DOCUMENT_TYPES = frozenset({"", "text/html", "application/xhtml+xml"})
COMPACT_AT_LEAST = 1 << 20
"""Stale log entries tolerated whatever the log's size."""


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
    documents: npt.NDArray[np.bool_]
    """Per node, whether its newest fetch was a document (HTML, or a redirect), not a stylesheet,
    an image or a sitemap: only documents can be orphan pages."""
    source_crawl: npt.NDArray[np.int32]
    """Per node, the crawl code of its newest fetch, -1 when never fetched."""


class OutLinks(NamedTuple):
    """One record of a source's out-links: `links` as the ranker needs it."""

    from_url: str
    fetched_at: int
    crawl_id: str
    targets: list[str]
    kinds: list[str]
    document: bool | None = None
    """Whether the fetch was a document (`is_document`); None when the record does not say (a
    part after the first, a redirect's record)."""

    @classmethod
    def of(cls, links: PageLinks) -> OutLinks:
        return cls(
            links.from_url,
            links.fetched_at,
            links.crawl_id,
            [edge.to_url for edge in links.edges],
            [edge.link_type for edge in links.edges],
            None if links.page is None else is_document(links.page.content_type),
        )


def is_document(content_type: str | None) -> bool:
    """An HTML page, or a body of no stated type (which the parser reads as HTML)."""
    media = (content_type or "").partition(";")[0].strip().lower()
    return media in _DOCUMENT_TYPES


class CompactGraph:
    def __init__(self) -> None:
        self.urls = UrlTable()
        self._host_of = array("i")
        self.hosts: list[str] = []
        self._host_ids: dict[str, int] = {}
        self._domain_of_host = array("i")
        self.domains: list[str] = []
        self._domain_ids: dict[str, int] = {}
        self.crawls: list[str] = []
        self._crawl_ids: dict[str, int] = {}
        self._origin_hosts: dict[str, int] = {}
        # per node, its newest fetch as a source
        self._fetched_at = array("q")
        self._crawl = array("i")
        """The crawl code of the newest fetch, -1 when the node was never fetched."""
        self._generation = array("i")
        """Counts the node's fetches that replaced its out-links; its runs carry it."""
        self._out = array("i")
        """Out-links in the log from the newest fetch."""
        self._document = array("b")
        """1 unless a record of the newest fetch said it was no document (`is_document`)."""
        self._repeating: set[int] = set()
        """Sources whose newest fetch may list a target twice: it came in more than one record
        (parts, or one redelivered), or a record listed a target twice."""
        # the log: every out-link applied, in runs of one record each
        self._dst = array("i")
        self._kind = array("b")
        self._run_source = array("i")
        self._run_generation = array("i")
        self._run_length = array("i")
        self._stale = 0
        """Out-links in the log from replaced fetches, dropped at the next compaction."""
        self.version = 0
        """Grows with every change, so a ranker knows whether anything is new."""

    def find(self, urls: list[str]) -> npt.NDArray[np.int32]:
        """The node id of each URL, -1 for those not in the graph."""
        return self.urls.find(urls)

    def crawl_code(self, crawl_id: str) -> int | None:
        return self._crawl_ids.get(crawl_id)

    def host_code(self, host: str) -> int | None:
        return self._host_ids.get(host)

    def host_of(self, node: int) -> str:
        return self.hosts[self._host_of[node]]

    def held_bytes(self) -> int:
        """Bytes of the graph's arrays and URL table: all but the host, domain and crawl tables,
        which grow with hosts, not pages."""
        arrays = (
            self._host_of,
            self._fetched_at,
            self._crawl,
            self._generation,
            self._out,
            self._document,
            self._dst,
            self._kind,
            self._run_source,
            self._run_generation,
            self._run_length,
        )
        return self.urls.held_bytes() + sum(a.itemsize * len(a) for a in arrays)

    @property
    def edge_count(self) -> int:
        """Out-links of the newest fetches (a target repeated across records counted again)."""
        return len(self._dst) - self._stale

    def add(self, links: PageLinks) -> bool:
        """Apply one record; False when it is older than its source's newest fetch."""
        return self.add_all([OutLinks.of(links)]) == 1

    def add_all(self, records: list[OutLinks]) -> int:
        """Apply records in order (their URLs looked up together); returns how many applied."""
        urls: list[str] = []
        for record in records:
            urls.append(record.from_url)
            urls.extend(record.targets)
        batch = self.urls.batch(urls)
        applied = start = 0
        try:
            for record in records:
                end = start + 1 + len(record.targets)
                applied += self._apply(batch, start, end, record)
                start = end
        finally:
            batch.close()
        if self._stale > max(COMPACT_AT_LEAST, len(self._dst) // 2):
            self._compact()
        return applied

    def _apply(self, batch: UrlBatch, start: int, end: int, record: OutLinks) -> bool:
        source = batch.known(start)
        fetched = source != EMPTY and self._crawl[source] >= 0
        if fetched and record.fetched_at < self._fetched_at[source]:
            return False
        added = batch.number(start, end)
        if added:
            self._add_nodes([batch.urls[position] for position in added])
        source = batch.ids[start]
        if fetched and record.fetched_at == self._fetched_at[source]:
            self._repeating.add(source)
        else:
            self._replace_fetch(source, record.fetched_at, record.crawl_id)
            if len(set(record.targets)) < len(record.targets):
                self._repeating.add(source)
        if record.document is not None:
            self._document[source] = record.document
        if record.targets:
            self._dst.extend(batch.ids[start + 1 : end])
            self._kind.extend([KIND_CODES[kind] for kind in record.kinds])
            self._run_source.append(source)
            self._run_generation.append(self._generation[source])
            self._run_length.append(len(record.targets))
            self._out[source] += len(record.targets)
        self.version += 1
        return True

    def _replace_fetch(self, source: int, fetched_at: int, crawl_id: str) -> None:
        crawl = self._crawl_ids.setdefault(crawl_id, len(self.crawls))
        if crawl == len(self.crawls):
            self.crawls.append(crawl_id)
        self._fetched_at[source] = fetched_at
        self._crawl[source] = crawl
        self._generation[source] += 1
        self._stale += self._out[source]
        self._out[source] = 0
        self._document[source] = 1
        self._repeating.discard(source)

    def _add_nodes(self, urls: list[str]) -> None:
        for url in urls:
            origin = origin_of(url)
            host = self._origin_hosts.get(origin)
            if host is None:
                host = self._origin_hosts[origin] = self._host_id(*host_and_domain(origin))
            self._host_of.append(host)
        count = len(urls)
        self._fetched_at.extend(array("q", [0]) * count)
        self._crawl.extend(array("i", [-1]) * count)
        self._generation.extend(array("i", [0]) * count)
        self._out.extend(array("i", [0]) * count)
        self._document.extend(array("b", [1]) * count)

    def _host_id(self, host: str, domain: str) -> int:
        found = self._host_ids.get(host)
        if found is not None:
            return found
        self._host_ids[host] = len(self.hosts)
        self.hosts.append(host)
        domain_id = self._domain_ids.get(domain)
        if domain_id is None:
            domain_id = self._domain_ids[domain] = len(self.domains)
            self.domains.append(domain)
        self._domain_of_host.append(domain_id)
        return self._host_ids[host]

    def _runs(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
        """Per run: its source, its length, and whether it is of its source's newest fetch."""
        sources = _copy(self._run_source, np.int32)
        lengths = _copy(self._run_length, np.int32)
        generation = _copy(self._generation, np.int32)
        live: npt.NDArray[np.bool_] = generation[sources] == _copy(self._run_generation, np.int32)
        return sources, lengths, live

    def _compact(self) -> None:
        """Drop the runs of replaced fetches."""
        sources, lengths, live = self._runs()
        kept = np.repeat(live, lengths)
        self._dst = _array("i", _taken(self._dst, np.int32, kept))
        self._kind = _array("b", _taken(self._kind, np.int8, kept))
        self._run_source = _array("i", sources[live])
        self._run_generation = _array("i", _taken(self._run_generation, np.int32, live))
        self._run_length = _array("i", lengths[live])
        self._stale = 0

    def arrays(self) -> EdgeArrays:
        sources, lengths, live = self._runs()
        if self._stale:
            kept = np.repeat(live, lengths)
            src = np.repeat(sources[live], lengths[live])
            dst, kind = _taken(self._dst, np.int32, kept), _taken(self._kind, np.int8, kept)
            del kept
        else:
            src = np.repeat(sources, lengths)
            dst, kind = _copy(self._dst, np.int32), _copy(self._kind, np.int8)
        if self._repeating:
            first = _first_of_each_link(src, dst, np.fromiter(self._repeating, dtype=np.int32))
            src, dst, kind = src[first], dst[first], kind[first]
        source_crawl = _copy(self._crawl, np.int32)
        return EdgeArrays(
            nodes=len(self.urls),
            src=src,
            dst=dst,
            kind=kind,
            host=_copy(self._host_of, np.int32),
            domain_of_host=_copy(self._domain_of_host, np.int32),
            crawled=source_crawl >= 0,
            documents=_copy(self._document, np.int8).astype(np.bool_),
            source_crawl=source_crawl,
        )


def _copy(values: array[int], dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A numpy copy of an array module array (a view would pin its buffer: it could not grow)."""
    return np.frombuffer(values, dtype=dtype).copy() if values else np.zeros(0, dtype)


def _array(typecode: str, values: npt.NDArray[Any]) -> array[int]:
    """An array module array of `values`, of the matching dtype."""
    return array(typecode, values.tobytes())


def _taken(
    values: array[int], dtype: type[np.generic], kept: npt.NDArray[np.bool_]
) -> npt.NDArray[Any]:
    """A numpy copy of the entries `kept` (through a view dropped on return)."""
    return np.frombuffer(values, dtype=dtype)[kept] if values else np.zeros(0, dtype)


def _first_of_each_link(
    src: npt.NDArray[np.int32], dst: npt.NDArray[np.int32], repeating: npt.NDArray[np.int32]
) -> npt.NDArray[np.bool_]:
    """Keep every entry but a repeat of an earlier (source, target) of a source in `repeating`."""
    keep = np.ones(src.size, dtype=np.bool_)
    candidates = np.flatnonzero(np.isin(src, repeating))
    pairs = (src[candidates].astype(np.int64) << 32) | dst[candidates].astype(np.int64)
    order = np.argsort(pairs, kind="stable")  # not np.unique: see `pagerank.distinct`
    ordered = pairs[order]
    repeat = np.zeros(ordered.size, dtype=np.bool_)
    np.equal(ordered[1:], ordered[:-1], out=repeat[1:])
    keep[candidates[order[repeat]]] = False
    return keep
