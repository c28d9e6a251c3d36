"""The link graph as processes against a real broker: `links` in, every URL's out-links, in-links,
anchors and node over HTTP equal to the ground truth, from either of two instances; one ranker
between two instances, and the other ranking when it stops; rankings on demand publishing to
`scores` only the scores that moved; every `streamcrawl graph` command and both exports against
the ground truth; an instance killed and rebuilt from its changelog answering the same; and an
in-link whose key holds no ends dead-lettered."""

from __future__ import annotations

import csv
import json
import random
import shutil
import subprocess
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Message, Producer

from linkgraph.export import EDGE_COLUMNS, VERTEX_COLUMNS
from linkgraph.indexes import in_link_value, new_edge_value
from linkgraph.routing import RANKER_ROLE
from schemas import links_by_target, members
from schemas.deadletter import DeadLetter
from schemas.links import LinkEdge, PageLinks, PageMeta
from schemas.partitioning import partition_for_key
from schemas.registry import ALL_TOPICS
from schemas.scores import PageScore
from schemas.serde import decode, encode
from streamcrawl import graph_cli
from streamcrawl.kafka import table_consumer_config
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


def link_farm() -> list[PageLinks]:
    """farm.example: four pages sending 12 of their 13 links to site1.example (a link farm)."""
    pages = []
    for n in range(4):
        targets = [url(1 + 3 * ((3 * n + k) % 11)) for k in range(3)] + ([url(2)] if n == 0 else [])
        pages.append(
            PageLinks(
                crawl_id="c1",
                from_url=f"https://farm.example/{n}",
                fetched_at=6000 + n,
                edges=[
                    LinkEdge(
                        to_url=t, anchor_text="cheap", link_type="EXTERNAL", discovered_at=6000
                    )
                    for t in targets
                ],
            )
        )
    return pages


def refetched(page: PageLinks, new_target: str) -> PageLinks:
    """`page` fetched again later, every earlier link still there and one more."""
    at = page.fetched_at + 1000
    edge = LinkEdge(to_url=new_target, anchor_text="new", link_type="INTERNAL", discovered_at=at)
    return page.model_copy(update={"fetched_at": at, "edges": [*page.edges, edge]})


def domain(page_url: str) -> str:
    return page_url.split("/")[2]  # every host here is its own registered domain


