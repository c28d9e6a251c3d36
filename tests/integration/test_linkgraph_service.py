"""The link graph as processes against a real broker: `links` in, indexes queried over HTTP equal to
the ground truth, two instances answering for each other's keys, an instance killed and rebuilt
from its changelog answering the same, the ranker publishing `scores`, and an in-link whose key
holds no ends dead-lettered."""

from __future__ import annotations

import csv
import json
import random
import shutil
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from confluent_kafka import Producer

from linkgraph.indexes import in_link_value, new_edge_value
from schemas import links_by_target, members
from schemas.deadletter import DeadLetter
from schemas.links import LinkEdge, PageLinks, PageMeta
from schemas.partitioning import partition_for_key
from schemas.registry import ALL_TOPICS
from schemas.scores import PageScore
from schemas.serde import decode, encode
from streamcrawl import graph_cli
from streamcrawl.kafka import table_consumer_config
from streamcrawl.membership import is_live
from streamcrawl.table import TopicTable
from tests.support import Deployment, ServiceProcess, TopicReader, produce_json, wait_for

pytestmark = pytest.mark.kafka

TYPES = ("INTERNAL", "EXTERNAL", "NOFOLLOW", "REDIRECT")
POSITIONS = ("NAV", "CONTENT", "FOOTER", "SIDEBAR")


def url(n: int) -> str:
    return f"https://site{n % 3}.example/p/{n}"


def generated(seed: int = 5, sources: int = 24) -> list[PageLinks]:
    rng = random.Random(seed)
    pages = []
    for s in range(sources):
        edges = [
            LinkEdge(
                to_url=url(t),
                anchor_text=rng.choice(("docs", "home", "", "pricing")),
                context_window=f"around {t}",
                link_type=rng.choice(TYPES),  # type: ignore[arg-type]
                position=rng.choice(POSITIONS),  # type: ignore[arg-type]
                discovered_at=5000 + s,
            )
            for t in rng.sample(range(sources + 10), rng.randint(1, 9))
        ]
        pages.append(
            PageLinks(
                crawl_id="c1",
                from_url=url(s),
                fetched_at=5000 + s,
                edges=edges,
                page=PageMeta(status=200, title=f"page {s}"),
            )
        )
    return pages


_KNOWN: dict[str, list[str]] = {}


def api(deployment: Deployment, path: str, **params: str) -> tuple[int, Any]:
    """Call the graph API as the CLI does; members are read again only when no address answers."""
    known = _KNOWN.get(deployment.prefix)
    try:
        if known is None:
            raise graph_cli.GraphApiError("not looked up yet")
        status, body = graph_cli.call_any(known, path, params)
    except graph_cli.GraphApiError:
        known = _KNOWN[deployment.prefix] = graph_cli.graph_api_addresses(
            deployment.settings("test-cli")
        )
        status, body = graph_cli.call_any(known, path, params)
    return status, json.loads(body)


def addresses(deployment: Deployment, expected: int, at_least: bool = False) -> dict[str, str]:
    """instance -> API address of the live linkgraph members, once `expected` hold partitions."""
    found: dict[str, str] = {}

    def ready() -> bool:
        table: TopicTable[members.Member] = TopicTable(
            table_consumer_config(deployment.settings("test-members")),
            deployment.topic("members"),
            lambda raw: decode(members.Member, raw),
        )
        table.start()
        try:
            table.wait_ready(10)
            live = [
                m
                for m in table.snapshot().values()
                if m.role == "linkgraph" and is_live(m) and m.ready and m.partitions
            ]
        finally:
            table.stop()
        found.clear()
        found.update({m.instance: str(m.api_address) for m in live})
        return len(found) >= expected if at_least else len(found) == expected

    wait_for(ready, 90, f"{expected} ready linkgraph members")
    return found


def start(deployment: Deployment, instance: str, tmp_path: Path) -> ServiceProcess:
    env = deployment.env(instance, STREAMCRAWL_LINKGRAPH__RANKING_INTERVAL_S="3600")
    return ServiceProcess("linkgraph", env, tmp_path / f"{instance}.log").start()


