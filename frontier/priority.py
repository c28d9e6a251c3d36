"""Queue order per priority strategy, and its encoding into on-disk key bytes (DESIGN.md 3, step 2).

Every strategy yields a :class:`QueueKey` ``(priority, depth, rank, arrival)`` where lower sorts
first. ``priority`` is an integer bucket in ``[0, PRIORITY_MAX]``; ``rank`` is 0 unless depth must
lead (below). The strategies:

- ``bfs``: ``(depth, arrival)``; priority is the constant :data:`NEUTRAL_PRIORITY`, so within a
  crawl the order is seed 000's FIFO by depth, and on a host shared with crawls of other
  strategies (a release merges the crawls' queues in key order, `frontier.release`) BFS URLs
  interleave with theirs instead of starving or being starved.
- ``score``: seed 002's simplified seed score, ``0.3 x in-links + 0.3 x domain authority + 0.2 x
  sitemap priority + 0.2 x 1/(depth+1)`` (inverse depth: root 1.0, depth 1 0.5, depth 2 0.33). The
  in-link count is log-normalised, ``min(1, ln(1+n) / ln(1+1000))``, so a thousand in-links
  saturate; authority and sitemap priority are in [0, 1], unknown counting 0. The score (in
  [0, 1]) becomes ``priority = round((1 - score) x 1000)``: higher score first, then depth, then
  arrival.
- ``pagerank``: a known PageRank ``p`` (the ranker's scores sum to 1, as in seed 002's formula)
  becomes ``round(min(1, -log10(p) / 10) x 1000)``: ten decades, higher rank first. Unknown is
  neutral: the bucket of ``neutral_pagerank`` when the caller knows one (1/N for N ranked pages, so
  an unranked page sorts with an average one), else :data:`NEUTRAL_PRIORITY`. Then depth.
- ``novelty`` (seed 003, penalise hubs): a target's known in-degree ``n`` (distinct pages linking to
  it) gives ``novelty = 1 / (1 + ln(1+n))``, 1.0 for an unlinked URL and falling slowly as a hub
  collects links; ``priority = round((1 - novelty) x 1000)``, then depth. Pages reached through
  hundreds of paths wait behind pages few others point to.

A crawl's ``prefer_pattern`` splits every strategy's buckets in two (:func:`preference_bucket`):
the URLs it matches take the lower half, the others the upper, so they go first whatever the
strategy, in its order; under ``bfs``, or depth first, within their depth (the rank's place).

A recrawl goes back to its host queue in :data:`RECRAWL_PRIORITY`, depth 0, rank 0: behind the
URLs still waiting for their first fetch, of every crawl and strategy, then first due first. A host
that cannot keep up with its recrawls and its new pages fetches its new pages first, except for
the recrawl turn `frontier.release` gives it every ``recrawl_every`` new pages. Recrawls put back at
their first place, in front, could otherwise take all of a busy host's fetches and keep its new
pages from ever being fetched.

Depth first under a finite budget: a partition then leases depth d+1 only when nothing of depth <= d
is queued or leased (`frontier.budget.may_lease_depth`). If a crawl's queue head on a host were a
deeper URL with a better score, the shallower URL behind it could never leave and the crawl would
stall there, so callers pass ``depth_first=True`` for such crawls: the key becomes
``(NEUTRAL_PRIORITY, depth, bucket, arrival)``, the strategy ordering URLs within one depth.

:func:`encode_priority` turns ``(priority, depth, rank)`` into 8 big-endian bytes whose byte order
is the key order; the host queue appends its 8-byte arrival sequence (`frontier.queues`), so RocksDB
key order is the full ``QueueKey`` order. :func:`encode_sort_key` includes the arrival for callers
without such a sequence.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import NamedTuple

from schemas.seeds import PriorityStrategy

PRIORITY_MAX = 1000
NEUTRAL_PRIORITY = PRIORITY_MAX // 2
RECRAWL_PRIORITY = PRIORITY_MAX + 1
"""The bucket of every recrawl, whatever the strategy: after every URL waiting for its first
fetch, and among recrawls in the order they came due (`frontier.recrawl`)."""
IN_LINK_SATURATION = 1000
PAGERANK_DECADES = 10

PRIORITY_BYTES = 8
SORT_KEY_BYTES = PRIORITY_BYTES + 8
_PRIORITY_LAYOUT = struct.Struct(">HIH")
_ARRIVAL_LAYOUT = struct.Struct(">Q")
_MAX_U16 = 2**16 - 1
_MAX_U32 = 2**32 - 1
_MAX_U64 = 2**64 - 1


class QueueKey(NamedTuple):
    """Release order inside a host queue: tuples compare as the encoded bytes do."""

    priority: int
    depth: int
    rank: int
    arrival: int


@dataclass(frozen=True, slots=True)
class ScoreWeights:
    """Seed 002's recommended weights; they sum to 1 so the score stays in [0, 1]."""

    in_links: float = 0.3
    domain_authority: float = 0.3
    sitemap_priority: float = 0.2
    inverse_depth: float = 0.2


