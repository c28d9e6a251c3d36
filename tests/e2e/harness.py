"""The end-to-end harness: a generated site, every service as its own process, one deployment.

An :class:`EndToEnd` owns a topic prefix on a broker, the site server and a `streamcrawl.stack`
Stack (the same code `streamcrawl up` runs). It seeds a crawl, waits for the frontier to mark it
done (DESIGN section 3, step 8, read from `crawls` as the CLI does), and reads back what the
services produced: outcomes (URL, depth, kind), the edges on `links`, and, when those services are
built, the link graph's and storage's HTTP APIs. Every wait has a deadline.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from schemas import links, members, outcomes
from schemas.registry import ALL_TOPICS
from schemas.seeds import CrawlRequest
from schemas.serde import decode
from streamcrawl.kafka import table_consumer_config
from streamcrawl.membership import is_live
from streamcrawl.stack import NOT_BUILT_EXIT, Stack
from streamcrawl.table import TopicTable
from streamcrawl.testsite.process import SiteProcess
from streamcrawl.watch import CrawlView, CrawlWatcher
from tests.support import REPO, Deployment

FAST_TIMERS = {
    "STREAMCRAWL_FRONTIER__RETRY_BASE_MS": "100",
    "STREAMCRAWL_FRONTIER__RETRY_CAP_MS": "400",
    "STREAMCRAWL_FRONTIER__PROGRESS_INTERVAL_MS": "300",
}
EdgeFields = tuple[str, str, str, str, tuple[str, ...], str]
"""to_url, anchor_text, context_window, link_type, rel, position."""


SiteShape = tuple[int, int, int, int]
"""pages, hosts, levels, seed: what `streamcrawl.testsite.generate_site` builds the site from."""


class GaveUpError(TimeoutError):
    """A wait ended early because its give-up condition held."""


def edge_fields(edge: Mapping[str, Any]) -> EdgeFields:
    return (
        str(edge["to_url"]),
        str(edge.get("anchor_text", "")),
        str(edge.get("context_window", "")),
        str(edge["link_type"]),
        tuple(edge.get("rel", ())),
        str(edge.get("position", "CONTENT")),
    )


@dataclass
class EndToEnd:
    bootstrap: str
    root: Path
    shape: SiteShape
    partitions: int = 2
    scale: dict[str, int] = field(default_factory=dict)
    role_env: dict[str, dict[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.deployment = Deployment(self.bootstrap, self.root, partitions=self.partitions)
        env = self.deployment.env("site")
        self.server = SiteProcess(*self.shape, work_dir=self.root / "site", env=env)
        self.graph = self.server.graph
        role_env = {role: dict(env) for role, env in self.role_env.items()}
        role_env.setdefault("frontier", {}).update(FAST_TIMERS)
        env = self.deployment.env("e2e")
        self.stack = Stack(env, self.root / "logs", role_env=role_env, cwd=REPO)
        self.restarted: list[str] = []

    def start(self) -> EndToEnd:
        self.deployment.create(ALL_TOPICS)
        self.server.start()
        self.stack.start(self.scale, allow_private_networks=True)
        return self

    def stop(self) -> None:
        self.stack.stop()
        self.server.stop()

    def built(self, role: str) -> bool:
        """Whether the role's service runs: False when it exited saying it is not built yet."""
        return all(i.process.poll() != NOT_BUILT_EXIT for i in self.stack.live(role))

    # ----- a crawl ----------------------------------------------------------------------------

    def seed(self, **options: Any) -> CrawlRequest:
        request = CrawlRequest(seeds=[self.server.site.seed_url], **options)
        self.deployment.publish_crawl(request)
        return request

    def wait_done(
        self,
        crawl_id: str,
        timeout_s: float,
        while_waiting: Callable[[CrawlView], None] = print,
        *,
        supervise: bool = False,
        give_up: Callable[[], bool] | None = None,
    ) -> CrawlView:
        """Until the crawl is done. `supervise` restarts instances that exit with an error (as
        `streamcrawl up` does); `give_up` ends the wait early with GaveUpError when it says so."""
        deadline = time.monotonic() + timeout_s
        with CrawlWatcher(self.deployment.settings("e2e-watch")) as watcher:
            while True:
                view = watcher.view(crawl_id)
                if view.status == "done":
                    return view
                if time.monotonic() > deadline:
                    while_waiting(view)
                    self.dump_logs()
                    raise TimeoutError(f"crawl {crawl_id} not done in {timeout_s}s: {view}")
                failed = self.stack.failed()
                if failed and not supervise:
                    raise AssertionError(
                        "\n".join(f"{i.instance_id} exited:\n{i.log_tail()}" for i in failed)
                    )
                self.restarted.extend(self.stack.restart_failed())
                if give_up is not None and give_up():
                    self.dump_logs()
                    raise GaveUpError(f"crawl {crawl_id} abandoned: {view}")
                time.sleep(0.2)

    def dump_logs(self, lines: int = 25) -> None:
        for instance in self.stack.live():
            print(f"--- {instance.instance_id} (exit {instance.process.poll()})")
            print(instance.log_tail(lines))

    # ----- what the services produced ---------------------------------------------------------

    def read_topic(self, suffix: str) -> list[bytes]:
        """Every value on a topic, from the beginning to the high watermark at call time."""
        return read_to_end(self.bootstrap, self.deployment.topic(suffix))

    def outcomes(self, crawl_id: str) -> list[outcomes.FetchOutcome]:
        found = [decode(outcomes.FetchOutcome, raw) for raw in self.read_topic("outcomes")]
        return [outcome for outcome in found if outcome.crawl_id == crawl_id]

    def link_edges(self, crawl_id: str) -> dict[str, set[EdgeFields]]:
        """The edges on `links` by source URL (parts joined, repeats merged)."""
        edges: dict[str, set[EdgeFields]] = {}
        for raw in self.read_topic("links"):
            page_links = decode(links.PageLinks, raw)
            if page_links.crawl_id != crawl_id:
                continue
            found = edges.setdefault(page_links.from_url, set())
            found.update(edge_fields(edge.model_dump()) for edge in page_links.edges)
        return edges

    def members_table(self) -> TopicTable[members.Member]:
        return TopicTable(
            table_consumer_config(self.deployment.settings("e2e-members")),
            self.deployment.topic("members"),
            lambda raw: decode(members.Member, raw),
        )

    def wait_member(
        self, found: Callable[[members.Member], bool], timeout_s: float, describe: str
    ) -> members.Member:
        """The first live member of `members` that `found` accepts, waiting up to `timeout_s`."""
        table = self.members_table()
        table.start()
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                for member in table.snapshot().values():
                    if is_live(member) and found(member):
                        return member
                time.sleep(0.2)
        finally:
            table.stop()
        raise TimeoutError(f"{describe} not seen in members within {timeout_s}s")

    def wait_balanced(self, timeout_s: float = 60) -> None:
        """Until every instance of each role run several times holds partitions: all joined their
        groups, so no rebalance is left to move a partition mid-crawl (the pages in flight on it
        would be fetched again, as at-least-once delivery allows)."""
        for role, count in self.scale.items():
            if count < 2 or not self.built(role):
                continue
            for instance in self.stack.live(role):
                name = instance.instance_id
                self.wait_member(
                    lambda m, name=name: m.instance == name and bool(m.partitions),
                    timeout_s,
                    f"{name} holding partitions",
                )

    def live_members(self, role: str) -> list[members.Member]:
        """The live members of a role, as `members` holds them now."""
        table = self.members_table()
        table.start()
        try:
            table.wait_ready(30)
            return [m for m in table.snapshot().values() if m.role == role and is_live(m)]
        finally:
            table.stop()

    def wait_ready(self, instance_id: str, since_ms: int, timeout_s: float = 60) -> None:
        """Until `instance_id` published itself ready after `since_ms` (epoch milliseconds)."""
        role, _, _ = instance_id.rpartition("-")
        self.wait_member(
            lambda m: (
                m.role == role
                and m.instance == instance_id
                and m.ready
                and m.updated_at >= since_ms
                and bool(m.partitions)
            ),
            timeout_s,
            f"{instance_id} ready",
        )

    def api_address(self, role: str, timeout_s: float = 30) -> str:
        """A ready instance's API address from `members`."""
        member = self.wait_member(
            lambda m: m.role == role and bool(m.api_address), timeout_s, f"a {role} API"
        )
        return str(member.api_address)


def read_to_end(bootstrap: str, topic: str, timeout_s: float = 60) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"e2e-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        values: list[bytes] = []
        positions = {p: 0 for p in partitions}
        deadline = time.monotonic() + timeout_s
        while any(positions[p] < ends[p] for p in partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not read to its end in {timeout_s}s")
            for message in consumer.consume(1000, 0.5):
                value, partition, offset = message.value(), message.partition(), message.offset()
                if message.error() is None and partition is not None and offset is not None:
                    positions[partition] = offset + 1
                    if value is not None:
                        values.append(value)
        return values
    finally:
        consumer.close()


def get_json(address: str, path: str, **query: str | int) -> Any:
    url = f"http://{address}{path}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def graph_out_edges(address: str, url: str) -> set[EdgeFields]:
    """Every out-edge the link graph holds for `url`, following its cursors."""
    edges: set[EdgeFields] = set()
    cursor: str | None = None
    while True:
        query: dict[str, str | int] = {"url": url, "limit": 500}
        if cursor:
            query["cursor"] = cursor
        answer = get_json(address, "/v1/graph/out", **query)
        edges.update(edge_fields(edge) for edge in answer["edges"])
        cursor = answer.get("next_cursor")
        if not cursor:
            return edges
