"""The metric names every service exports (issue 9 and the helpers' shared contract), by role.

Each entry is a metric family as its `# TYPE` line on /metrics names it (counters with `_total`,
histograms by their base name) and the label names its samples carry (histograms add `le`).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamcrawl.stack import ROLES

STATEFUL = ("frontier", "linkgraph", "storage")
"""Roles with changelog-backed state; the others export the state metrics but never move them."""


@dataclass(frozen=True)
class Family:
    name: str
    kind: str
    labels: frozenset[str] = frozenset()


def _family(name: str, kind: str, *labels: str) -> Family:
    return Family(name, kind, frozenset(labels))


def kernel(role: str) -> list[Family]:
    """What the service loop exports under every role's name."""
    prefix = f"streamcrawl_{role}"
    return [
        _family(f"{prefix}_messages_in_total", "counter", "topic"),
        _family(f"{prefix}_messages_out_total", "counter", "topic"),
        _family(f"{prefix}_dead_letters_total", "counter", "topic", "reason"),
        _family(f"{prefix}_errors_total", "counter", "kind"),
        _family(f"{prefix}_processing_seconds", "histogram", "topic"),
        _family(f"{prefix}_cycle_seconds", "histogram"),
        _family(f"{prefix}_consumer_lag_messages", "gauge", "topic", "partition"),
        _family(f"{prefix}_assigned_partitions", "gauge"),
        _family(f"{prefix}_state_restored_records_total", "counter"),
        _family(f"{prefix}_state_restore_seconds", "histogram"),
        _family(f"{prefix}_ready", "gauge"),
    ]


SERVICE: dict[str, list[Family]] = {
    "frontier": [
        _family("streamcrawl_frontier_urls_discovered_total", "counter"),
        _family("streamcrawl_frontier_urls_admitted_total", "counter"),
        _family("streamcrawl_frontier_urls_duplicate_total", "counter"),
        _family("streamcrawl_frontier_urls_out_of_scope_total", "counter", "reason"),
        _family("streamcrawl_frontier_urls_queued", "gauge"),
        _family("streamcrawl_frontier_leases_open", "gauge"),
        _family("streamcrawl_frontier_urls_released_total", "counter"),
        _family("streamcrawl_frontier_urls_retried_total", "counter"),
        _family("streamcrawl_frontier_urls_dead_total", "counter"),
        _family("streamcrawl_frontier_messages_repeated_total", "counter", "kind"),
        _family("streamcrawl_frontier_hosts_ready", "gauge"),
        _family("streamcrawl_frontier_hosts_throttled", "gauge"),
        _family("streamcrawl_frontier_hosts_held", "gauge"),
        _family("streamcrawl_frontier_host_holds_total", "counter"),
        _family("streamcrawl_frontier_recrawls_total", "counter", "result"),
        _family("streamcrawl_frontier_oldest_ready_url_age_seconds", "gauge"),
        _family("streamcrawl_frontier_crawl_urls", "gauge", "crawl_id", "counter"),
    ],
    "fetcher": [
        _family("streamcrawl_fetcher_requests_total", "counter", "status_class", "outcome"),
        _family("streamcrawl_fetcher_request_duration_seconds", "histogram"),
        _family("streamcrawl_fetcher_response_bytes_total", "counter"),
        _family("streamcrawl_fetcher_robots_denied_total", "counter"),
        _family("streamcrawl_fetcher_robots_unreachable_total", "counter"),
        _family("streamcrawl_fetcher_blocked_addresses_total", "counter"),
        _family("streamcrawl_fetcher_proxy_errors_total", "counter"),
        _family("streamcrawl_fetcher_leases_expired_total", "counter"),
        _family("streamcrawl_fetcher_requests_in_flight", "gauge"),
        _family("streamcrawl_fetcher_cookie_jars", "gauge"),
        _family("streamcrawl_fetcher_politeness_wait_seconds", "histogram"),
    ],
    "parser": [
        _family("streamcrawl_parser_pages_total", "counter", "status"),
        _family("streamcrawl_parser_links_total", "counter", "link_type", "position"),
        _family("streamcrawl_parser_parse_seconds", "histogram"),
        _family("streamcrawl_parser_items_total", "counter", "fields"),
        _family("streamcrawl_parser_requisites_total", "counter"),
    ],
    "linkgraph": [
        _family("streamcrawl_linkgraph_edges_upserted_total", "counter"),
        _family("streamcrawl_linkgraph_edges", "gauge"),
        _family("streamcrawl_linkgraph_nodes", "gauge"),
        _family("streamcrawl_linkgraph_index_bytes", "gauge", "index"),
        _family("streamcrawl_linkgraph_ranking_duration_seconds", "histogram"),
        _family("streamcrawl_linkgraph_ranking_iterations", "gauge"),
        _family("streamcrawl_linkgraph_ranker_graph_bytes", "gauge"),
        _family("streamcrawl_linkgraph_scores_published_total", "counter"),
    ],
    "storage": [
        _family("streamcrawl_storage_pages_stored_total", "counter"),
        _family("streamcrawl_storage_pages_unchanged_total", "counter"),
        _family("streamcrawl_storage_bytes_written_total", "counter"),
        _family("streamcrawl_storage_blobs_written_total", "counter"),
    ],
}

LINK_GRAPH_INDEXES = frozenset({"forward", "reverse", "anchors", "nodes"})
FETCH_STATUS_CLASSES = frozenset({"2xx", "3xx", "4xx", "5xx", "none"})
CRAWL_COUNTERS = frozenset(
    {
        "discovered",
        "admitted",
        "queued",
        "leased",
        "fetched",
        "failed",
        "dead",
        "changed",
        "unchanged",
    }
)


def families(role: str) -> list[Family]:
    if role not in ROLES:
        raise ValueError(f"unknown role {role}")
    return [*kernel(role), *SERVICE[role]]


def role_of(metric: str) -> str | None:
    """The role whose /metrics exports `metric` (a family or sample name), by its prefix."""
    for role in ROLES:
        if metric.startswith(f"streamcrawl_{role}_"):
            return role
    return None
