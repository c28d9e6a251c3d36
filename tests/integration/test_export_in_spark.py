"""The edge and vertex exports loaded by Apache Spark (pyspark 3.5 or 4, a local JVM bound to
127.0.0.1), read exactly as `linkgraph.export` tells a user to: every row and every typed field of
a generated graph comes back, texts that break naive CSV included; the vertex list covers every
edge's ends, as GraphFrames requires; and Spark's in-degrees are the graph's. No broker: the
export's rows come from `links.by-target` records put into a RocksDB, as `write_export` puts what
it reads."""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession
from rocksdict import Options, Rdict

from linkgraph.export import EDGE_SCHEMA, VERTEX_SCHEMA, write_csv
from linkgraph.indexes import in_link_value, new_edge_value
from linkgraph.records import EdgeRecord
from schemas.canonical import host_key, registered_domain
from schemas.links import LinkEdge
from schemas.links_by_target import key

TEXTS = (
    "",
    "plain words",
    'a, "quoted" b',
    "first line\nsecond line",
    "windows\r\nline break",
    "a lone\rreturn",
    "back\\slash \\N",
    " spaces around ",
    "#not a comment",
    "null",
    "tab\there",
    "Zürich ☃ 東京",
    '"',
    ",",
)
"""Anchor texts and context windows: what a CSV reader trips on (the parser sends its texts
whitespace-normalised, but `links` takes any text from any producer)."""
URLS = tuple(
    [f"https://site{n}.example/page/{p}" for n in range(4) for p in range(6)]
    + [
        "https://blog.example.co.uk/a,b?q=1&r=%22x%22",
        "http://127.0.0.1:8080/local",
        "https://xn--bcher-kva.example/",
        "https://site0.example/path;param?x=a%2Cb#frag",
    ]
)


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    record: EdgeRecord


def generated(seed: int = 2) -> list[Edge]:
    """A graph over `URLS`: every page links 3-9 others, every text used, some edges gone."""
    rng = random.Random(seed)
    edges = []
    for n, src in enumerate(URLS):
        for m, dst in enumerate(rng.sample([u for u in URLS if u != src], rng.randint(3, 9))):
            link = LinkEdge(
                to_url=dst,
                anchor_text=TEXTS[(n + m) % len(TEXTS)],
                context_window=TEXTS[(n * 3 + m) % len(TEXTS)],
                link_type=rng.choice(("INTERNAL", "EXTERNAL", "NOFOLLOW", "REDIRECT")),
                rel=rng.choice(([], ["nofollow"], ["ugc", "sponsored"])),
                position=rng.choice(("NAV", "CONTENT", "FOOTER", "SIDEBAR")),
                discovered_at=1_700_000_000_000 + n * 1000 + m,
            )
            record = EdgeRecord.decode(new_edge_value(link, 2**52 + n))
            record.gone = rng.random() < 0.2
            edges.append(Edge(src, dst, record))
    return edges


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A local Spark on one core, bound to 127.0.0.1, no UI; its JVM stopped at the end, and the
    recursion limit PySpark raises (to 3000, while collecting) put back for the tests after."""
    scratch = tmp_path_factory.mktemp("spark")
    recursion_limit = sys.getrecursionlimit()
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        environment.setenv("PYSPARK_SUBMIT_ARGS", "--driver-memory 512m pyspark-shell")
        session = (
            SparkSession.builder.master("local[1]")
            .appName("streamcrawl-export-test")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.local.dir", str(scratch))
            .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
            .config("spark.sql.shuffle.partitions", "1")
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        sys.setrecursionlimit(recursion_limit)
        gateway = SparkContext._gateway
        if gateway is not None:
            gateway.shutdown()
            gateway.proc.stdin.close()  # the JVM leaves when its launcher's pipe closes
            gateway.proc.wait(timeout=60)
            SparkContext._gateway = SparkContext._jvm = None


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Edge], Path, Path]:
    """The generated graph, and its edge and vertex CSV as `write_export` writes them."""
    root = tmp_path_factory.mktemp("export")
    edges = generated()
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    store = Rdict(str(root / "by-target"), options=options)
    try:
        for edge in edges:
            store[key(edge.dst, edge.src).encode()] = in_link_value(edge.record.encode())
        edge_rows = write_csv(store, root / "edges.csv", False, root)
        vertex_rows = write_csv(store, root / "vertices.csv", True, root)
    finally:
        store.close()
    assert edge_rows == len(edges)
    assert vertex_rows == len({end for edge in edges for end in (edge.src, edge.dst)})
    return edges, root / "edges.csv", root / "vertices.csv"


def read(spark: SparkSession, path: Path, schema: str) -> DataFrame:
    """The read `linkgraph.export` documents."""
    return spark.read.csv(str(path), header=True, multiLine=True, escape='"', schema=schema)


def text(value: str) -> str | None:
    """A text as Spark's CSV reader gives it back: an empty one is null."""
    return value or None


def test_every_edge_comes_back_with_every_field_typed(
    spark: SparkSession, exported: tuple[list[Edge], Path, Path]
) -> None:
    edges, edge_csv, _ = exported
    rows = [row.asDict() for row in read(spark, edge_csv, EDGE_SCHEMA).collect()]
    expected: list[dict[str, Any]] = [
        {
            "src": edge.src,
            "dst": edge.dst,
            "anchor_text": text(edge.record.anchor_text),
            "context_window": text(edge.record.context_window),
            "link_type": edge.record.link_type,
            "position": edge.record.position,
            "rel": text(" ".join(edge.record.rel)),
            "discovered_at": edge.record.discovered_at,
            "last_seen_at": edge.record.last_seen_at,
            "gone": edge.record.gone,
        }
        for edge in edges
    ]

    def order(row: dict[str, Any]) -> tuple[str, str]:
        return row["src"], row["dst"]

    assert sorted(rows, key=order) == sorted(expected, key=order)
    assert {row["anchor_text"] for row in rows} == {text(t) for t in TEXTS}
    assert any(row["gone"] for row in rows) and not all(row["gone"] for row in rows)


def test_vertices_cover_every_end_and_spark_counts_the_graphs_in_degrees(
    spark: SparkSession, exported: tuple[list[Edge], Path, Path]
) -> None:
    edges, edge_csv, vertex_csv = exported
    vertices = read(spark, vertex_csv, VERTEX_SCHEMA)
    assert sorted(tuple(row) for row in vertices.collect()) == sorted(
        (url, host_key(url), registered_domain(host_key(url))) for url in URLS
    )
    edge_frame = read(spark, edge_csv, EDGE_SCHEMA)
    # GraphFrames' contract: every src and dst is a vertex id.
    for end in ("src", "dst"):
        unknown = edge_frame.join(vertices, edge_frame[end] == vertices["id"], "left_anti")
        assert unknown.count() == 0
    in_degrees = {row["dst"]: row["count"] for row in edge_frame.groupBy("dst").count().collect()}
    assert in_degrees == Counter(edge.dst for edge in edges)
    live = edge_frame.where("NOT gone").groupBy("src").count().collect()
    assert {row["src"]: row["count"] for row in live} == Counter(
        edge.src for edge in edges if not edge.record.gone
    )
