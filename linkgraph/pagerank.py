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

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import sparse

from linkgraph.exceptions import QueryError

Vector = npt.NDArray[np.float64]
SOURCE_HALF = 0 if sys.byteorder == "little" else 1
"""Which int32 of a link's int64 key (target << 32 | source) holds the source."""


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


def distinct(values: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
    """The sorted distinct values and how often each occurs. Sort and compare: numpy 2.4's
    `np.unique` takes seconds on a few million int64 where this takes tens of milliseconds."""
    ordered = np.sort(values)
    if ordered.size == 0:
        return ordered, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    counts = np.diff(np.append(starts, ordered.size)).astype(np.int64)
    return ordered[starts], counts


def transition(
    src: npt.NDArray[Any],
    dst: npt.NDArray[Any],
    nodes: int,
    chosen: npt.NDArray[np.bool_] | None = None,
) -> Transition:
    """M over the links from `src` to `dst` (those `chosen`, when given), built straight in CSR
    order: one int64 key per link, target above source, sorted in place, repeats dropped. Its
    peak is about 17 bytes a link beyond the inputs; the matrix keeps 12 (index and weight)."""
    keep = src != dst
    if chosen is not None:
        keep &= chosen
    keys = dst[keep].astype(np.int64)
    keys <<= 32
    keys |= src[keep]
    del keep
    keys.sort()
    if keys.size:
        first = np.empty(keys.size, dtype=np.bool_)
        first[0] = True
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
        keys = keys[first]  # one edge per (from, to): a second copy would double its weight
        del first
    index = np.int32 if keys.size < np.iinfo(np.int32).max else np.int64
    sources = keys.view(np.int32)[SOURCE_HALF::2].astype(index)
    indptr = np.searchsorted(keys, np.arange(nodes + 1, dtype=np.int64) << 32).astype(index)
    del keys
    degree = np.bincount(sources, minlength=nodes).astype(np.float64)
    weights = degree[sources]
    np.reciprocal(weights, out=weights)
    matrix = sparse.csr_array((weights, sources, indptr), shape=(nodes, nodes))
    return Transition(matrix, degree == 0)


def teleport_vector(nodes: int, members: npt.NDArray[np.int64] | None) -> Vector:
    if members is None:
        return np.full(nodes, 1.0 / nodes)
    members, _ = distinct(members)
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
