"""Benchmark of the link graph (issue 6), baselines measured in the same run:

1. Edge ingest per CPU second through the real handler and the loop's state path (forward pass:
   links -> forward index + nodes + re-keyed in-links; reverse pass: in-links -> reverse index +
   anchors + nodes), each against bare rocksdict WriteBatch puts of exactly the records that pass
   stored (every forward, reverse, anchor and node record, same keys and values, captured from the
   pass; `tests/bench/linkgraph_ingest.py`), median of `--rounds`. Target: at least 0.5 of it,
   judged on an interval for the median of the per-round ratios (`tests.bench.verdicts`).
2. PageRank on a graph of at least 2 million edges, timed from the ranker's graph to the scores
   delivered on a real `scores` topic, against networkx (DiGraph + networkx.pagerank), each in its
   own process for its peak RSS (`tests/bench/linkgraph_rank.py`). Target: at least 2x faster,
   same ranking (compared on the top pages and over every page).

The broker is STREAMCRAWL_TEST_BOOTSTRAP or a local one started here. Prints a table; not a test.

    python3 -m tests.bench.bench_linkgraph [--pages 8000 --rounds 6 --ingest-only]
        [--nodes 300000 --edges 3000000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from schemas import scores
from schemas.registry import ALL_TOPICS
from streamcrawl.settings import Settings
from streamcrawl.topics import create_topics
from tests.bench.linkgraph_ingest import IngestResult, measure
from tests.bench.verdicts import median_interval, verdict
from tests.broker_source import session_broker

REPO = Path(__file__).resolve().parents[2]
TOP = 1000
TARGET_INGEST = 0.5


@contextmanager
def broker(root: Path) -> Iterator[str]:
    given = os.environ.get("STREAMCRAWL_TEST_BOOTSTRAP")
    if given:
        yield given
        return
    with session_broker(root / "kafka") as bootstrap:
        yield bootstrap


def side(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.linkgraph_rank", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} side failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def same_ranking(ours: np.ndarray, theirs: np.ndarray) -> dict[str, float]:
    top_ours = np.argsort(-ours, kind="stable")[:TOP]
    top_theirs = np.argsort(-theirs, kind="stable")[:TOP]
    rho = stats.spearmanr(ours, theirs).statistic
    return {
        "top_overlap": len(set(top_ours.tolist()) & set(top_theirs.tolist())) / TOP,
        "top100_same_order": float(np.array_equal(top_ours[:100], top_theirs[:100])),
        "top_positions_equal": float(np.mean(top_ours == top_theirs)),
        "spearman": float(rho),
        "l1": float(np.abs(ours - theirs).sum()),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=8000, help="ingest: pages of 25 links")
    parser.add_argument("--nodes", type=int, default=300_000)
    parser.add_argument("--edges", type=int, default=3_000_000, help="generated, before dedup")
    parser.add_argument("--hosts", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=6, help="ingest rounds; medians reported")
    parser.add_argument("--ingest-only", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rounds = [measure(root / f"ingest{n}", args.pages, 25, 40) for n in range(args.rounds)]
        if args.ingest_only:
            report_ingest(rounds)
            return 0
        with broker(root) as bootstrap:
            prefix = f"bench{uuid.uuid4().hex[:6]}."
            settings = Settings(
                kafka={"bootstrap_servers": bootstrap, "topic_prefix": prefix, "partitions": 6}
            )
            create_topics(settings, tuple(t for t in ALL_TOPICS if t.suffix == "scores"))
            shape = (str(args.nodes), str(args.edges), str(args.hosts))
            theirs = side("networkx", *shape, str(root / "nx.npy"))
            ours = side(
                "ours", *shape, str(root / "ours.npy"), bootstrap, scores.TOPIC.name(prefix)
            )
            reference = np.load(root / "reference.npy")
            ranking = same_ranking(np.load(root / "ours.npy"), np.load(root / "nx.npy"))
            ranking["ours_vs_reference_l1"] = float(
                np.abs(np.load(root / "ours.npy") - reference).sum()
            )
            ranking["networkx_vs_reference_l1"] = float(
                np.abs(np.load(root / "nx.npy") - reference).sum()
            )
            exact = same_ranking(np.load(root / "ours.npy"), reference)
            ranking["ours_vs_reference_top_positions_equal"] = exact["top_positions_equal"]
            ranking["ours_vs_reference_top100_same_order"] = exact["top100_same_order"]
    report_ingest(rounds)
    report(ours, theirs, ranking)
    return 0


def median_round(rounds: list[IngestResult]) -> IngestResult:
    """Each figure's median over the rounds (the machine is shared: one round can be unlucky)."""
    return IngestResult(
        edges=rounds[0].edges,
        forward_s=statistics.median(r.forward_s for r in rounds),
        reverse_s=statistics.median(r.reverse_s for r in rounds),
        bare_forward_s=statistics.median(r.bare_forward_s for r in rounds),
        bare_reverse_s=statistics.median(r.bare_reverse_s for r in rounds),
        kernel_forward_s=statistics.median(r.kernel_forward_s for r in rounds),
        kernel_reverse_s=statistics.median(r.kernel_reverse_s for r in rounds),
        encode_forward_s=statistics.median(r.encode_forward_s for r in rounds),
        wall_s=statistics.median(r.wall_s for r in rounds),
        bare_wall_s=statistics.median(r.bare_wall_s for r in rounds),
        changelog_records=rounds[0].changelog_records,
        derived_records=rounds[0].derived_records,
        forward_records=rounds[0].forward_records,
        reverse_records=rounds[0].reverse_records,
    )


