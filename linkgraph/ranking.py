"""One ranking: the graph snapshot, its PageRank, and the global views the API serves from it.

A `Ranking` is immutable once built, so API threads read it while the ranker builds the next one.
Analyses are computed on first use and cached; a personalised ranking (teleport to seeds or to
pages matching a pattern) is computed on demand, warm-started from the global vector.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from linkgraph import analyses
from linkgraph.exceptions import QueryError
from linkgraph.graph import FOLLOWED, CompactGraph, EdgeArrays
from linkgraph.pagerank import (
    RankOutcome,
    RankParameters,
    Transition,
    distinct,
    pagerank,
    teleport_vector,
    transition,
)
from linkgraph.urltable import UrlTable
from schemas.canonical import canonical_url

MAX_LIMIT = 10_000
MAX_PATTERN_CHARS = 500
PERSONALISED_CACHE = 32


@dataclass
class Ranking:
    number: int
    computed_at: int
    urls: UrlTable
    """The graph's, which only grows: ids below `graph.nodes` are this ranking's."""
    hosts: list[str]
    domains: list[str]
    crawls: list[str]
    graph: EdgeArrays
    step: Transition
    outcome: RankOutcome
    seeds: dict[str, npt.NDArray[np.int64]]
    """Per crawl id, the node ids of its seeds."""
    parameters: RankParameters
    analysis: analyses.AnalysisParameters
    host_code: Callable[[str], int | None]
    crawl_code: Callable[[str], int | None]
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds per phase: snapshot (arrays), transition (CSR), iterate, publish."""
    _cache: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def scores(self) -> npt.NDArray[np.float64]:
        return self.outcome.scores

    def summary(self) -> dict[str, Any]:
        return {
            "ranking": self.number,
            "computed_at": self.computed_at,
            "nodes": self.graph.nodes,
            "edges": int(self.graph.src.size),
            "ranked_edges": int(self.step.matrix.nnz),
            "iterations": self.outcome.iterations,
            "converged": self.outcome.converged,
            "residual": self.outcome.residual,
            "seconds": self.seconds,
            "phases": dict(self.phases),
        }

    def answer(self, view: str, params: Mapping[str, str]) -> Any:
        limit = _limit(params, 100 if view != "domains" else 1000)
        if view == "ranking":
            return self.summary()
        if view == "top":
            return self._top(params, limit)
        if view == "important":
            found = analyses.important(self.scores, self.analysis.important_sigmas)
            return {"pages": self._pages(found[:limit], self.scores), "count": int(found.size)}
        if view == "path":
            return self._path(params)
        if view == "orphans":
            found = self._cached("orphans", lambda: analyses.orphans(self.graph, self._all_seeds()))
            crawl_id = params.get("crawl_id")
            if crawl_id:  # those whose newest fetch was in this crawl
                code = self.crawl_code(crawl_id)
                found = found[self.graph.source_crawl[found] == (code if code is not None else -2)]
            return self._pages(found[:limit], self.scores)
        links = self._cached("domain_links", lambda: analyses.domain_links(self.graph))
        if view == "domains":
            return analyses.domain_graph(links, self.domains, limit)
        if view == "farms":
            return analyses.farms(links, self.domains, self.analysis)[:limit]
        if view == "syndication":
            return analyses.syndication(links, self.domains, self.analysis)[:limit]
        raise QueryError(f"unknown view {view}", 404)

    def _top(self, params: Mapping[str, str], limit: int) -> dict[str, Any]:
        mask = self._mask(params.get("host"), params.get("crawl_id"))
        teleport = params.get("teleport")
        scores = self.scores
        if teleport:
            scores = self.personalised(teleport, params.get("pattern"), params.get("crawl_id"))
        found = analyses.top(scores, mask, limit)
        return {
            "pages": self._pages(found, scores),
            "computed_at": self.computed_at,
            "personalised": bool(teleport),
        }

    def _path(self, params: Mapping[str, str]) -> dict[str, Any]:
        """A shortest click path to ``url`` from the seeds (of ``crawl_id``, else of all)."""
        url = canonical_url(params.get("url") or "")
        if url is None:
            raise QueryError("url must be an http(s) URL")
        [node] = self.urls.find([url]).tolist()
        if node < 0 or node >= self.graph.nodes:
            raise QueryError(f"{url} is not in the graph", 404)
        crawl_id = params.get("crawl_id")
        seeds = self.seeds.get(crawl_id, _EMPTY) if crawl_id else self._all_seeds()
        tree = self._cached(
            f"click_tree\x00{crawl_id}", lambda: analyses.click_tree(self.graph, seeds)
        )
        path = analyses.click_path(tree, seeds, node)
        return {
            "url": url,
            "clicks": None if path is None else len(path) - 1,
            "path": None if path is None else self.urls.urls(path),
        }

    def _mask(self, host: str | None, crawl_id: str | None) -> npt.NDArray[np.bool_] | None:
        mask: npt.NDArray[np.bool_] | None = None
        if host:
            code = self.host_code(host.lower())
            mask = self.graph.host[: self.graph.nodes] == (code if code is not None else -1)
        if crawl_id:
            code = self.crawl_code(crawl_id)
            in_crawl = self.graph.source_crawl == (code if code is not None else -2)
            reached = in_crawl.copy()
            reached[self.graph.dst[in_crawl[self.graph.src]]] = True
            mask = reached if mask is None else mask & reached
        return mask

    def personalised(
        self, teleport: str, pattern: str | None, crawl_id: str | None
    ) -> npt.NDArray[np.float64]:
        """Topic-sensitive PageRank: teleport to `seeds` (of `crawl_id`, or of every crawl) or to
        the pages whose URL matches `pattern` (a regular expression, searched)."""
        key = f"{teleport}\x00{pattern}\x00{crawl_id}"
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        if teleport == "seeds":
            members = self.seeds.get(crawl_id, _EMPTY) if crawl_id else self._all_seeds()
        elif teleport == "pattern":
            members = self._matching(pattern)
        else:
            raise QueryError("teleport must be 'seeds' or 'pattern'")
        vector = teleport_vector(self.graph.nodes, members)
        outcome = pagerank(self.step, self.parameters, vector, start=self.scores)
        with self._lock:
            if len(self._cache) > PERSONALISED_CACHE:
                self._cache.clear()
            self._cache[key] = outcome.scores
        return outcome.scores

    def _matching(self, pattern: str | None) -> npt.NDArray[np.int64]:
        if not pattern or len(pattern) > MAX_PATTERN_CHARS:
            raise QueryError(f"teleport=pattern needs a pattern of 1 to {MAX_PATTERN_CHARS} chars")
        try:
            compiled = re.compile(pattern)
        except re.error as error:
            raise QueryError(f"pattern does not compile: {error}") from error
        urls = self.urls.urls(range(self.graph.nodes))
        return np.array([i for i, u in enumerate(urls) if compiled.search(u)], dtype=np.int64)

    def _all_seeds(self) -> npt.NDArray[np.int64]:
        if not self.seeds:
            return _EMPTY
        return distinct(np.concatenate(list(self.seeds.values())))[0]

    def _cached(self, name: str, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if name in self._cache:
                return self._cache[name]
        value = compute()
        with self._lock:
            self._cache[name] = value
        return value

    def _pages(
        self, nodes: npt.NDArray[np.int64], scores: npt.NDArray[np.float64]
    ) -> list[dict[str, Any]]:
        chosen = nodes.tolist()
        urls = self.urls.urls(chosen)
        return [{"url": u, "score": float(scores[i])} for u, i in zip(urls, chosen, strict=True)]


_EMPTY = np.zeros(0, dtype=np.int64)


def _present(ids: npt.NDArray[np.int32]) -> npt.NDArray[np.int64]:
    return ids[ids >= 0].astype(np.int64)


def _limit(params: Mapping[str, str], default: int) -> int:
    raw = params.get("limit")
    try:
        limit = default if raw is None else int(raw)
    except ValueError as error:
        raise QueryError("limit must be an integer") from error
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be between 1 and {MAX_LIMIT}")
    return limit


def build_ranking(
    graph: CompactGraph,
    number: int,
    computed_at: int,
    seeds: dict[str, list[str]],
    parameters: RankParameters,
    analysis: analyses.AnalysisParameters,
    start: npt.NDArray[np.float64] | None,
) -> Ranking:
    """Snapshot `graph`, build the transition over followed links, iterate from `start`."""
    began = time.perf_counter()
    arrays = graph.arrays()
    snapshot = time.perf_counter()
    step = transition(arrays.src, arrays.dst, arrays.nodes, np.isin(arrays.kind, FOLLOWED))
    built = time.perf_counter()
    outcome = pagerank(step, parameters, start=start)
    iterated = time.perf_counter()
    seed_ids = {crawl_id: _present(graph.find(urls)) for crawl_id, urls in seeds.items()}
    return Ranking(
        number=number,
        computed_at=computed_at,
        urls=graph.urls,
        hosts=graph.hosts,
        domains=graph.domains,
        crawls=graph.crawls,
        graph=arrays,
        step=step,
        outcome=outcome,
        seeds=seed_ids,
        parameters=parameters,
        analysis=analysis,
        host_code=graph.host_code,
        crawl_code=graph.crawl_code,
        phases={
            "snapshot": snapshot - began,
            "transition": built - snapshot,
            "iterate": iterated - built,
        },
    )
