"""PageRank within 1e-6 (L1) of an exact reference (a dense linear solve) on random graphs, with
dangling pages, personalised teleport and warm starts; and the same vector as networkx."""

from __future__ import annotations

import networkx as nx
import numpy as np
import numpy.typing as npt
import pytest

from linkgraph.pagerank import RankParameters, pagerank, teleport_vector, transition

PARAMETERS = RankParameters()


def random_graph(
    seed: int, nodes: int, edges: int
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, nodes, edges).astype(np.int32)
    # Skewed targets (a few popular pages), and a tail of pages with no out-links at all.
    dst = (rng.pareto(1.2, edges) * 7).astype(np.int64) % nodes
    src = np.where(src >= int(nodes * 0.8), src % int(nodes * 0.8), src).astype(np.int32)
    return src, dst.astype(np.int32)


def dense_transition(
    links: set[tuple[int, int]], nodes: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """M[to, from] = 1 / out-degree(from), link by link; and the out-degrees."""
    degree = np.zeros(nodes)
    for s, _ in links:
        degree[s] += 1
    matrix = np.zeros((nodes, nodes))
    for s, d in links:
        matrix[d, s] = 1.0 / degree[s]
    return matrix, degree


def exact(
    src: npt.NDArray[np.int32],
    dst: npt.NDArray[np.int32],
    nodes: int,
    teleport: npt.NDArray[np.float64] | None = None,
    damping: float = 0.85,
) -> npt.NDArray[np.float64]:
    """Solve x = d (M + t 1_dangling^T) x + (1 - d) t directly."""
    t = teleport if teleport is not None else np.full(nodes, 1.0 / nodes)
    matrix, degree = dense_transition(
        {(int(s), int(d)) for s, d in zip(src, dst, strict=True) if s != d}, nodes
    )
    matrix[:, degree == 0] = t[:, None]
    return np.linalg.solve(np.eye(nodes) - damping * matrix, (1 - damping) * t)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_within_tolerance_of_the_exact_vector(seed: int) -> None:
    nodes = 300
    src, dst = random_graph(seed, nodes, 1500)
    outcome = pagerank(transition(src, dst, nodes), PARAMETERS)
    assert outcome.converged
    assert np.abs(outcome.scores - exact(src, dst, nodes)).sum() < 1e-6
    assert outcome.scores.sum() == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("seed", [6, 7])
def test_personalised_within_tolerance(seed: int) -> None:
    nodes = 250
    src, dst = random_graph(seed, nodes, 1200)
    seeds = [3, 17, 42]
    teleport = teleport_vector(nodes, np.array([*seeds, 17], dtype=np.int64))  # a seed twice
    outcome = pagerank(transition(src, dst, nodes), PARAMETERS, teleport)
    reference = exact(src, dst, nodes, np.isin(np.arange(nodes), seeds) / len(seeds))
    assert np.abs(outcome.scores - reference).sum() < 1e-6
    uniform = exact(src, dst, nodes)
    assert reference[seeds].sum() > 2 * uniform[seeds].sum()
    # networkx teleports, and sends dangling pages' rank, to the seeds alike.
    graph = nx.DiGraph()
    graph.add_nodes_from(range(nodes))
    graph.add_edges_from((int(s), int(d)) for s, d in zip(src, dst, strict=True) if s != d)
    personalization = dict.fromkeys(seeds, 1.0)
    theirs = nx.pagerank(
        graph, alpha=0.85, personalization=personalization, tol=1e-12, max_iter=1000
    )
    assert np.abs(outcome.scores - np.array([theirs[i] for i in range(nodes)])).sum() < 1e-6


def test_the_defaults_are_the_issues() -> None:
    """Damping 0.85, tolerance 1e-6 (L1), at most 100 iterations."""
    assert (PARAMETERS.damping, PARAMETERS.tolerance, PARAMETERS.max_iterations) == (
        0.85,
        1e-6,
        100,
    )


def test_warm_start_converges_faster_to_the_same_vector() -> None:
    nodes = 400
    src, dst = random_graph(9, nodes, 2400)
    cold = pagerank(transition(src, dst, nodes), PARAMETERS)
    extra_src = np.concatenate([src, np.array([1, 2, 5], dtype=np.int32)])
    extra_dst = np.concatenate([dst, np.array([399, 398, 7], dtype=np.int32)])
    step = transition(extra_src, extra_dst, nodes)
    warm = pagerank(step, PARAMETERS, start=cold.scores)
    fresh = pagerank(step, PARAMETERS)
    assert warm.iterations < fresh.iterations
    assert np.abs(warm.scores - exact(extra_src, extra_dst, nodes)).sum() < 1e-6


def test_same_vector_as_networkx() -> None:
    nodes = 200
    src, dst = random_graph(11, nodes, 900)
    graph = nx.DiGraph()
    graph.add_nodes_from(range(nodes))
    graph.add_edges_from((int(s), int(d)) for s, d in zip(src, dst, strict=True) if s != d)
    theirs = nx.pagerank(graph, alpha=0.85, tol=1e-12, max_iter=1000)
    ours = pagerank(transition(src, dst, nodes), PARAMETERS).scores
    assert np.abs(ours - np.array([theirs[i] for i in range(nodes)])).sum() < 1e-6


def test_duplicate_and_self_links_do_not_count() -> None:
    src = np.array([0, 0, 0, 1], dtype=np.int32)
    dst = np.array([1, 1, 0, 0], dtype=np.int32)
    step = transition(src, dst, 3)
    assert step.matrix.nnz == 2
    assert step.dangling.tolist() == [False, False, True]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_matrix_is_one_over_out_degree_per_distinct_chosen_link(seed: int) -> None:
    nodes = 400
    src, dst = random_graph(seed, nodes, 6000)
    chosen = np.random.default_rng(seed).random(src.size) < 0.8
    step = transition(src, dst, nodes, chosen)
    links = {
        (s, d)
        for s, d, c in zip(src.tolist(), dst.tolist(), chosen.tolist(), strict=True)
        if c and s != d
    }
    expected, degree = dense_transition(links, nodes)
    assert step.matrix.has_canonical_format and step.matrix.nnz == len(links)
    assert np.array_equal(step.matrix.toarray(), expected)
    assert np.array_equal(step.dangling, degree == 0)


def test_stops_at_max_iterations_when_not_converged() -> None:
    nodes = 300
    src, dst = random_graph(1, nodes, 1500)
    outcome = pagerank(transition(src, dst, nodes), RankParameters(max_iterations=3))
    assert (outcome.iterations, outcome.converged) == (3, False)
