"""A short real crawl watched by a real Prometheus: what the dashboard and metrics tests inspect.

Every service runs as its own process (`streamcrawl.stack.Stack`, as `streamcrawl up` runs them)
on the session broker under a fresh topic prefix, each side server on a free port. Prometheus
scrapes them every second through a file_sd target list that the shipped tool
(deploy/prometheus/file_sd.py) writes from the `members` topic, with the shipped alert rules.
The crawl is of the demo site (`streamcrawl.demo`), and one malformed record is put on each
stage's input so the dead-letter series have something to show. Roles whose service is not
built on this branch exit with `NOT_BUILT_EXIT` and are reported, not required.
"""

from __future__ import annotations

import calendar
import json
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas import fetch, links, members, pages, seeds
from schemas.seeds import CrawlRequest
from schemas.serde import decode, encode
from streamcrawl.demo import DemoSite
from streamcrawl.kafka import KafkaProducer, table_consumer_config
from streamcrawl.membership import is_live
from streamcrawl.settings import Settings
from streamcrawl.stack import ROLES, Stack
from streamcrawl.table import TopicTable
from streamcrawl.topics import create_topics, topic_name
from streamcrawl.watch import CrawlWatcher
from tests.deploy.prometheus_server import PrometheusServer
from tests.deploy.tools import PROMETHEUS_DIR
from tests.support import Deployment, wait_for

SCRAPE_INTERVAL_S = 1.0
STACK_READY_S = 150.0
CRAWL_TIMEOUT_S = 150.0
MALFORMED = b"\x00 not a record"
MALFORMED_INPUTS = {
    "frontier": seeds.TOPIC,
    "fetcher": fetch.TOPIC,
    "parser": pages.TOPIC,
    "storage": pages.TOPIC,
    "linkgraph": links.TOPIC,
}
"""One input per role to put a malformed record on; `pages` feeds both parser and storage."""


@dataclass
class ObservedCrawl:
    prometheus: PrometheusServer
    crawl_id: str
    started_at: float
    finished_at: float
    members: dict[str, list[members.Member]]
    """Live members of the running roles, by role."""
    not_built: list[str]
    metrics_text: dict[str, str] = field(default_factory=dict)
    """Each instance's /metrics after the crawl, by instance id."""
    phases: dict[str, float] = field(default_factory=dict)
    """When each step ended (time.time()), for the report of where the time went."""

    @property
    def running(self) -> list[str]:
        return sorted(self.members)


def _members_table(settings: Settings) -> TopicTable[members.Member]:
    return TopicTable(
        table_consumer_config(settings),
        topic_name(settings, members.TOPIC),
        lambda raw: decode(members.Member, raw),
    )


def _live_members(table: TopicTable[members.Member]) -> dict[str, list[members.Member]]:
    """Ready members of the stage roles; other roles (the link graph's ranker) publish an API
    address, not a side server."""
    by_role: dict[str, list[members.Member]] = {}
    for member in table.snapshot().values():
        if member.role in ROLES and is_live(member) and member.ready:
            by_role.setdefault(member.role, []).append(member)
    return by_role


def _wait_for_stack(stack: Stack, table: TopicTable[members.Member]) -> None:
    def settled() -> bool:
        if stack.failed():
            failed = stack.failed()[0]
            raise AssertionError(
                f"{failed.instance_id} exited {failed.process.poll()}:\n"
                + failed.log_path.read_text(errors="replace")[-3000:]
            )
        live = _live_members(table)
        return all(role in live or role in stack.not_built() for role in ROLES)

    wait_for(settled, STACK_READY_S, "every built role ready in members")


def scrape_config(targets_file: Path) -> dict[str, object]:
    return {
        "global": {
            "scrape_interval": f"{SCRAPE_INTERVAL_S:g}s",
            "scrape_timeout": f"{SCRAPE_INTERVAL_S:g}s",
            "evaluation_interval": f"{SCRAPE_INTERVAL_S:g}s",
        },
        "rule_files": [str(PROMETHEUS_DIR / "alerts.yml")],
        "scrape_configs": [
            {
                "job_name": "streamcrawl",
                "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "1s"}],
            }
        ],
    }