def report_ingest(rounds: list[IngestResult]) -> None:
    ingest = median_round(rounds)
    edges = ingest.edges
    print(
        f"edge ingest, {edges:,} edges in {edges // 25:,} pages "
        f"(CPU seconds, median of {len(rounds)})"
    )
    print(
        "baseline of a pass: bare rocksdict WriteBatch puts of exactly the records that pass "
        f"stored ({ingest.forward_records:,} forward-pass records: forward edges + source nodes; "
        f"{ingest.reverse_records:,} reverse-pass records: reverse edges + anchor entries + "
        "target nodes; plus per cycle the stats record and changelog offset), same keys, values "
        "and cycles, no reads; both passes into one RocksDB, as the link graph's share one store"
    )
    print(f"{'what':<48}{'seconds':>10}{'edges/s':>12}{'vs bare':>10}")
    rows = [
        ("bare puts of the forward pass's records", ingest.bare_forward_s, ingest.bare_forward_s),
        ("  kernel state path alone, same records", ingest.kernel_forward_s, ingest.bare_forward_s),
        ("  edge encoding + re-key, no state", ingest.encode_forward_s, ingest.bare_forward_s),
        ("forward: links -> forward + nodes + re-key", ingest.forward_s, ingest.bare_forward_s),
        ("bare puts of the reverse pass's records", ingest.bare_reverse_s, ingest.bare_reverse_s),
        ("  kernel state path alone, same records", ingest.kernel_reverse_s, ingest.bare_reverse_s),
        ("reverse: in-links -> reverse + anchors + nodes", ingest.reverse_s, ingest.bare_reverse_s),
        ("both passes (an edge fully indexed)", ingest.forward_s + ingest.reverse_s, ingest.bare_s),
    ]
    for name, seconds, baseline in rows:
        print(f"{name:<48}{seconds:>10.2f}{edges / seconds:>12,.0f}{baseline / seconds:>10.2f}")
    # Each round's sides run within seconds of each other, the rounds a minute apart: a slow
    # phase of the shared machine moves a round's ratio less than it moves the medians above.
    per_round = [r.bare_s / (r.forward_s + r.reverse_s) for r in rounds]
    listed = ", ".join(f"{ratio:.2f}" for ratio in per_round)
    interval = median_interval(per_round)
    print(
        f"both passes per round: {listed} (median {statistics.median(per_round):.2f}; "
        f"{interval.describe()}, tests/bench/verdicts.py)"
    )
    print(
        f"verdict, target >= {TARGET_INGEST}: {verdict(interval, TARGET_INGEST)} (met only when "
        "the whole interval clears the target; at the line while it holds it)"
    )
    wall = [r.bare_wall_s / r.wall_s for r in rounds]
    print(
        f"both passes on the wall clock: {ingest.wall_s:.2f} against {ingest.bare_wall_s:.2f} s, "
        f"{ingest.bare_wall_s / ingest.wall_s:.2f} (per round "
        f"{', '.join(f'{ratio:.2f}' for ratio in wall)}); compactions overlap each side's writes "
        "on the second core, the bare side's most (tests/bench/linkgraph_ingest.py)"
    )
    print(
        "target: edge ingest, both passes (an edge is ingested once fully indexed), at least "
        f"{TARGET_INGEST:.2f} of its baseline; the passes apart locate the cost; the kernel rows "
        "(no handler) are the most a handler can reach on the kernel's state path; the encoding "
        "row is the forward pass's per-edge encoding and re-keyed messages with no state at all"
    )
    per_edge = ingest.changelog_records / edges
    before = (ingest.changelog_records + ingest.derived_records) / edges
    print(
        f"changelog records per edge, both passes: {per_edge:.2f} "
        f"({ingest.derived_records:,} anchor writes derived on restore, not logged: "
        f"{before:.2f} if they were)"
    )
    print()


