"""The link graph's Prometheus metrics (names from the shared contract; no URL or host labels)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

EDGES_UPSERTED = Counter(
    "streamcrawl_linkgraph_edges_upserted", "Forward edges created or changed (gone marks included)"
)
EDGES = Gauge("streamcrawl_linkgraph_edges", "Forward-index entries on this instance")
NODES = Gauge("streamcrawl_linkgraph_nodes", "Node-table entries on this instance")
INDEX_BYTES = Gauge(
    "streamcrawl_linkgraph_index_bytes", "Key and value bytes per index on this instance", ["index"]
)
RANKING_SECONDS = Histogram(
    "streamcrawl_linkgraph_ranking_duration_seconds",
    "One ranking: graph to published scores",
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
RANKING_ITERATIONS = Gauge(
    "streamcrawl_linkgraph_ranking_iterations", "Power iterations of the latest ranking"
)
RANKER_GRAPH_BYTES = Gauge(
    "streamcrawl_linkgraph_ranker_graph_bytes",
    "Bytes the ranker's compact graph holds in arrays (URLs included), at the latest ranking",
)
SCORES_PUBLISHED = Counter(
    "streamcrawl_linkgraph_scores_published", "Page scores published to `scores`"
)