class FedGraph:
    """The ground truth of the fetches produced to `links`: what each query should answer. A
    source's newest fetch holds its links (a refetch here keeps every earlier link)."""

    def __init__(self, fetches: list[PageLinks]) -> None:
        self.newest: dict[str, PageLinks] = {}
        self.first_seen: dict[str, int] = {}
        for page in fetches:
            if (
                page.from_url not in self.newest
                or page.fetched_at > self.newest[page.from_url].fetched_at
            ):
                self.newest[page.from_url] = page
            sightings = [(page.from_url, page.fetched_at)]
            sightings += [(e.to_url, min(e.discovered_at, page.fetched_at)) for e in page.edges]
            for seen, at in sightings:
                self.first_seen[seen] = min(at, self.first_seen.get(seen, at))
        self.links = [(page, edge) for page in self.newest.values() for edge in page.edges]
        self.urls = sorted(self.first_seen)

    def record(self, page: PageLinks, edge: LinkEdge) -> dict[str, Any]:
        return {
            "from_url": page.from_url,
            "to_url": edge.to_url,
            "anchor_text": edge.anchor_text,
            "context_window": edge.context_window,
            "link_type": edge.link_type,
            "position": edge.position,
            "discovered_at": edge.discovered_at,
            "last_seen_at": page.fetched_at,
            "rel": [],
            "gone": False,
        }

    def out_links(self, page_url: str) -> dict[str, dict[str, Any]]:
        page = self.newest.get(page_url)
        return {e.to_url: self.record(page, e) for e in page.edges} if page else {}

    def in_links(self, page_url: str) -> dict[str, dict[str, Any]]:
        return {p.from_url: self.record(p, e) for p, e in self.links if e.to_url == page_url}

    def anchors(self, page_url: str) -> dict[str, int]:
        texts = Counter(e.anchor_text for _, e in self.links if e.to_url == page_url)
        return {text: count for text, count in texts.items() if text}

    def node(self, page_url: str) -> dict[str, Any]:
        page = self.newest.get(page_url)
        host = domain(page_url)
        in_degree = sum(1 for _, e in self.links if e.to_url == page_url)
        out_degree = len(page.edges) if page else 0
        return {
            "url": page_url,
            "host": host,
            "registered_domain": host,
            "first_seen_at": self.first_seen[page_url],
            "crawled": page is not None,
            "fetched_at": page.fetched_at if page else None,
            "status": page.page.status if page and page.page else None,
            "title": page.page.title if page and page.page else None,
            "crawl_ids": [page.crawl_id] if page else [],
            "out_degree": out_degree,
            "in_degree": in_degree,
            "out_links_stored": out_degree,
            "in_links_stored": in_degree,
        }

    def answer(self, kind: str, page_url: str) -> Any:
        """The API's answer to a per-key query, edges keyed by their other end."""
        if kind == "out":
            return self.out_links(page_url)
        if kind == "in":
            return self.in_links(page_url)
        if kind == "anchors":
            return self.anchors(page_url)
        return self.node(page_url)

    def domain_links(self) -> Counter[tuple[str, str]]:
        """Links between two pages (self-links left out), counted by the domains of their ends."""
        return Counter(
            (domain(p.from_url), domain(e.to_url)) for p, e in self.links if e.to_url != p.from_url
        )

    def orphans(self) -> set[str]:
        """Crawled pages no other page of their domain links to (no seeds here)."""
        internal_in = {
            e.to_url
            for p, e in self.links
            if e.to_url != p.from_url and domain(p.from_url) == domain(e.to_url)
        }
        return set(self.newest) - internal_in

    def farms(self, share: float = 0.9, min_links: int = 10) -> dict[str, tuple[str, int, int]]:
        """domain -> (target domain, links out, links to it): more than `share` of at least
        `min_links` links leaving the domain go to one target domain."""
        leaving: dict[str, Counter[str]] = {}
        for (source, target), links in self.domain_links().items():
            if source != target:
                leaving.setdefault(source, Counter())[target] += links
        found = {}
        for source, targets in leaving.items():
            top, to_top = targets.most_common(1)[0]
            out = sum(targets.values())
            if out >= min_links and to_top > share * out:
                found[source] = (top, out, to_top)
        return found

    def syndication(self, min_links: int = 10) -> dict[tuple[str, str], int]:
        """(from domain, to domain) -> links, for domains linking each other `min_links` times
        or more in each direction."""
        links = self.domain_links()
        return {
            (a, b): n
            for (a, b), n in links.items()
            if a != b and n >= min_links and links.get((b, a), 0) >= min_links
        }

    def export_rows(self) -> dict[tuple[str, str], dict[str, str]]:
        """The edge export's rows as the csv module reads them back."""
        rows = {}
        for page, edge in self.links:
            rows[(page.from_url, edge.to_url)] = {
                "src": page.from_url,
                "dst": edge.to_url,
                "anchor_text": edge.anchor_text,
                "context_window": edge.context_window,
                "link_type": edge.link_type,
                "position": edge.position,
                "rel": "",
                "discovered_at": str(edge.discovered_at),
                "last_seen_at": str(page.fetched_at),
                "gone": "false",
            }
        return rows


def as_truth(kind: str, answer: dict[str, Any]) -> Any:
    """An API answer in the ground truth's shape."""
    if kind == "out":
        return {e["to_url"]: e for e in answer["edges"]}
    if kind == "in":
        return {e["from_url"]: e for e in answer["edges"]}
    if kind == "anchors":
        return {a["text"]: a["count"] for a in answer["anchors"]}
    return answer


_KNOWN: dict[str, list[str]] = {}


def api(deployment: Deployment, path: str, method: str = "GET", **params: str) -> tuple[int, Any]:
    """Call the graph API as the CLI does; members are read again only when no address answers."""
    known = _KNOWN.get(deployment.prefix)
    try:
        if known is None:
            raise graph_cli.GraphApiError("not looked up yet")
        status, body = graph_cli.call_any(known, path, params, method)
    except graph_cli.GraphApiError:
        known = _KNOWN[deployment.prefix] = graph_cli.graph_api_addresses(
            deployment.settings("test-cli")
        )
        status, body = graph_cli.call_any(known, path, params, method)
    return status, json.loads(body)


def rank_now(deployment: Deployment) -> dict[str, Any]:
    status, answer = api(deployment, "/v1/graph/rank", "POST")
    assert status == 200, answer
    summary: dict[str, Any] = answer
    return summary


def all_scores(deployment: Deployment) -> dict[str, float]:
    """The latest ranking's score of every page."""
    status, top = api(deployment, "/v1/graph/top", limit="10000")
    assert status == 200, top
    return {p["url"]: p["score"] for p in top["pages"]}