def indexed(deployment: Deployment, pages: list[PageLinks]) -> None:
    addresses(deployment, 1, at_least=True)
    in_degree = Counter(e.to_url for p in pages for e in p.edges)
    last = max(in_degree, key=lambda u: (in_degree[u], u))

    def done() -> bool:
        status, answer = api(deployment, "/v1/graph/node", url=last)
        return status == 200 and answer["in_degree"] == in_degree[last]

    wait_for(done, 90, "the graph indexed")


def ground_truth_answers(deployment: Deployment, pages: list[PageLinks]) -> dict[str, Any]:
    answers = {}
    urls = {p.from_url for p in pages} | {e.to_url for p in pages for e in p.edges}
    for u in sorted(urls):
        for kind in ("out", "in", "anchors", "node"):
            status, answer = api(
                deployment,
                f"/v1/graph/{kind}",
                url=u,
                **({"limit": "1000"} if kind in ("out", "in") else {}),
            )
            answers[f"{kind} {u}"] = (status, answer)
    return answers


@pytest.fixture
def deployment(kafka_bootstrap: str, tmp_path: Path) -> Deployment:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    deployment.create(ALL_TOPICS)
    return deployment


@pytest.fixture
def processes() -> Iterator[list[ServiceProcess]]:
    started: list[ServiceProcess] = []
    yield started
    for process in started:
        process.kill()


def produce_links(deployment: Deployment, pages: list[PageLinks]) -> None:
    produce_json(
        deployment.bootstrap,
        deployment.topic("links"),
        [(p.from_url, encode(p)) for p in pages],
        raw=True,
    )


def test_indexes_through_the_broker_equal_the_ground_truth_and_the_ranker_publishes(
    deployment: Deployment, processes: list[ServiceProcess], tmp_path: Path
) -> None:
    processes.append(start(deployment, "lg-a", tmp_path))
    pages = generated()
    produce_links(deployment, pages)
    indexed(deployment, pages)
    for page in pages:
        status, answer = api(deployment, "/v1/graph/out", url=page.from_url, limit="1000")
        assert status == 200
        got = {e["to_url"]: e for e in answer["edges"]}
        assert set(got) == {e.to_url for e in page.edges}
        for e in page.edges:
            assert got[e.to_url] == {
                "from_url": page.from_url,
                "to_url": e.to_url,
                "anchor_text": e.anchor_text,
                "context_window": e.context_window,
                "link_type": e.link_type,
                "position": e.position,
                "discovered_at": e.discovered_at,
                "last_seen_at": page.fetched_at,
                "rel": [],
                "gone": False,
            }
    target = Counter(e.to_url for p in pages for e in p.edges).most_common(1)[0][0]
    status, answer = api(deployment, "/v1/graph/in", url=target, limit="1000")
    assert {e["from_url"] for e in answer["edges"]} == {
        p.from_url for p in pages if any(e.to_url == target for e in p.edges)
    }
    status, answer = api(deployment, "/v1/graph/anchors", url=target)
    texts = Counter(e.anchor_text for p in pages for e in p.edges if e.to_url == target)
    assert {a["text"]: a["count"] for a in answer["anchors"]} == {
        t: n for t, n in texts.items() if t
    }
    assert api(deployment, "/v1/graph/node", url="https://nowhere.example/")[0] == 404
    assert api(deployment, "/v1/graph/out", url="ftp://x")[0] == 400

    # The ranker: rank on demand, top pages, and changed scores on `scores` keyed by URL.
    status, summary = graph_cli.call(
        graph_cli.graph_api_address(deployment.settings("cli")), "/v1/graph/rank", {}, "POST"
    )
    assert status == 200, summary
    ranked = json.loads(summary)
    assert ranked["converged"] and ranked["nodes"] == len(
        {p.from_url for p in pages} | {e.to_url for p in pages for e in p.edges}
    )
    status, top = api(deployment, "/v1/graph/top", limit="5")
    assert status == 200 and len(top["pages"]) == 5
    scores = [p["score"] for p in top["pages"]]
    assert scores == sorted(scores, reverse=True)
    reader = TopicReader(deployment.bootstrap, deployment.topic("scores"))
    reader.read_until(lambda ms: len(ms) >= ranked["nodes"], 60, "every node's first score")
    by_url = {}
    for message in reader.messages:
        score = decode(PageScore, message.value())
        assert message.key().decode() == score.url
        assert message.partition() == partition_for_key(score.host.encode(), 2)
        by_url[score.url] = score.pagerank
    reader.close()
    assert sum(by_url.values()) == pytest.approx(1.0, abs=1e-6)
    assert np.isclose(by_url[top["pages"][0]["url"]], top["pages"][0]["score"])
    for view in ("orphans", "domains", "farms", "syndication", "important"):
        assert api(deployment, f"/v1/graph/{view}")[0] == 200
    check_metrics(deployment, pages)
    check_cli(deployment, pages, target, tmp_path)


