"""Writes deploy/grafana/dashboards/*.json: `python3 deploy/grafana/build_dashboards.py`.

The dashboards are generated so every panel reads the same way (one stage per series, rates over
Grafana's `$__rate_interval`, one provisioned datasource) and a review sees queries, not layout
noise. tests/deploy/test_dashboards.py checks the JSON files are this script's output, and runs
every query against a real Prometheus scraping a real crawl. Edit here, then run it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROLES = ("frontier", "fetcher", "parser", "linkgraph", "storage")
"""The stages, as in streamcrawl.stack.ROLES (this script runs without the package installed)."""
STATEFUL = ("frontier", "linkgraph", "storage")
"""Stages with per-partition RocksDB state restored from a changelog."""
DATASOURCE = {"type": "prometheus", "uid": "streamcrawl-prometheus"}
RATE = "$__rate_interval"
OUT = Path(__file__).resolve().parent / "dashboards"

Panel = dict[str, Any]


def target(expr: str, legend: str = "") -> dict[str, Any]:
    return {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend or "__auto"}


def per_stage(
    template: str, legend: str = "{role}", roles: tuple[str, ...] = ROLES
) -> list[dict[str, Any]]:
    """One target per stage: `template` with `{role}` filled in."""
    return [target(template.format(role=role), legend.format(role=role)) for role in roles]


def timeseries(
    title: str, targets: list[dict[str, Any]], unit: str = "short", **extra: Any
) -> Panel:
    return {
        "type": "timeseries",
        "title": title,
        "datasource": DATASOURCE,
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit, "custom": {"lineWidth": 1}}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        **extra,
    }


def stat(title: str, expr: str, unit: str = "short") -> Panel:
    return {
        "type": "stat",
        "title": title,
        "datasource": DATASOURCE,
        "targets": [target(expr, title)],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}},
    }


def quantiles(metric: str, by: str = "") -> list[dict[str, Any]]:
    grouping = f"le, {by}" if by else "le"
    return [
        target(
            f"histogram_quantile({q}, sum by ({grouping}) (rate({metric}_bucket[{RATE}])))",
            f"p{round(q * 100)}" + (f" {{{{{by}}}}}" if by else ""),
        )
        for q in (0.5, 0.95, 0.99)
    ]


def layout(
    rows: list[tuple[str, list[Panel]]], width: int = 8, height: int = 8, y: int = 0
) -> list[Panel]:
    """Rows of panels, 24 / `width` to a line, placed from line `y` down."""
    panels: list[Panel] = []
    for title, row in rows:
        panels.append(
            {
                "type": "row",
                "title": title,
                "collapsed": False,
                "panels": [],
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            }
        )
        y += 1
        for index, panel in enumerate(row):
            x = (index * width) % 24
            if index and x == 0:
                y += height
            panel["gridPos"] = {"h": height, "w": width, "x": x, "y": y}
            panels.append(panel)
        y += height
    return panels


def numbered(panels: list[Panel]) -> list[Panel]:
    """Panel ids in order and a refId per target, as Grafana expects."""
    for number, panel in enumerate(panels, start=1):
        panel["id"] = number
        for letter, item in zip(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ", panel.get("targets", []), strict=False
        ):
            item["refId"] = letter
    return panels


def dashboard(uid: str, title: str, panels: list[Panel], variables: list[Any]) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "tags": ["streamcrawl"],
        "timezone": "utc",
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": variables},
        "annotations": {"list": []},
        "panels": panels,
    }


def stages_row() -> list[Panel]:
    return [
        timeseries(
            "Messages in per stage",
            per_stage(f"sum(rate(streamcrawl_{{role}}_messages_in_total[{RATE}]))"),
            "reqps",
        ),
        timeseries(
            "Messages out per stage",
            per_stage(f"sum(rate(streamcrawl_{{role}}_messages_out_total[{RATE}]))"),
            "reqps",
        ),
        timeseries(
            "Consumer lag per stage",
            per_stage("sum(streamcrawl_{role}_consumer_lag_messages)"),
        ),
        timeseries(
            "Handler time per message, p95",
            per_stage(
                "histogram_quantile(0.95, sum by (le) "
                f"(rate(streamcrawl_{{role}}_processing_seconds_bucket[{RATE}])))"
            ),
            "s",
        ),
        timeseries(
            "Cycle time, p95",
            per_stage(
                "histogram_quantile(0.95, sum by (le) "
                f"(rate(streamcrawl_{{role}}_cycle_seconds_bucket[{RATE}])))"
            ),
            "s",
        ),
        timeseries(
            "Ready instances and assigned partitions",
            [
                *per_stage("sum(streamcrawl_{role}_ready)", "{role} ready"),
                *per_stage("sum(streamcrawl_{role}_assigned_partitions)", "{role} partitions"),
            ],
        ),
        timeseries(
            "Dead letters by topic and reason",
            per_stage(
                f"sum by (topic, reason) (rate(streamcrawl_{{role}}_dead_letters_total[{RATE}]))",
                "{role} {{{{topic}}}} {{{{reason}}}}",
            ),
            "reqps",
        ),
        timeseries(
            "Errors by kind",
            per_stage(
                f"sum by (kind) (rate(streamcrawl_{{role}}_errors_total[{RATE}]))",
                "{role} {{{{kind}}}}",
            ),
            "reqps",
        ),
        timeseries(
            "State restored (records/s)",
            per_stage(
                f"sum(rate(streamcrawl_{{role}}_state_restored_records_total[{RATE}]))",
                roles=STATEFUL,
            ),
            "reqps",
        ),
        timeseries(
            "State partition restore time, max",
            per_stage(
                "histogram_quantile(1, sum by (le) "
                "(streamcrawl_{role}_state_restore_seconds_bucket))",
                roles=STATEFUL,
            ),
            "s",
        ),
    ]


def fetcher_row() -> list[Panel]:
    requests = "streamcrawl_fetcher_requests_total"
    return [
        timeseries(
            "Fetches by status class",
            [target(f"sum by (status_class) (rate({requests}[{RATE}]))", "{{status_class}}")],
            "reqps",
        ),
        timeseries(
            "Fetches by outcome",
            [target(f"sum by (outcome) (rate({requests}[{RATE}]))", "{{outcome}}")],
            "reqps",
        ),
        timeseries("Fetch latency", quantiles("streamcrawl_fetcher_request_duration_seconds"), "s"),
        timeseries(
            "Bytes downloaded",
            [target(f"sum(rate(streamcrawl_fetcher_response_bytes_total[{RATE}]))", "bytes/s")],
            "Bps",
        ),
        timeseries(
            "Requests in flight and cookie jars",
            [
                target("sum(streamcrawl_fetcher_requests_in_flight)", "in flight"),
                target("sum(streamcrawl_fetcher_cookie_jars)", "cookie jars (--cookies)"),
            ],
        ),
        timeseries(
            "Robots denials, unreachable robots.txt, blocked addresses, proxy errors and expired "
            "leases",
            [
                target(f"sum(rate(streamcrawl_fetcher_robots_denied_total[{RATE}]))", "robots"),
                target(
                    f"sum(rate(streamcrawl_fetcher_robots_unreachable_total[{RATE}]))",
                    "robots.txt unreachable",
                ),
                target(
                    f"sum(rate(streamcrawl_fetcher_blocked_addresses_total[{RATE}]))", "blocked"
                ),
                target(
                    f"sum(rate(streamcrawl_fetcher_proxy_errors_total[{RATE}]))", "proxy errors"
                ),
                target(f"sum(rate(streamcrawl_fetcher_leases_expired_total[{RATE}]))", "expired"),
            ],
            "reqps",
        ),
        timeseries(
            "Per-host politeness wait",
            quantiles("streamcrawl_fetcher_politeness_wait_seconds"),
            "s",
        ),
    ]


def frontier_row() -> list[Panel]:
    def counter_rate(name: str, legend: str) -> dict[str, Any]:
        return target(f"sum(rate(streamcrawl_frontier_{name}_total[{RATE}]))", legend)

    return [
        timeseries(
            "URLs discovered, admitted, duplicate",
            [
                counter_rate("urls_discovered", "discovered"),
                counter_rate("urls_admitted", "admitted"),
                counter_rate("urls_duplicate", "duplicate"),
            ],
            "reqps",
        ),
        timeseries(
            "URLs out of scope by reason",
            [
                target(
                    f"sum by (reason) (rate(streamcrawl_frontier_urls_out_of_scope_total[{RATE}]))",
                    "{{reason}}",
                )
            ],
            "reqps",
        ),
        timeseries(
            "Queued URLs and open leases",
            [
                target("sum(streamcrawl_frontier_urls_queued)", "queued"),
                target("sum(streamcrawl_frontier_leases_open)", "leased"),
            ],
        ),
        timeseries(
            "Released, retried, dead; host holds",
            [
                counter_rate("urls_released", "released"),
                counter_rate("urls_retried", "retried"),
                counter_rate("urls_dead", "dead"),
                counter_rate("host_holds", "host holds"),
            ],
            "reqps",
        ),
        timeseries(
            "Hosts ready, throttled and held",
            [
                target("sum(streamcrawl_frontier_hosts_ready)", "ready"),
                target("sum(streamcrawl_frontier_hosts_throttled)", "throttled"),
                target("sum(streamcrawl_frontier_hosts_held)", "held (Retry-After, robots.txt)"),
            ],
        ),
        timeseries(
            "Oldest ready URL age",
            [
                target(
                    "max by (instance) (streamcrawl_frontier_oldest_ready_url_age_seconds)",
                    "{{instance}}",
                )
            ],
            "s",
        ),
        timeseries(
            "Messages delivered again, counted once",
            [
                target(
                    f"sum by (kind) (rate(streamcrawl_frontier_messages_repeated_total[{RATE}]))",
                    "{{kind}}",
                )
            ],
            "reqps",
        ),
        timeseries(
            "Recrawls: page changed or unchanged",
            [
                target(
                    f"sum by (result) (rate(streamcrawl_frontier_recrawls_total[{RATE}]))",
                    "{{result}}",
                )
            ],
            "reqps",
        ),
    ]


def parser_row() -> list[Panel]:
    return [
        timeseries(
            "Pages parsed by status",
            [
                target(
                    f"sum by (status) (rate(streamcrawl_parser_pages_total[{RATE}]))", "{{status}}"
                )
            ],
            "reqps",
        ),
        timeseries(
            "Links by type and position, and requisites",
            [
                target(
                    f"sum by (link_type, position) (rate(streamcrawl_parser_links_total[{RATE}]))",
                    "{{link_type}} {{position}}",
                ),
                target(
                    f"sum(rate(streamcrawl_parser_requisites_total[{RATE}]))",
                    "requisites (--page-requisites)",
                ),
            ],
            "reqps",
        ),
        timeseries("Parse time", quantiles("streamcrawl_parser_parse_seconds"), "s"),
        timeseries(
            "Items extracted, by fields matched",
            [
                target(
                    f"sum by (fields) (rate(streamcrawl_parser_items_total[{RATE}]))", "{{fields}}"
                )
            ],
            "reqps",
        ),
    ]


def linkgraph_row() -> list[Panel]:
    return [
        timeseries(
            "Link graph size",
            [
                target("sum(streamcrawl_linkgraph_edges)", "edges"),
                target("sum(streamcrawl_linkgraph_nodes)", "nodes"),
            ],
        ),
        timeseries(
            "Index bytes",
            [target("sum by (index) (streamcrawl_linkgraph_index_bytes)", "{{index}}")],
            "bytes",
        ),
        timeseries(
            "Edges upserted and scores published",
            [
                target(f"sum(rate(streamcrawl_linkgraph_edges_upserted_total[{RATE}]))", "edges"),
                target(
                    f"sum(rate(streamcrawl_linkgraph_scores_published_total[{RATE}]))", "scores"
                ),
            ],
            "reqps",
        ),
        timeseries(
            "Ranking duration",
            quantiles("streamcrawl_linkgraph_ranking_duration_seconds"),
            "s",
        ),
        timeseries(
            "Ranking iterations",
            [target("max(streamcrawl_linkgraph_ranking_iterations)", "iterations")],
        ),
        timeseries(
            "Ranker graph memory",
            [target("max(streamcrawl_linkgraph_ranker_graph_bytes)", "held")],
            "bytes",
        ),
    ]


def storage_row() -> list[Panel]:
    def counter_rate(name: str, legend: str) -> dict[str, Any]:
        return target(f"sum(rate(streamcrawl_storage_{name}_total[{RATE}]))", legend)

    return [
        timeseries(
            "Pages stored and unchanged",
            [
                counter_rate("pages_stored", "stored"),
                counter_rate("pages_unchanged", "unchanged"),
            ],
            "reqps",
        ),
        timeseries(
            "Bytes and blobs written",
            [counter_rate("bytes_written", "bytes/s"), counter_rate("blobs_written", "blobs/s")],
        ),
    ]


def progress_row() -> list[Panel]:
    return [
        timeseries(
            "Crawl progress: fetched per crawl",
            [
                target(
                    'sum by (crawl_id) (streamcrawl_frontier_crawl_urls{counter="fetched"})',
                    "{{crawl_id}}",
                )
            ],
        ),
        timeseries(
            "Crawl progress: queued and leased per crawl",
            [
                target(
                    "sum by (crawl_id, counter) "
                    '(streamcrawl_frontier_crawl_urls{counter=~"queued|leased"})',
                    "{{crawl_id}} {{counter}}",
                )
            ],
        ),
        stat("Crawls running", "count(count by (crawl_id) (streamcrawl_frontier_crawl_urls))"),
    ]


def overview() -> dict[str, Any]:
    rows = [
        ("Stages: throughput, lag, dead letters", stages_row()),
        ("Crawl progress", progress_row()),
        ("Fetcher", fetcher_row()),
        ("Frontier", frontier_row()),
        ("Parser", parser_row()),
        ("Link graph", linkgraph_row()),
        ("Storage", storage_row()),
    ]
    return dashboard("streamcrawl-overview", "streamcrawl overview", numbered(layout(rows)), [])


CRAWL = 'crawl_id="$crawl_id"'


def crawl_counter(counter: str) -> str:
    return f'sum(streamcrawl_frontier_crawl_urls{{{CRAWL},counter="{counter}"}})'


def per_crawl() -> dict[str, Any]:
    counters = ("discovered", "admitted", "queued", "leased", "fetched", "failed", "dead")
    stats = [stat(counter.capitalize(), crawl_counter(counter)) for counter in counters]
    stats.append(
        stat(
            "Fetched of admitted",
            f"{crawl_counter('fetched')} / {crawl_counter('admitted')}",
            "percentunit",
        )
    )
    progress = [
        timeseries(
            "Queued and leased",
            [
                target(
                    "sum by (counter) "
                    f'(streamcrawl_frontier_crawl_urls{{{CRAWL},counter=~"queued|leased"}})',
                    "{{counter}}",
                )
            ],
        ),
        timeseries(
            "Fetch rate",
            [
                target(
                    "sum(deriv(streamcrawl_frontier_crawl_urls"
                    f'{{{CRAWL},counter="fetched"}}[{RATE}]))',
                    "fetched/s",
                )
            ],
            "reqps",
        ),
        timeseries(
            "Discovered, admitted, fetched",
            [
                target(
                    "sum by (counter) (streamcrawl_frontier_crawl_urls"
                    f'{{{CRAWL},counter=~"discovered|admitted|fetched"}})',
                    "{{counter}}",
                )
            ],
        ),
        timeseries(
            "Failed and dead",
            [
                target(
                    "sum by (counter) (streamcrawl_frontier_crawl_urls"
                    f'{{{CRAWL},counter=~"failed|dead"}})',
                    "{{counter}}",
                )
            ],
        ),
        timeseries(
            "Recrawls: page changed or unchanged",
            [
                target(
                    "sum by (counter) (deriv(streamcrawl_frontier_crawl_urls"
                    f'{{{CRAWL},counter=~"changed|unchanged"}}[{RATE}]))',
                    "{{counter}}",
                )
            ],
            "reqps",
        ),
    ]
    context = [fetcher_row()[0], fetcher_row()[2], frontier_row()[4]]
    for panel in context:
        panel["title"] += " (all crawls)"
    rows = [
        ("Crawl $crawl_id", stats),
        ("Progress", progress),
        ("Shared by every crawl", context),
    ]
    variable = {
        "name": "crawl_id",
        "label": "crawl",
        "type": "query",
        "datasource": DATASOURCE,
        "definition": "label_values(streamcrawl_frontier_crawl_urls, crawl_id)",
        "query": {
            "query": "label_values(streamcrawl_frontier_crawl_urls, crawl_id)",
            "refId": "crawl_id",
        },
        "refresh": 2,
        "includeAll": False,
        "multi": False,
        "sort": 1,
        "current": {},
        "options": [],
    }
    panels = layout(rows[:1], width=3, height=4) + layout(rows[1:], y=5)
    return dashboard("streamcrawl-crawl", "streamcrawl crawl", numbered(panels), [variable])


DASHBOARDS = {"overview.json": overview, "crawl.json": per_crawl}


def render(name: str) -> str:
    return json.dumps(DASHBOARDS[name](), indent=2) + "\n"


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for name in DASHBOARDS:
        (OUT / name).write_text(render(name))
        sys.stdout.write(f"wrote {OUT / name}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