def published_by(reader: TopicReader, ranking: dict[str, Any]) -> dict[str, float]:
    """The scores `ranking` published to `scores`, read until they are all there."""

    def of_ranking(messages: list[Message]) -> list[PageScore]:
        scores = [decode(PageScore, m.value()) for m in messages]
        return [s for s in scores if s.computed_at == ranking["computed_at"]]

    wanted = ranking["published"]
    reader.read_until(lambda ms: len(of_ranking(ms)) >= wanted, 60, f"{wanted} scores")
    found = of_ranking(reader.poll())
    assert len(found) == wanted, "each changed score published once"
    return {s.url: s.pagerank for s in found}


def addresses(deployment: Deployment, expected: int, at_least: bool = False) -> dict[str, str]:
    """instance -> API address of the live linkgraph members, once `expected` hold partitions."""
    found: dict[str, str] = {}

    def ready() -> bool:
        live = [m for m in deployment.live_members("linkgraph") if m.ready and m.partitions]
        found.clear()
        found.update({m.instance: str(m.api_address) for m in live})
        return len(found) >= expected if at_least else len(found) == expected

    wait_for(ready, 90, f"{expected} ready linkgraph members")
    return found


def rankers(deployment: Deployment) -> set[str]:
    """The instances whose ranker record in `members` is live."""
    return {m.instance for m in deployment.live_members(RANKER_ROLE)}


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


def per_key_answers(
    deployment: Deployment, page_urls: list[str], address: str | None = None
) -> dict[tuple[str, str], tuple[int, Any]]:
    """(kind, url) -> (status, answer) of the four per-key queries of each URL, asked of
    `address` if given, side by side: an instance answers the queries of one cycle together."""

    def ask(query: tuple[str, str]) -> tuple[int, Any]:
        kind, page_url = query
        if address is None:
            return api(deployment, f"/v1/graph/{kind}", url=page_url)
        status, body = graph_cli.call(address, f"/v1/graph/{kind}", {"url": page_url})
        return status, json.loads(body)

    queries = [(kind, u) for u in page_urls for kind in ("out", "in", "anchors", "node")]
    with ThreadPoolExecutor(8) as pool:
        return dict(zip(queries, pool.map(ask, queries), strict=True))


def check_per_key(answers: dict[tuple[str, str], tuple[int, Any]], truth: FedGraph) -> None:
    assert {u for _, u in answers} == set(truth.urls)
    for (kind, page_url), (status, answer) in answers.items():
        assert status == 200, (kind, page_url, answer)
        assert as_truth(kind, answer) == truth.answer(kind, page_url), (kind, page_url)


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
    pages = generated() + link_farm()
    produce_links(deployment, pages)
    indexed(deployment, pages)
    truth = FedGraph(pages)
    check_per_key(per_key_answers(deployment, truth.urls), truth)
    assert api(deployment, "/v1/graph/node", url="https://nowhere.example/")[0] == 404
    assert api(deployment, "/v1/graph/out", url="ftp://x")[0] == 400
    scores = TopicReader(deployment.bootstrap, deployment.topic("scores"))
    try:
        ranked = check_first_ranking(deployment, truth, scores)
        check_metrics(deployment, pages)
        # Four scores move by 14 times the change ratio or more, every other by 1/14 or less.
        again = refetched(pages[8], url(19))
        produce_links(deployment, [again])
        truth = FedGraph([*pages, again])
        check_second_ranking(deployment, truth, again, ranked, scores)
    finally:
        scores.close()
    check_cli(deployment, truth, tmp_path)


def check_first_ranking(
    deployment: Deployment, truth: FedGraph, scores: TopicReader
) -> dict[str, float]:
    """Rank on demand: every page ranked, and on `scores` every page's score keyed by its URL in
    its host's partition, this ranking's changed ones each once. Returns the ranking's scores."""
    first = rank_now(deployment)
    assert first["converged"] and first["nodes"] == len(truth.urls)
    status, top = api(deployment, "/v1/graph/top", limit="5")
    assert status == 200 and len(top["pages"]) == 5
    listed = [p["score"] for p in top["pages"]]
    assert listed == sorted(listed, reverse=True)
    ranked = all_scores(deployment)
    assert set(ranked) == set(truth.urls) and sum(ranked.values()) == pytest.approx(1.0, abs=1e-6)
    published_by(scores, first)
    scores.read_until(
        lambda ms: {m.key() for m in ms} >= {u.encode() for u in truth.urls},
        60,
        "a score of every page",
    )
    latest: dict[str, float] = {}
    for message in scores.messages:
        score = decode(PageScore, message.value())
        assert message.key() == score.url.encode()
        assert message.partition() == partition_for_key(score.host.encode(), 2)
        latest[score.url] = score.pagerank
    # An earlier ranking's score stands where this one moved it by less than the change ratio.
    for page_url, score in latest.items():
        assert score == pytest.approx(ranked[page_url], rel=0.011), page_url
    for view in ("orphans", "domains", "farms", "syndication", "important"):
        assert api(deployment, f"/v1/graph/{view}")[0] == 200
    return ranked