@dataclass(frozen=True, slots=True)
class PrioritySignals:
    """What the frontier knows about a URL when it queues it; unknowns stay at their defaults."""

    in_links: int = 0
    """Distinct known pages linking to the URL."""
    domain_authority: float = 0.0
    """An estimate of the host's authority in [0, 1]."""
    sitemap_priority: float | None = None
    """A sitemap's ``<priority>`` in [0, 1]; None when the URL came from no sitemap."""
    pagerank: float | None = None
    """The link graph's latest PageRank for the URL, None before it was ranked."""
    preferred: bool | None = None
    """Whether the crawl's ``prefer_pattern`` matches the URL; None: the crawl has none."""


DEFAULT_WEIGHTS = ScoreWeights()


def queue_key(
    strategy: PriorityStrategy,
    signals: PrioritySignals,
    depth: int,
    arrival: int,
    *,
    depth_first: bool = False,
    neutral_pagerank: float | None = None,
) -> QueueKey:
    """The key of a URL for ``strategy``; see the module docstring for each formula."""
    key = _strategy_key(strategy, signals, depth, arrival, depth_first, neutral_pagerank)
    if signals.preferred is None:
        return key
    if depth_first or strategy == "bfs":  # the bucket is the rank (bfs: 0 everywhere)
        return key._replace(rank=preference_bucket(key.rank, signals.preferred))
    return key._replace(priority=preference_bucket(key.priority, signals.preferred))


def _strategy_key(
    strategy: PriorityStrategy,
    signals: PrioritySignals,
    depth: int,
    arrival: int,
    depth_first: bool,
    neutral_pagerank: float | None,
) -> QueueKey:
    if strategy == "bfs":
        return bfs_key(depth, arrival)
    if strategy == "score":
        return score_key(seed_score(signals, depth), depth, arrival, depth_first=depth_first)
    if strategy == "pagerank":
        bucket = pagerank_bucket(signals.pagerank, neutral_pagerank=neutral_pagerank)
        return _key(bucket, depth, arrival, depth_first)
    return novelty_key(signals.in_links, depth, arrival, depth_first=depth_first)


def preference_bucket(bucket: int, preferred: bool) -> int:
    """A bucket of ``[0, PRIORITY_MAX]`` moved into the lower half when ``preferred``, the upper
    half when not: preferred URLs first, each half in the strategy's order (at half its
    resolution), and every one still ahead of the recrawls."""
    half = PRIORITY_MAX // 2
    if preferred:
        return bucket // 2  # 0 .. half
    return half + 1 + bucket * (PRIORITY_MAX - half - 1) // PRIORITY_MAX  # half + 1 .. max


def bfs_key(depth: int, arrival: int) -> QueueKey:
    """Seed 000's order: depth, then arrival."""
    return QueueKey(NEUTRAL_PRIORITY, depth, 0, arrival)


def score_key(score: float, depth: int, arrival: int, *, depth_first: bool = False) -> QueueKey:
    """Higher ``score`` (in [0, 1]) first, then lower depth, then earlier arrival."""
    return _key(score_bucket(score), depth, arrival, depth_first)


def pagerank_key(
    pagerank: float | None,
    depth: int,
    arrival: int,
    *,
    depth_first: bool = False,
    neutral_pagerank: float | None = None,
) -> QueueKey:
    """Higher PageRank first (unknown is neutral), then lower depth, then earlier arrival."""
    return _key(
        pagerank_bucket(pagerank, neutral_pagerank=neutral_pagerank), depth, arrival, depth_first
    )


