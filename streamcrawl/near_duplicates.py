"""Groups of pages whose main texts are nearly the same, from their MinHash signatures.

`streamcrawl duplicates --near` gives :func:`near_groups` one signature per URL (`parser.minhash`,
the URL's latest fetch) and a similarity threshold; it answers the groups of URLs linked by
pairs at least that similar (single linkage, as site audits group near duplicates).

Comparing every pair would be quadratic. Locality-sensitive hashing finds the candidates instead
(Leskovec, Rajaraman and Ullman, *Mining of Massive Datasets*, ch. 3): the 64 values are cut into
bands of ``r`` rows, and two signatures are candidates when one band is equal in both. A pair of
similarity ``s`` becomes one with probability ``1 - (1 - s**r)**(64/r)``; ``r`` is the largest of
8, 4, 2, 1 that makes that 0.99 at the threshold, so few pairs at the threshold are missed and few
pairs far below it are compared. Each candidate pair is then checked on all 64 values.

Identical signatures are merged first, and a bucket of more than `MAX_BUCKET_PAIRS_OF` signatures
(a site whose pages are all nearly alike) is compared along a chain and with its first member,
not pairwise, so the work stays linear in the crawl.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

SIGNATURE_SIZE = 64
ROWS_PER_BAND = (8, 4, 2, 1)
RECALL_AT_THRESHOLD = 0.99
MAX_BUCKET_PAIRS_OF = 100
_ODD = np.uint64(0x9E3779B97F4A7C15)

Signatures = npt.NDArray[np.uint32]
"""One row of `SIGNATURE_SIZE` values a page."""
Indexes = npt.NDArray[np.int64]


def rows_per_band(threshold: float) -> int:
    """The widest band that still makes a pair at ``threshold`` a candidate 99 times in 100."""
    for rows in ROWS_PER_BAND:
        bands = SIGNATURE_SIZE // rows
        if 1 - (1 - threshold**rows) ** bands >= RECALL_AT_THRESHOLD:
            return rows
    return 1


def near_groups(signatures: Signatures, threshold: float) -> list[list[int]]:
    """The groups of two rows or more (rows ascending), the largest first, then by first row."""
    if len(signatures) < 2:
        return []
    distinct, page_of = np.unique(signatures, axis=0, return_inverse=True)
    page_of = page_of.reshape(-1)
    first, second = _candidates(distinct, rows_per_band(threshold))
    agree = _agreement(distinct, first, second)
    alike = agree >= int(np.ceil(threshold * SIGNATURE_SIZE - 1e-9))
    count = len(distinct)
    links = coo_matrix(
        (np.ones(int(alike.sum()), dtype=np.int8), (first[alike], second[alike])),
        shape=(count, count),
    )
    _, component_of = connected_components(links, directed=False)
    component_of_row = component_of[page_of]
    order = np.argsort(component_of_row, kind="stable")
    starts = np.flatnonzero(np.diff(component_of_row[order], prepend=-1))
    groups = [[int(r) for r in rows] for rows in np.split(order, starts[1:]) if len(rows) > 1]
    return sorted(groups, key=lambda rows: (-len(rows), rows[0]))


def similarities(signatures: Signatures, rows: list[int]) -> list[float]:
    """Each row's estimated similarity to the first of ``rows``."""
    agree = (signatures[rows] == signatures[rows[0]]).sum(axis=1)
    return [float(value) / SIGNATURE_SIZE for value in agree]


def _candidates(distinct: Signatures, rows: int) -> tuple[Indexes, Indexes]:
    """Pairs of rows that agree on a whole band, each pair once, the lower row first."""
    found_first, found_second = [], []
    for start in range(0, SIGNATURE_SIZE, rows):
        band = _band_keys(distinct[:, start : start + rows])
        order = np.argsort(band, kind="stable")
        first, second = _bucket_pairs(band[order])
        found_first.append(order[first])
        found_second.append(order[second])
    first = np.concatenate(found_first)
    second = np.concatenate(found_second)
    low, high = np.minimum(first, second), np.maximum(first, second)
    pairs = np.unique(low.astype(np.int64) * len(distinct) + high)
    return pairs // len(distinct), pairs % len(distinct)


def _band_keys(band: Signatures) -> npt.NDArray[np.uint64]:
    """One 64-bit key per row of a band (equal bands, equal keys; others collide rarely, and a
    candidate is checked anyway)."""
    keys = np.zeros(len(band), dtype=np.uint64)
    for column in band.T:
        keys = (keys ^ column.astype(np.uint64)) * _ODD
        keys ^= keys >> np.uint64(29)
    return keys


def _bucket_pairs(sorted_keys: npt.NDArray[np.uint64]) -> tuple[Indexes, Indexes]:
    """Positions of pairs with equal keys in a sorted array: every pair of a small bucket; in a
    bucket of more than `MAX_BUCKET_PAIRS_OF`, each member with its predecessor and the first."""
    count = len(sorted_keys)
    starts = np.flatnonzero(np.diff(sorted_keys, prepend=sorted_keys[:1] ^ np.uint64(1)))
    sizes = np.diff(np.append(starts, count))
    bucket_start = np.repeat(starts, sizes)
    bucket_end = np.repeat(starts + sizes, sizes)
    large = np.repeat(sizes > MAX_BUCKET_PAIRS_OF, sizes)
    positions = np.arange(count)
    found_first, found_second = [], []
    # Large buckets: chain and star.
    chained = positions[large & (positions > bucket_start)]
    found_first += [chained - 1, bucket_start[chained]]
    found_second += [chained, chained]
    # Small buckets: every pair, one offset at a time over the members that still have one.
    members = positions[~large]
    offset = 1
    while members.size:
        members = members[members + offset < bucket_end[members]]
        found_first.append(members)
        found_second.append(members + offset)
        offset += 1
    return np.concatenate(found_first), np.concatenate(found_second)


def _agreement(distinct: Signatures, first: Indexes, second: Indexes) -> npt.NDArray[np.int64]:
    """How many of the 64 values each candidate pair shares, in chunks of bounded memory."""
    agree = np.empty(len(first), dtype=np.int64)
    chunk = 1 << 16
    for start in range(0, len(first), chunk):
        end = start + chunk
        equal = distinct[first[start:end]] == distinct[second[start:end]]
        agree[start:end] = equal.sum(axis=1)
    return agree
