"""PageRank by power iteration on a CSR matrix (seed document 002's parameters by default).

``x' = d (M x + (dangling . x) t) + (1 - d) t``, with M[to, from] = 1 / out-degree(from) over the
followed links (self-links dropped, duplicate edges counted once), t the teleport distribution
(uniform, or a personalisation: seeds or pages matching a pattern) and dangling pages' mass
redistributed along t, as networkx does. Iteration stops when the L1 change falls below
``tolerance * (1 - d) / d``: that bounds the L1 distance to the fixed point by ``tolerance``
(the error shrinks by at least d per step), or after ``max_iterations``. A warm start begins from
the previous vector (new pages get the teleport share), which usually halves the iterations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

from linkgraph.exceptions import QueryError

Vector = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RankParameters:
    damping: float = 0.85
    tolerance: float = 1e-6
    max_iterations: int = 100


@dataclass(frozen=True)
class Transition:
    matrix: sparse.csr_array
    """M[to, from] = 1 / out-degree(from)."""
    dangling: npt.NDArray[np.bool_]

    @property
    def nodes(self) -> int:
        return int(self.matrix.shape[0])


@dataclass(frozen=True)
class RankOutcome:
    scores: Vector
    iterations: int
    converged: bool
    residual: float


def transition(src: npt.NDArray[np.int32], dst: npt.NDArray[np.int32], nodes: int) -> Transition:
    keep = src != dst
    src, dst = src[keep], dst[keep]
    # One edge per (from, to): a pair's second copy would double its weight.
    pairs = np.unique(src.astype(np.int64) * max(nodes, 1) + dst)
    src = (pairs // max(nodes, 1)).astype(np.int32)
    dst = (pairs % max(nodes, 1)).astype(np.int32)
    degree = np.bincount(src, minlength=nodes).astype(np.float64)
    weights = 1.0 / degree[src]
    matrix = sparse.csr_array((weights, (dst, src)), shape=(nodes, nodes))
    return Transition(matrix, degree == 0)


def teleport_vector(nodes: int, members: npt.NDArray[np.int64] | None) -> Vector:
    if members is None:
        return np.full(nodes, 1.0 / nodes)
    members = np.unique(members)
    if members.size == 0:
        raise QueryError("the teleport set is empty: no known page matches it", 404)
    teleport = np.zeros(nodes)
    teleport[members] = 1.0 / members.size
    return teleport


def pagerank(
    step: Transition,
    parameters: RankParameters,
    teleport: Vector | None = None,
    start: Vector | None = None,
) -> RankOutcome:
    nodes = step.nodes
    if nodes == 0:
        return RankOutcome(np.zeros(0), 0, True, 0.0)
    t = teleport if teleport is not None else np.full(nodes, 1.0 / nodes)
    x = _start(start, t, nodes)
    d = parameters.damping
    threshold = parameters.tolerance * (1 - d) / d
    residual = float("inf")
    for iteration in range(1, parameters.max_iterations + 1):
        dangling_mass = float(x[step.dangling].sum())
        following = step.matrix @ x
        following += dangling_mass * t
        following *= d
        following += (1 - d) * t
        residual = float(np.abs(following - x).sum())
        x = following
        if residual < threshold:
            return RankOutcome(x, iteration, True, residual)
    return RankOutcome(x, parameters.max_iterations, False, residual)


def _start(start: Vector | None, teleport: Vector, nodes: int) -> Vector:
    if start is None or start.size == 0:
        return teleport.copy()
    x = np.zeros(nodes)
    known = min(start.size, nodes)
    x[:known] = start[:known]
    if known < nodes:
        x[known:] = teleport[known:] if teleport[known:].sum() > 0 else 1.0 / nodes
    total = x.sum()
    return x / total if total > 0 else teleport.copy()