def check_second_ranking(
    deployment: Deployment,
    truth: FedGraph,
    again: PageLinks,
    ranked: dict[str, float],
    scores: TopicReader,
) -> None:
    """After `again`, a page fetched again with one more link, a ranking publishes the scores
    that moved by more than the change ratio since `ranked`, and those only."""
    wait_for(
        lambda: (
            api(deployment, "/v1/graph/node", url=again.from_url)[1]["out_degree"]
            == len(again.edges)
        ),
        60,
        "the new link indexed",
    )
    second: dict[str, Any] = {}

    def ranked_with_the_new_link() -> bool:
        second.update(rank_now(deployment))
        return bool(second["edges"] == len(truth.links))

    wait_for(ranked_with_the_new_link, 60, "a ranking with the new link")
    moved = {u: abs(score - ranked[u]) / ranked[u] for u, score in all_scores(deployment).items()}
    published = published_by(scores, second)
    assert set(published) == {u for u, ratio in moved.items() if ratio > 0.01}
    assert url(19) in published and len(published) < len(truth.urls) / 4


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
    assert found["streamcrawl_linkgraph_ranker_graph_bytes"] > 0
    assert found["streamcrawl_linkgraph_ranking_duration_seconds_count"] >= 1
    assert found["streamcrawl_linkgraph_scores_published_total"] >= 1