def check_metrics(deployment: Deployment, pages: list[PageLinks]) -> None:
    table: TopicTable[members.Member] = TopicTable(
        table_consumer_config(deployment.settings("test-metrics")),
        deployment.topic("members"),
        lambda raw: decode(members.Member, raw),
    )
    table.start()
    table.wait_ready(10)
    side = next(m.http_address for m in table.snapshot().values() if m.role == "linkgraph")
    table.stop()
    edges = sum(len(p.edges) for p in pages)

    def metrics() -> dict[str, float]:
        with urllib.request.urlopen(f"http://{side}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        return {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("streamcrawl_linkgraph_")
        }

    wait_for(lambda: metrics().get("streamcrawl_linkgraph_edges") == edges, 30, "edges gauge")
    found = metrics()
    assert found["streamcrawl_linkgraph_edges_upserted_total"] == edges
    assert found["streamcrawl_linkgraph_nodes"] > 0
    for index in ("forward", "reverse", "anchors", "nodes"):
        assert found[f'streamcrawl_linkgraph_index_bytes{{index="{index}"}}'] > 0
    assert found["streamcrawl_linkgraph_ranking_iterations"] >= 1
    assert found["streamcrawl_linkgraph_ranking_duration_seconds_count"] >= 1
    assert found["streamcrawl_linkgraph_scores_published_total"] >= 1


