"""The ranking half of `bench_linkgraph`: the ranker against networkx on the same graph.

Each side runs in its own process (`python -m tests.bench.linkgraph_rank ours|networkx ...`) so
its peak RSS is its own; both generate the same graph from the same seed. Ours is timed from the
ranker's compact graph (already built from PageLinks, as the ranker keeps it) to the scores
delivered on a real `scores` topic: snapshot arrays, CSR transition, power iteration, changed
scores published. networkx is timed from the same followed edges (integer nodes, its fastest
input) through building its DiGraph and `networkx.pagerank` (alpha 0.85, tol 1e-6, 100
iterations). Peak RSS is reset (`/proc/self/clear_refs`) just before the timed part and read
after it; the process's RSS before the timed part is reported beside it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import numpy.typing as npt
from confluent_kafka import Consumer

from linkgraph.graph import FOLLOWED, KINDS, CompactGraph, OutLinks
from linkgraph.pagerank import distinct
from linkgraph.publisher import ScorePublisher
from linkgraph.ranker import READ_BATCH, Ranker, RankerConfig
from streamcrawl.clock import SystemClock

SEED = 6


def generated(
    nodes: int, edges: int, hosts: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int8]]:
    """Sources uniform over 80% of the pages (a fifth are dangling), targets power-law."""
    rng = np.random.default_rng(SEED)
    src = rng.integers(0, int(nodes * 0.8), edges)
    dst = (rng.pareto(1.1, edges) * nodes / 50).astype(np.int64) % nodes
    pairs, _ = distinct(src * nodes + dst)  # one link per (page, target), as the parser sends
    # INTERNAL, EXTERNAL and REDIRECT pass rank; NOFOLLOW and UGC do not.
    kind = rng.choice(np.array([0, 0, 0, 1, 1, 2, 3, 5], dtype=np.int8), pairs.size)
    return pairs // nodes, pairs % nodes, kind


def url(node: int, hosts: int) -> str:
    return f"https://h{node % hosts}.example/p/{node}"


def followed_edges(
    src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64], kind: npt.NDArray[np.int8]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    keep = np.isin(kind, FOLLOWED) & (src != dst)
    return src[keep], dst[keep]


def rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def build_compact_graph(
    src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64], kind: npt.NDArray[np.int8], hosts: int
) -> CompactGraph:
    """The graph as the ranker holds it after reading these edges' PageLinks (built through
    `add_all`, as the ranker's reader does, minus the pydantic objects)."""
    graph = CompactGraph()
    bounds = np.flatnonzero(np.diff(src)) + 1
    records: list[OutLinks] = []
    for chunk_src, chunk_dst, chunk_kind in zip(
        np.split(src, bounds), np.split(dst, bounds), np.split(kind, bounds), strict=True
    ):
        records.append(
            OutLinks(
                url(int(chunk_src[0]), hosts),
                1,
                "bench",
                [url(d, hosts) for d in chunk_dst.tolist()],
                [KINDS[k] for k in chunk_kind.tolist()],
            )
        )
        if len(records) == READ_BATCH:
            graph.add_all(records)
            records = []
    graph.add_all(records)
    return graph


def ours(
    nodes: int, edges: int, hosts: int, bootstrap: str, topic: str, out: Path
) -> dict[str, Any]:
    src, dst, kind = generated(nodes, edges, hosts)
    graph = build_compact_graph(src, dst, kind, hosts)
    publisher = ScorePublisher(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "compression.type": "zstd",
            "enable.idempotence": True,
            "acks": "all",
            "queue.buffering.max.messages": 500_000,
        },
        topic,
        6,
    )
    election = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused"})
    ranker = Ranker(RankerConfig(), election, topic, lambda: None, publisher, dict, SystemClock())  # type: ignore[arg-type, return-value]
    rss_before = rss_kib("VmRSS")
    reset_peak()
    started = time.perf_counter()
    summary = ranker.rank(graph)
    seconds = time.perf_counter() - started
    peak = rss_kib("VmHWM")
    ranking = ranker.ranking
    assert ranking is not None
    ids = graph.find([url(n, hosts) for n in range(nodes)]).astype(np.int64)
    scores = np.where(ids >= 0, ranking.scores[np.maximum(ids, 0)], 0.0)
    np.save(out, scores)
    election.close()
    return {
        "seconds": seconds,
        "rss_before_kib": rss_before,
        "peak_kib": peak,
        "edges": int(src.size),
        "ranked_edges": summary["ranked_edges"],
        "nodes": summary["nodes"],
        "iterations": summary["iterations"],
        "published": summary["published"],
        "phases": summary["phases"],
        "graph_bytes": graph.held_bytes(),
    }


def networkx_side(nodes: int, edges: int, hosts: int, out: Path) -> dict[str, Any]:
    src, dst, kind = generated(nodes, edges, hosts)
    f_src, f_dst = followed_edges(src, dst, kind)
    present, _ = distinct(np.concatenate([src, dst]))
    rss_before = rss_kib("VmRSS")
    reset_peak()
    started = time.perf_counter()
    graph = nx.DiGraph()
    graph.add_nodes_from(present.tolist())
    graph.add_edges_from(zip(f_src.tolist(), f_dst.tolist(), strict=True))
    ranks = nx.pagerank(graph, alpha=0.85, tol=1e-6, max_iter=100)
    seconds = time.perf_counter() - started
    peak = rss_kib("VmHWM")
    scores = np.zeros(nodes)
    for node, score in ranks.items():
        scores[node] = score
    np.save(out, scores)
    # Untimed: a tightly converged reference (networkx stops at an L1 change below N * tol).
    reference = np.zeros(nodes)
    tight = nx.pagerank(graph, alpha=0.85, tol=1e-14, max_iter=2000)
    for node, score in tight.items():
        reference[node] = score
    np.save(out.with_name("reference.npy"), reference)
    return {
        "seconds": seconds,
        "rss_before_kib": rss_before,
        "peak_kib": peak,
        "edges": int(f_src.size),
    }


def main() -> int:
    side, nodes, edges, hosts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    out = Path(sys.argv[5])
    if side == "ours":
        result = ours(nodes, edges, hosts, sys.argv[6], sys.argv[7], out)
    else:
        result = networkx_side(nodes, edges, hosts, out)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