def cli(deployment: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    return deployment.cli("graph", *args)


def cli_side_by_side(
    deployment: Deployment, commands: dict[str, list[str]]
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run `streamcrawl graph` commands a few at a time (each starts a Python of its own)."""
    with ThreadPoolExecutor(4) as pool:
        running = {name: pool.submit(cli, deployment, *args) for name, args in commands.items()}
    return {name: future.result() for name, future in running.items()}


def printed_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, (done.args, done.stderr)
    return json.loads(done.stdout)


def read_csv(path: Path, header: tuple[str, ...]) -> list[dict[str, str]]:
    """Rows of an export, read as GraphFrames reads it: a header first, then one row a line."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert tuple(rows[0]) == header
    return [dict(zip(header, row, strict=True)) for row in rows[1:]]


def check_cli(deployment: Deployment, truth: FedGraph, tmp_path: Path) -> None:
    """Every `streamcrawl graph` subcommand, against the ground truth or the API's own answer."""
    page = next(p for p in truth.newest.values() if len(truth.in_links(p.from_url)) > 1)
    edges, vertices = tmp_path / "edges.csv", tmp_path / "vertices.csv"
    done = cli_side_by_side(
        deployment,
        {
            "out": ["out", page.from_url, "--json"],
            "in": ["in", page.from_url],  # the human listing: one in-link a line
            "anchors": ["anchors", url(19), "--json"],
            "node": ["node", page.from_url, "--json"],
            "missing": ["node", "https://nowhere.example/"],
            "top": ["top", "--limit", "7", "--json"],
            "important": ["important", "--json"],
            "ranking": ["ranking", "--json"],
            "orphans": ["orphans", "--json"],
            "domains": ["domains", "--json"],
            "farms": ["farms", "--json"],
            "syndication": ["syndication", "--json"],
            "path": ["path", page.from_url, "--json"],
            "edges": ["export", "-o", str(edges)],
            "vertices": ["export", "--vertices", "--output", str(vertices)],
        },
    )
    assert as_truth("out", printed_json(done["out"])) == truth.out_links(page.from_url)
    assert done["in"].returncode == 0, done["in"].stderr
    listed = [line.split()[2] for line in done["in"].stdout.splitlines()]
    assert sorted(listed) == sorted(truth.in_links(page.from_url))
    assert as_truth("anchors", printed_json(done["anchors"])) == truth.anchors(url(19))
    assert printed_json(done["node"]) == truth.node(page.from_url)
    assert done["missing"].returncode == 1 and "unknown URL" in done["missing"].stderr

    assert printed_json(done["top"]) == api(deployment, "/v1/graph/top", limit="7")[1]
    assert printed_json(done["important"]) == api(deployment, "/v1/graph/important")[1]
    ranking = printed_json(done["ranking"])
    assert ranking == api(deployment, "/v1/graph/ranking")[1]
    assert {o["url"] for o in printed_json(done["orphans"])} == truth.orphans()
    domains = printed_json(done["domains"])
    assert {(d["from"], d["to"]): d["links"] for d in domains} == truth.domain_links()
    farms = {
        f["domain"]: (f["target_domain"], f["links_out"], f["links_to_target"])
        for f in printed_json(done["farms"])
    }
    assert farms == truth.farms() == {"farm.example": ("site1.example", 13, 12)}
    pairs = {}
    for pair in printed_json(done["syndication"]):
        (a, b), forward, backward = pair["domains"], pair["links_ab"], pair["links_ba"]
        pairs.update({(a, b): forward, (b, a): backward})
    assert pairs == truth.syndication() and len(pairs) == 4  # two of the three site pairs
    # No crawl here, so no seeds: the page is in the graph, and nothing reaches it.
    assert printed_json(done["path"]) == {"url": page.from_url, "clicks": None, "path": None}

    assert done["edges"].returncode == 0, done["edges"].stderr
    rows = read_csv(edges, EDGE_COLUMNS)
    assert len(rows) == len(truth.links)
    assert {(r["src"], r["dst"]): r for r in rows} == truth.export_rows()
    assert done["vertices"].returncode == 0, done["vertices"].stderr
    rows = read_csv(vertices, VERTEX_COLUMNS)
    assert sorted(r["id"] for r in rows) == truth.urls
    for row in rows:
        assert row["host"] == row["registered_domain"] == domain(row["id"]), row

    summary = printed_json(cli(deployment, "rank", "--json"))
    assert (summary["ranking"], summary["nodes"]) == (ranking["ranking"] + 1, len(truth.urls))


def test_two_instances_answer_for_keys_the_other_owns_and_one_of_them_ranks(
    deployment: Deployment, processes: list[ServiceProcess], tmp_path: Path
) -> None:
    instances = {name: start(deployment, name, tmp_path) for name in ("lg-a", "lg-b")}
    processes.extend(instances.values())
    found = addresses(deployment, 2)
    pages = generated(seed=9)
    produce_links(deployment, pages)
    indexed(deployment, pages)
    truth = FedGraph(pages)
    owners = {partition_for_key(u.encode(), 2) for u in truth.urls}
    assert owners == {0, 1}, "the generated URLs cover both partitions"
    for address in found.values():
        check_per_key(per_key_answers(deployment, truth.urls, address), truth)

    # One ranker for the two: rankings asked of either come from it, numbered one after another.
    wait_for(lambda: bool(rankers(deployment)), 60, "a ranker")
    (leader,) = rankers(deployment)
    numbers = []
    for address in found.values():
        status, body = graph_cli.call(address, "/v1/graph/rank", {}, "POST")
        assert status == 200, body
        numbers.append(json.loads(body)["ranking"])
    assert numbers[1] == numbers[0] + 1, "both asked the same ranker"
    assert rankers(deployment) == {leader}

    # The ranker stops; the other instance ranks instead, the graph read again from `links`.
    instances[leader].terminate()
    assert instances[leader].wait(60) == 0
    (follower,) = set(instances) - {leader}
    wait_for(lambda: rankers(deployment) == {follower}, 60, f"{follower} ranking")
    status, body = graph_cli.call(found[follower], "/v1/graph/rank", {}, "POST")
    assert status == 200, body
    summary = json.loads(body)
    assert (summary["nodes"], summary["edges"]) == (len(truth.urls), len(truth.links))


def test_a_killed_instance_rebuilt_from_its_changelog_answers_the_same(
    deployment: Deployment, processes: list[ServiceProcess], tmp_path: Path
) -> None:
    first = start(deployment, "lg-a", tmp_path)
    processes.append(first)
    pages = generated(seed=13, sources=16)
    produce_links(deployment, pages)
    indexed(deployment, pages)
    truth = FedGraph(pages)
    before = per_key_answers(deployment, truth.urls)
    check_per_key(before, truth)
    old_address = addresses(deployment, 1)["lg-a"]
    first.kill()
    shutil.rmtree(tmp_path / "state")  # nothing on disk: everything comes from the changelog
    processes.append(start(deployment, "lg-a", tmp_path))
    wait_for(lambda: addresses(deployment, 1)["lg-a"] != old_address, 90, "the restarted instance")
    assert per_key_answers(deployment, truth.urls) == before


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