def novelty_key(in_links: int, depth: int, arrival: int, *, depth_first: bool = False) -> QueueKey:
    """Fewer known in-links first (hubs last), then lower depth, then earlier arrival."""
    return _key(novelty_bucket(in_links), depth, arrival, depth_first)


def seed_score(
    signals: PrioritySignals, depth: int, weights: ScoreWeights = DEFAULT_WEIGHTS
) -> float:
    """Seed 002's simplified seed score of a URL at ``depth``; in [0, 1] with default weights."""
    return (
        weights.in_links * in_link_norm(signals.in_links)
        + weights.domain_authority * _unit(signals.domain_authority)
        + weights.sitemap_priority * _unit(signals.sitemap_priority or 0.0)
        + weights.inverse_depth / (max(depth, 0) + 1)
    )


def in_link_norm(in_links: int, saturation: int = IN_LINK_SATURATION) -> float:
    """``min(1, ln(1+n) / ln(1+saturation))``: log-normalised so a few links already count."""
    return min(1.0, math.log1p(max(in_links, 0)) / math.log1p(saturation))


def score_bucket(score: float) -> int:
    """``round((1 - score) x PRIORITY_MAX)``, the score clamped to [0, 1]; NaN counts as 0."""
    return round((1.0 - _unit(score)) * PRIORITY_MAX)


def pagerank_bucket(pagerank: float | None, *, neutral_pagerank: float | None = None) -> int:
    """Ten decades of PageRank below 1 over the buckets; unknown is neutral."""
    if pagerank is None:
        if neutral_pagerank is None:
            return NEUTRAL_PRIORITY
        pagerank = neutral_pagerank
    if not pagerank > 0:
        return PRIORITY_MAX
    decades = -math.log10(pagerank) / PAGERANK_DECADES
    return round(min(1.0, max(0.0, decades)) * PRIORITY_MAX)


def novelty(in_links: int) -> float:
    """``1 / (1 + ln(1+n))``: 1.0 for a URL nothing links to yet, lower for hubs."""
    return 1.0 / (1.0 + math.log1p(max(in_links, 0)))


def novelty_bucket(in_links: int) -> int:
    return round((1.0 - novelty(in_links)) * PRIORITY_MAX)


def encode_priority(key: QueueKey) -> bytes:
    """``(priority, depth, rank)`` as 8 big-endian bytes: byte order equals key order.

    The arrival is left out: the host queue appends its own arrival sequence after these bytes.
    Raises ValueError for a field outside its width (priority and rank 16 bits, depth 32).
    """
    _check(key.priority, _MAX_U16, "priority")
    _check(key.depth, _MAX_U32, "depth")
    _check(key.rank, _MAX_U16, "rank")
    return _PRIORITY_LAYOUT.pack(key.priority, key.depth, key.rank)


def encode_sort_key(key: QueueKey) -> bytes:
    """:func:`encode_priority` followed by the arrival as 8 big-endian bytes (16 bytes in all)."""
    _check(key.arrival, _MAX_U64, "arrival")
    return encode_priority(key) + _ARRIVAL_LAYOUT.pack(key.arrival)


def decode_priority(raw: bytes) -> tuple[int, int, int]:
    """``(priority, depth, rank)`` back from the first :data:`PRIORITY_BYTES` of ``raw``."""
    priority, depth, rank = _PRIORITY_LAYOUT.unpack(raw[:PRIORITY_BYTES])
    return int(priority), int(depth), int(rank)


def _key(bucket: int, depth: int, arrival: int, depth_first: bool) -> QueueKey:
    if depth_first:
        return QueueKey(NEUTRAL_PRIORITY, depth, bucket, arrival)
    return QueueKey(bucket, depth, 0, arrival)


def _unit(value: float) -> float:
    """``value`` clamped to [0, 1]; NaN becomes 0 so a bad hint cannot poison the order."""
    return 0.0 if math.isnan(value) else min(1.0, max(0.0, value))


def _check(value: int, maximum: int, name: str) -> None:
    if not 0 <= value <= maximum:
        raise ValueError(f"queue key {name} {value} outside 0..{maximum}")


RECRAWL_PRIORITY_BYTES = encode_priority(QueueKey(RECRAWL_PRIORITY, 0, 0, 0))
"""The priority bytes of every recrawl's queue key."""