def write_targets(path: Path, env: dict[str, str]) -> list[Any]:
    """The shipped file_sd tool (deploy/prometheus/file_sd.py) run once on this deployment."""
    completed = subprocess.run(
        [sys.executable, str(PROMETHEUS_DIR / "file_sd.py"), "--once", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if completed.returncode != 0:
        raise AssertionError(f"file_sd.py failed: {completed.stdout}{completed.stderr}")
    groups: list[Any] = json.loads(path.read_text())
    return groups


def _all_targets_up(prometheus: PrometheusServer, count: int) -> bool:
    targets = prometheus.targets()
    return len(targets) == count and all(t["health"] == "up" for t in targets)


def _scraped_since(prometheus: PrometheusServer, moment: float) -> bool:
    """Every target scraped at least twice after `moment` (its final values are in the TSDB)."""
    cutoff = moment + 2 * SCRAPE_INTERVAL_S
    for target in prometheus.targets():
        scraped = target["lastScrape"]
        # RFC 3339 in UTC with nanoseconds; whole seconds are enough against a 1 s interval.
        stamp = calendar.timegm(time.strptime(scraped[:19], "%Y-%m-%dT%H:%M:%S"))
        if target["health"] != "up" or stamp < cutoff:
            return False
    return True


def _publish(settings: Settings, records: list[tuple[str, str, bytes]]) -> None:
    producer = KafkaProducer.from_settings(settings)
    for topic, key, value in records:
        producer.produce(topic, key, value)
    producer.flush(30)
    producer.close()


def _malformed_records(settings: Settings, roles: list[str]) -> list[tuple[str, str, bytes]]:
    inputs = sorted({MALFORMED_INPUTS[role].suffix for role in roles})
    return [
        (f"{settings.kafka.topic_prefix}{suffix}", "malformed.invalid", MALFORMED)
        for suffix in inputs
    ]


def observe_crawl(bootstrap: str, root: Path, exits: ExitStack) -> ObservedCrawl:
    """Run everything above; `exits` stops the processes (the caller's fixture closes it)."""
    began = time.time()
    deployment = Deployment(bootstrap, root, partitions=2)
    settings = deployment.settings("observer")
    create_topics(settings)
    env = deployment.env("unused", STREAMCRAWL_HTTP__PORT="0")
    env["STREAMCRAWL_STORAGE__ROOT"] = str(root / "storage")
    env["STREAMCRAWL_LINKGRAPH__RANKING_INTERVAL_S"] = "2"  # ranks within the short crawl
    env.pop("STREAMCRAWL_INSTANCE_ID")
    site = DemoSite().start()
    exits.callback(site.stop)
    stack = Stack(env, root / "logs")
    exits.callback(stack.stop)
    stack.start({}, allow_private_networks=True)
    table = _members_table(settings)
    table.start()
    exits.callback(table.stop)
    _wait_for_stack(stack, table)
    phases = {"stack ready": time.time()}
    by_role = _live_members(table)

    targets_file = root / "prometheus" / "targets.json"
    targets_file.parent.mkdir(parents=True)
    groups = write_targets(targets_file, env)
    count = sum(len(m) for m in by_role.values())
    if len(groups) != count:
        raise AssertionError(f"file_sd wrote {groups} for {count} ready members")
    prometheus = PrometheusServer(root / "prometheus", scrape_config(targets_file)).start()
    exits.callback(prometheus.stop)
    try:
        wait_for(lambda: _all_targets_up(prometheus, count), 60, f"{count} targets up")
    except TimeoutError as error:
        health = [(t["labels"], t["health"], t["lastError"]) for t in prometheus.targets()]
        raise AssertionError(f"{error}: {health}") from error

    started_at = phases["targets up"] = time.time()
    request = CrawlRequest(
        seeds=[site.seed_url],
        max_depth=3,
        politeness_delay_ms=100,
        extract={"title": "title::text", "heading": "h1::text"},
    )
    seed = (topic_name(settings, seeds.TOPIC), seeds.key(request.crawl_id), encode(request))
    _publish(settings, [*_malformed_records(settings, sorted(by_role)), seed])
    with CrawlWatcher(settings) as watcher:
        view = watcher.follow(request.crawl_id, lambda line: None, timeout_s=CRAWL_TIMEOUT_S)
    if view.status != "done":
        raise AssertionError(f"crawl not done in {CRAWL_TIMEOUT_S}s: {view}")
    done_at = phases["crawl done"] = time.time()
    wait_for(lambda: _scraped_since(prometheus, done_at), 30, "scrapes after the crawl")
    phases["scraped"] = time.time()
    texts = {
        member.instance: _get(f"http://{member.http_address}/metrics")
        for role_members in by_role.values()
        for member in role_members
    }
    return ObservedCrawl(
        prometheus=prometheus,
        crawl_id=request.crawl_id,
        started_at=started_at,
        finished_at=time.time(),
        members=by_role,
        not_built=stack.not_built(),
        metrics_text=texts,
        phases={name: at - began for name, at in phases.items()},
    )


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        text: str = response.read().decode()
        return text