def report(ours: dict[str, Any], theirs: dict[str, Any], ranking: dict[str, float]) -> None:
    print(
        f"PageRank, {ours['nodes']:,} nodes, {ours['edges']:,} edges "
        f"({ours['ranked_edges']:,} followed), {ours['iterations']} iterations"
    )
    print(f"{'what':<48}{'seconds':>10}{'RSS before':>12}{'peak RSS':>10}")
    for name, side_result in (
        ("networkx DiGraph + pagerank (baseline)", theirs),
        (f"ranker: graph -> {ours['published']:,} scores published", ours),
    ):
        before, peak = side_result["rss_before_kib"] / 1024, side_result["peak_kib"] / 1024
        print(f"{name:<48}{side_result['seconds']:>10.2f}{before:>10.0f}MB{peak:>8.0f}MB")
    phases = ", ".join(f"{name} {seconds:.2f}s" for name, seconds in ours["phases"].items())
    print(f"ranker phases: {phases}")
    held = ours["graph_bytes"]
    print(
        f"ranker graph held in arrays: {held / 2**20:.0f} MB, {held / ours['nodes']:.0f} bytes a "
        f"node or {held / ours['edges']:.1f} an edge, URLs included (the ranking's snapshot and "
        "matrix come on top, inside the peak)"
    )
    print(f"speed-up: {theirs['seconds'] / ours['seconds']:.2f}x (target >= 2x)")
    print(
        f"same ranking: top-{TOP} overlap {ranking['top_overlap']:.3f}, "
        f"top-100 same order {bool(ranking['top100_same_order'])}, "
        f"top-{TOP} positions equal {ranking['top_positions_equal']:.3f}, "
        f"Spearman over all pages {ranking['spearman']:.6f}, L1 {ranking['l1']:.2e}"
    )
    print(
        f"against a tightly converged reference (networkx, tol 1e-14): ranker L1 "
        f"{ranking['ours_vs_reference_l1']:.2e}, "
        f"networkx L1 {ranking['networkx_vs_reference_l1']:.2e}; "
        f"ranker top-100 same order {bool(ranking['ours_vs_reference_top100_same_order'])}, "
        f"top-{TOP} positions equal {ranking['ours_vs_reference_top_positions_equal']:.3f}"
    )


if __name__ == "__main__":
    sys.exit(main())