def cli(deployment: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamcrawl.cli", "graph", *args],
        env=deployment.env("cli"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def check_cli(deployment: Deployment, pages: list[PageLinks], target: str, tmp_path: Path) -> None:
    page = pages[0]
    answer = cli(deployment, "out", page.from_url, "--json")
    assert answer.returncode == 0, answer.stderr
    assert {e["to_url"] for e in json.loads(answer.stdout)["edges"]} == {
        e.to_url for e in page.edges
    }
    listing = cli(deployment, "in", target)
    assert listing.returncode == 0, listing.stderr
    for source in (p.from_url for p in pages if any(e.to_url == target for e in p.edges)):
        assert source in listing.stdout
    top = cli(deployment, "top", "--limit", "3")
    assert top.returncode == 0 and len(top.stdout.strip().splitlines()) == 3
    missing = cli(deployment, "node", "https://nowhere.example/")
    assert missing.returncode == 1 and "unknown URL" in missing.stderr
    out = tmp_path / "edges.csv"
    exported = cli(deployment, "export", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["src"], r["dst"]) for r in rows} == {
        (p.from_url, e.to_url) for p in pages for e in p.edges
    }
    by_edge = {(r["src"], r["dst"]): r for r in rows}
    first = page.edges[0]
    row = by_edge[(page.from_url, first.to_url)]
    assert (row["anchor_text"], row["link_type"], row["position"], row["gone"]) == (
        first.anchor_text,
        first.link_type,
        first.position,
        "false",
    )
    assert int(row["last_seen_at"]) == page.fetched_at


def test_two_instances_answer_for_keys_the_other_owns(
    deployment: Deployment, processes: list[ServiceProcess], tmp_path: Path
) -> None:
    processes.append(start(deployment, "lg-a", tmp_path))
    processes.append(start(deployment, "lg-b", tmp_path))
    found = addresses(deployment, 2)
    pages = generated(seed=9)
    produce_links(deployment, pages)
    indexed(deployment, pages)
    urls = sorted({p.from_url for p in pages} | {e.to_url for p in pages for e in p.edges})
    owners = {partition_for_key(u.encode(), 2) for u in urls}
    assert owners == {0, 1}, "the generated URLs cover both partitions"
    for u in urls:
        answers = []
        for address in found.values():
            for kind in ("out", "in", "anchors", "node"):
                status, body = graph_cli.call(address, f"/v1/graph/{kind}", {"url": u})
                answers.append((kind, status, json.loads(body)))
        half = len(answers) // 2
        assert answers[:half] == answers[half:], u
        assert all(status in (200, 404) for _, status, _ in answers)
    # Global views are proxied to the leading ranker from either instance.
    for address in found.values():
        status, body = graph_cli.call(address, "/v1/graph/rank", {}, "POST")
        assert status == 200, body


def test_a_killed_instance_rebuilt_from_its_changelog_answers_the_same(
    deployment: Deployment, processes: list[ServiceProcess], tmp_path: Path
) -> None:
    first = start(deployment, "lg-a", tmp_path)
    processes.append(first)
    pages = generated(seed=13, sources=16)
    produce_links(deployment, pages)
    indexed(deployment, pages)
    before = ground_truth_answers(deployment, pages)
    old_address = addresses(deployment, 1)["lg-a"]
    first.kill()
    shutil.rmtree(tmp_path / "state")  # nothing on disk: everything comes from the changelog
    processes.append(start(deployment, "lg-a", tmp_path))
    wait_for(lambda: addresses(deployment, 1)["lg-a"] != old_address, 90, "the restarted instance")
    assert ground_truth_answers(deployment, pages) == before


def test_an_in_link_whose_key_holds_no_ends_is_dead_lettered_and_the_next_applied(
    deployment: Deployment, processes: list[ServiceProcess], tmp_path: Path
) -> None:
    """The value leaves the edge's ends to the key: a key without them is the record's fault."""
    processes.append(start(deployment, "lg-a", tmp_path))
    addresses(deployment, 1)
    target, source = url(900), url(901)
    edge = LinkEdge(to_url=target, anchor_text="over here", link_type="INTERNAL", discovered_at=5)
    value = in_link_value(new_edge_value(edge, 9))
    topic = deployment.topic("links.by-target")
    partition = links_by_target.partition(target, deployment.partitions)
    producer = Producer({"bootstrap.servers": deployment.bootstrap})
    producer.produce(topic, key=target.encode(), value=value, partition=partition)
    good = links_by_target.key(target, source).encode()
    producer.produce(topic, key=good, value=value, partition=partition)
    assert producer.flush(30) == 0

    def applied() -> bool:
        status, answer = api(deployment, "/v1/graph/in", url=target)
        return status == 200 and [e["from_url"] for e in answer["edges"]] == [source]

    wait_for(applied, 60, "the good in-link indexed")
    status, anchors = api(deployment, "/v1/graph/anchors", url=target)
    assert status == 200 and [a["text"] for a in anchors["anchors"]] == ["over here"]
    dead = TopicReader(deployment.bootstrap, deployment.topic("deadletter"))
    dead.read_until(lambda messages: len(messages) >= 1, 30, "one dead letter")
    letter = decode(DeadLetter, dead.messages[0].value())
    assert (letter.topic, letter.partition, letter.offset) == (topic, partition, 0)
    assert "key" in letter.error and letter.stage == "linkgraph"
