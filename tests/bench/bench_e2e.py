"""Benchmark (`make bench`): the whole pipeline against a bare aiohttp + parsel loop, same run.

One generated site of at least 20,000 pages (`streamcrawl.testsite`, ``--hosts`` ports of
127.0.0.1, every page rendered before the first request) is served by a process of its own and
crawled twice, politeness off:

1. Bare (`tests/bench/bare_crawl.py`): one process, aiohttp and parsel, links into a set.
2. Pipeline: a local Kafka broker and one process of each service (frontier, fetcher, parser,
   link graph, storage; roles still exiting NOT_BUILT are left out), the crawl seeded at the home
   page with no depth limit, followed until the frontier marks it done. Services and broker run
   with the settings users get (`LoopSettings`' defaults, `LocalBroker`'s JVM flags), not the
   tests' quick-failover ones.

Measured: pages per second at the server (pages served / first to last arrival), CPU seconds per
page (bare: its process; pipeline: the services summed, from /proc, the broker apart), peak RSS of
each process (VmHWM), and, every second during the pipeline run, each stage's messages in and its
consumer lag (from its /metrics), which says where the time goes. Targets: pipeline pages/s >=
0.25 of bare, CPU per page <= 4x bare. Results go to ``tests/bench/RESULTS.md``. Not a test:
nothing asserts a duration.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from frontier.traps import check_traps
from linkgraph.routing import RANKER_ROLE
from schemas.registry import ALL_TOPICS
from schemas.seeds import CrawlRequest
from streamcrawl.apis import ServiceDirectory
from streamcrawl.broker import LocalBroker, default_libs_dir, free_ports
from streamcrawl.stack import Stack
from streamcrawl.testsite import reference_crawl
from streamcrawl.testsite.process import SiteProcess
from streamcrawl.topics import create_topics
from streamcrawl.watch import CrawlWatcher
from tests.bench.stage_metrics import (
    StageSampler,
    changelog_tables,
    dead_letter_reasons,
    proc_usage,
    topic_records,
)
from tests.support import REPO, Deployment

RESULTS = REPO / "tests" / "bench" / "RESULTS.md"
POLITENESS_OFF = {
    "STREAMCRAWL_FETCHER__POLITENESS__LATENCY_FACTOR": "0",
    "STREAMCRAWL_FETCHER__POLITENESS__PER_HOST_CONCURRENCY": "4",
    "STREAMCRAWL_FETCHER__POLITENESS__GLOBAL_CONCURRENCY": "64",
}


@dataclass
class RunResult:
    pages: int
    wall_s: float
    cpu_s: float
    rss_mib: dict[str, float] = field(default_factory=dict)
    cpu_by_process: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.wall_s if self.wall_s else 0.0

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.cpu_s / self.pages if self.pages else 0.0


def arrival_window(site: SiteProcess, since: int) -> tuple[int, float]:
    """Pages served after the first ``since`` requests, and their first-to-last arrival span."""
    requests = [r for r in site.snapshot()[since:] if r.path_qs != "/robots.txt"]
    if len(requests) < 2:
        return len(requests), 0.0
    return len(requests), requests[-1].at - requests[0].at


def run_bare(site: SiteProcess, concurrency: int, allowed: set[str], root: Path) -> RunResult:
    allow = root / "allowed-urls.txt"
    allow.write_text("\n".join(sorted(allowed)))
    command = [sys.executable, "-m", "tests.bench.bare_crawl", site.site.seed_url]
    completed = subprocess.run(
        [*command, "--allow", str(allow), "--concurrency", str(concurrency)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    )
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    return RunResult(
        pages=result["pages"],
        wall_s=result["wall_s"],
        cpu_s=result["cpu_s"],
        rss_mib={"bare": result["peak_rss_mib"]},
        cpu_by_process={"bare": result["cpu_s"]},
    )


def run_pipeline(
    bootstrap: str, site: SiteProcess, root: Path, partitions: int, sampler_out: list[str]
) -> RunResult:
    deployment = Deployment(bootstrap, root, partitions=partitions)
    env = deployment.env("bench")
    # The services run with the loop settings users get, not the tests' quick-failover ones
    # (a 50 ms poll and a 500 ms heartbeat cost 16-29 CPU ms per second per idle service).
    for name in [name for name in env if name.startswith("STREAMCRAWL_LOOP__")]:
        del env[name]
    env["STREAMCRAWL_LOG_LEVEL"] = "WARNING"
    env["STREAMCRAWL_STORAGE__ROOT"] = str(root / "storage")
    create_topics(deployment.settings(), ALL_TOPICS)
    role_env = {
        "fetcher": dict(POLITENESS_OFF),
        "frontier": {"STREAMCRAWL_FRONTIER__FETCHER_HOST_CONCURRENCY": "4"},
    }
    stack = Stack(env, root / "logs", role_env=role_env, cwd=root)
    stack.start({}, allow_private_networks=True)
    settings = deployment.settings("bench-watch")
    try:
        with ServiceDirectory(settings, ready_timeout_s=60) as directory:
            deadline = time.monotonic() + 180
            while True:
                running = {i.role for i in stack.live() if i.running}
                ready = {m.role for m in directory.live() if m.ready}
                if running and running <= ready:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"services not ready: running {running}, ready {ready}")
                time.sleep(0.5)
            members = directory.live()
        since = len(site.snapshot())
        request = CrawlRequest(
            seeds=[site.site.seed_url],
            max_depth=-1,
            same_domain="registered_domain",
            politeness_delay_ms=0,
            max_retries=1,
        )
        deployment.publish_crawl(request)
        # The services' own member records: the link graph's ranker publishes one more, under
        # the same instance id, whose address is the graph API's (no /metrics).
        sampler = StageSampler(
            {m.instance: m.http_address for m in members if m.role != RANKER_ROLE}
        )
        started = time.monotonic()
        with CrawlWatcher(settings) as watcher:
            while watcher.view(request.crawl_id).status != "done":
                if time.monotonic() - started > 3600:
                    raise TimeoutError("the pipeline crawl did not finish within an hour")
                sampler.sample()
                time.sleep(1.0)
        done_s = time.monotonic() - started
        usage = {i.instance_id: proc_usage(i.process.pid) for i in stack.live() if i.running}
        sampler_out.extend(sampler.report())
        sampler_out += ["", "Handler time per input topic (whole run):", ""]
        sampler_out.extend(sampler.handler_report(deployment.prefix))
        pages_fetched = max(1, len(site.snapshot()) - since)
        sampler_out += topic_report(bootstrap, deployment, pages_fetched)
    finally:
        stack.stop()
    pages, wall_s = arrival_window(site, since)
    return RunResult(
        pages=pages,
        wall_s=wall_s,
        cpu_s=sum(cpu for cpu, _ in usage.values()),
        rss_mib={name: rss for name, (_, rss) in usage.items()},
        cpu_by_process={name: cpu for name, (cpu, _) in usage.items()},
        notes=[
            f"seed to done {done_s:.1f} s (done is detected from two progress snapshots)",
            f"not built, left out: {', '.join(stack.not_built()) or 'none'}",
        ],
    )


def topic_report(bootstrap: str, deployment: Deployment, pages_fetched: int) -> list[str]:
    """Records written per topic, the changelogs' by state table, and the dead letters' reasons."""
    lines: list[str] = []
    records = topic_records(bootstrap, deployment.prefix)
    lines += ["", "Records written per topic:", ""]
    lines += ["| topic | records | per page served |", "|---|---:|---:|"]
    for topic, count in sorted(records.items(), key=lambda item: -item[1]):
        lines.append(f"| {topic} | {count} | {count / pages_fetched:.1f} |")
    lines += ["", "Changelog records by state table (puts / deletes):", ""]
    lines += ["| changelog | table | puts | deletes | per page served |"]
    lines += ["|---|---|---:|---:|---:|"]
    for topic in sorted(name for name in records if name.startswith("changelog.")):
        tables = changelog_tables(bootstrap, deployment.topic(topic))
        for table, (puts, deletes) in sorted(tables.items(), key=lambda item: -sum(item[1])):
            per_page = (puts + deletes) / pages_fetched
            lines.append(f"| {topic} | {table} | {puts} | {deletes} | {per_page:.1f} |")
    if records.get("deadletter"):
        lines += ["", "Dead letters by stage, source topic and reason:", ""]
        letters = dead_letter_reasons(bootstrap, deployment.topic("deadletter"))
        lines += [f"- {count} x {name}" for name, count in sorted(letters.items())]
    return lines


def write_results(
    args: argparse.Namespace,
    expected_pages: int,
    bare: RunResult,
    pipeline: RunResult,
    stages: list[str],
    broker_usage: tuple[float, float] | None,
) -> str:
    speed = pipeline.pages_per_s / bare.pages_per_s if bare.pages_per_s else 0.0
    cpu = pipeline.cpu_ms_per_page / bare.cpu_ms_per_page if bare.cpu_ms_per_page else 0.0
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        "# End-to-end benchmark results",
        "",
        f"`make bench` (`python -m tests.bench.bench_e2e`), run {when}"
        f" on {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end.",
        f"Site: {args.pages} pages requested of the generator, {args.hosts} hosts, {args.levels}"
        f" levels, seed {args.seed}; {expected_pages} URLs to fetch by the ground truth.",
        f"Politeness off; bare concurrency {args.concurrency}; the fetcher's global concurrency"
        f" {POLITENESS_OFF['STREAMCRAWL_FETCHER__POLITENESS__GLOBAL_CONCURRENCY']},"
        f" 4 per host; {args.partitions} partitions per topic.",
        "",
        "| run | pages served | first to last arrival (s) | pages/s | CPU s | CPU ms/page |",
        "|---|---:|---:|---:|---:|---:|",
        f"| bare aiohttp + parsel | {bare.pages} | {bare.wall_s:.1f} | {bare.pages_per_s:.1f} |"
        f" {bare.cpu_s:.1f} | {bare.cpu_ms_per_page:.2f} |",
        f"| pipeline (services summed) | {pipeline.pages} | {pipeline.wall_s:.1f} |"
        f" {pipeline.pages_per_s:.1f} | {pipeline.cpu_s:.1f} | {pipeline.cpu_ms_per_page:.2f} |",
        "",
        f"- pages/s, pipeline / bare: **{speed:.2f}** (target >= 0.25:"
        f" {'met' if speed >= 0.25 else 'NOT met'})",
        f"- CPU per page, pipeline / bare: **{cpu:.2f}x** (target <= 4x:"
        f" {'met' if cpu <= 4 else 'NOT met'})",
        "",
        "| process | CPU s | CPU ms/page | peak RSS (MiB) |",
        "|---|---:|---:|---:|",
    ]
    for name, seconds in sorted(pipeline.cpu_by_process.items()):
        per_page = 1000 * seconds / pipeline.pages if pipeline.pages else 0.0
        lines.append(f"| {name} | {seconds:.1f} | {per_page:.2f} | {pipeline.rss_mib[name]:.0f} |")
    lines.append(
        f"| bare | {bare.cpu_s:.1f} | {bare.cpu_ms_per_page:.2f} | {bare.rss_mib['bare']:.0f} |"
    )
    if broker_usage is not None:
        lines.append(
            f"| (broker JVM, not counted) | {broker_usage[0]:.1f} | | {broker_usage[1]:.0f} |"
        )
    lines += ["", "Per stage, scraped from /metrics every second during the pipeline run:", ""]
    lines += stages
    lines += ["", *[f"- {note}" for note in pipeline.notes], ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=21_000)
    parser.add_argument("--hosts", type=int, default=40)
    parser.add_argument("--levels", type=int, default=8)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        root = Path(tmp)
        port, controller_port = free_ports(2)
        broker = LocalBroker(root / "kafka", port, controller_port, default_libs_dir(), heap="1g")
        bootstrap = broker.start()
        env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMCRAWL_")}
        env["PYTHONPATH"] = str(REPO)
        site = SiteProcess(
            args.pages, args.hosts, args.levels, args.seed, root / "site", env, prerender=True
        )
        try:
            site.start()
            reference = reference_crawl(
                site.site, -1, max_retries=1, refuse=lambda url: check_traps(url) is not None
            )
            print(
                f"site served: {len(reference.fetched)} URLs to fetch; bare crawl ...", flush=True
            )
            bare = run_bare(site, args.concurrency, reference.fetched, root)
            print(f"bare: {bare.pages} pages at {bare.pages_per_s:.1f}/s; pipeline ...", flush=True)
            stages: list[str] = []
            pipeline = run_pipeline(bootstrap, site, root, args.partitions, stages)
            broker_pid = int(broker.pid_path.read_text()) if broker.pid_path.exists() else None
            broker_usage = proc_usage(broker_pid) if broker_pid else None
        finally:
            site.stop()
            broker.stop()
    report = write_results(args, len(reference.fetched), bare, pipeline, stages, broker_usage)
    args.results.write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
