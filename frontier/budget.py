"""max_links as a hard cap across partitions, and the BFS-prefix lease rule (DESIGN.md section 4).

Which crawls go depth by depth across partitions (:func:`depth_ordered`): those with a finite
budget, and ``bfs`` crawls with a finite max_depth. Without the rule each host's queue is still
in depth order, but hosts run at their own pace: a small host can reach its depth-4 pages while a
big one is still on depth 2, so a URL two clicks from the seed through the big host may first be
found four clicks deep through the small one and leased there. Its links then sit one depth too
deep, and at max_depth they are cut: pages within max_depth are never fetched (seen in
`tests/e2e/test_scale.py` before the rule covered max_depth crawls).

The rule, for a depth-ordered crawl: a partition leases a URL of depth d only when no depth below d
*blocks* (:func:`lease_depth_limit`): no URL of it unfinished on any partition and no DiscoveredUrls
of it still travelling, going by the latest progress snapshot of every other partition and this
partition's live counters (its own snapshot may be older than its state: its newest announcements
must count). Snapshots of others only lag, and a lagging snapshot can only hold the limit lower, as
`frontier.progress` argues for done detection; so once a depth is leased every URL of a lower depth
is known at its shortest depth and the fetched set is the BFS prefix whatever the host sizes. Until
the seeds' announcement is in view the limit is depth 0. Hosts parked by the limit are woken when
it rises (the tick compares it once per progress interval).

The owner of a crawl (the partition holding its crawl id) keeps a :class:`BudgetLedger`; every
partition with that crawl's URLs keeps a :class:`BudgetAccount` and spends one unit per distinct URL
it leases. They talk through the `budget` topic (`schemas.budget`):

- The account asks only when it is below a low-water mark (default 16) and has URLs waiting for
  budget, for ``min(chunk, waiting - available)`` (chunk default 64). Asking for no more than it
  can use keeps budget from being stranded on a partition with few URLs while another starves:
  there is no message to hand budget back.
- One request is outstanding at a time. Request ids are ``<partition>-<sequence>``, the sequence
  persisted with the account, so an account restored after a crash, or resending after
  ``resend_after_ms`` without an answer, sends the same id again.
- The ledger grants ``min(wanted, max_links - granted)`` and remembers the answer per request id
  (the last 64 per partition), so a redelivered or resent request gets the same answer and never a
  second grant. The total granted therefore never exceeds max_links.
- The account applies a grant only for its outstanding request id: a duplicate grant adds nothing.
  A zero grant means the crawl's budget is spent, and the account stops asking. A partial grant
  does not: after a crash the ledger may answer a reused id with what an earlier incarnation asked
  for, so the account asks again and learns of exhaustion from a zero.

The budget in breadth-first order. The lease rule above keeps a partition from leasing depth d+1
while anything of depth <= d is unfinished, but the budget itself must also go to the lowest depths
of the whole crawl: a partition done with depth 1 must not spend the last units on
depth 2 while another partition's depth-1 URLs are still travelling to it. So:

- A request carries ``depth``, the partition's lowest unfinished depth, and asks only for the URLs
  waiting for budget at that depth (the only depth it may lease). A partition whose lowest depth
  drops below that of its unanswered request sends a new request (new id) that replaces the old
  one at the owner; it still accepts a late grant for the replaced id.
- The ledger has an ``open_depth`` (0 at first, never decreasing). A request of depth <=
  ``open_depth`` is answered at once; a deeper one is *held* (one per partition). Once nothing is
  left to grant, every held request is answered with zero.
- The owner's tick computes from the progress view (the latest snapshot of every partition) the
  lowest *blocking* depth: the lowest q with URLs unfinished at q (``unfinished_d<q>``) or
  DiscoveredUrls of depth q announced but not yet admitted (``announced_d<q>`` > ``admitted_d<q>``).
  Every depth below it is finished everywhere and nothing of it is travelling, so requests up to it
  may be granted; with no blocking depth at all, every held request may. When that is above
  ``open_depth`` the owner sends itself a BudgetRecheck; handling it (an input, so a redelivery
  makes the same grants from the same ledger) raises ``open_depth`` and answers the held requests
  it opens, lowest depth first, then in arrival order.

Recrawls are outside this bookkeeping (`frontier.recrawl.is_recrawl`): they are leased whatever
the depth limit and hold no depth unfinished, so a continuous crawl's recrawls of low depths never
keep the higher ones back.

``open_depth`` never decreases: once every depth below D is finished everywhere, nothing can add a
URL below D (links are one deeper than their page, redirects and sitemaps as deep as theirs). The
per-depth counters exist for depth-ordered crawls only. Like done detection, it compares with ">="
(repeats count once, `frontier.admission`): a page's messages may be admitted before its report
is counted, while the page itself still holds its depth unfinished.

Both classes serialise to JSON bytes for the partition's state store.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from schemas.budget import BudgetGrant, BudgetRequest
from schemas.seeds import CrawlRequest

UNLIMITED = -1
DEFAULT_LOW_WATER = 16
DEFAULT_CHUNK = 64
DEFAULT_RESEND_AFTER_MS = 30_000
REMEMBERED_REQUESTS_PER_PARTITION = 64
REMEMBERED_REPLACED_IDS = 8


def depth_counter(name: str, depth: int) -> str:
    """The progress counter of ``name`` (unfinished, announced, admitted) at one depth."""
    return f"{name}_d{depth}"


def blocking_depth(views: Iterable[Mapping[str, int]]) -> int | None:
    """The lowest depth with URLs unfinished or DiscoveredUrls still travelling, over the latest
    progress counters of every partition; None when there is none."""
    unfinished: set[int] = set()
    announced: dict[int, int] = {}
    admitted: dict[int, int] = {}
    for counters in views:
        for name, value in counters.items():
            if "_d" not in name:
                continue
            base, _, depth_text = name.rpartition("_d")
            if not depth_text.isdigit():
                continue
            depth = int(depth_text)
            if base == "unfinished" and value > 0:
                unfinished.add(depth)
            elif base == "announced":
                announced[depth] = announced.get(depth, 0) + value
            elif base == "admitted":
                admitted[depth] = admitted.get(depth, 0) + value
    travelling = {d for d, n in announced.items() if admitted.get(d, 0) < n}
    blocking = unfinished | travelling
    return min(blocking) if blocking else None


def depth_ordered(request: CrawlRequest) -> bool:
    """Whether the crawl leases depth by depth across partitions (see the module docstring)."""
    return request.max_links != UNLIMITED or (
        request.max_depth != UNLIMITED and request.priority == "bfs"
    )


def lease_depth_limit(views: Iterable[Mapping[str, int]]) -> int | None:
    """The deepest depth a partition may lease, from the progress counters of every partition
    (this one's live): the lowest blocking depth, 0 while no view shows the seeds announced, None
    when nothing blocks."""
    views = list(views)
    seeds = depth_counter("announced", 0)
    if not any(view.get(seeds, 0) > 0 for view in views):
        return 0
    return blocking_depth(views)


def may_lease_depth(depth: int, limit: int | None) -> bool:
    """Whether a URL at ``depth`` may be leased under a depth limit (None: no limit).

    With :func:`lease_depth_limit` as the limit, a partition leases depth d+1 only when nothing of
    depth <= d is queued, leased, waiting for its ParseReport or travelling anywhere, so the leased
    set follows seed 000's trace exactly.
    """
    return limit is None or depth <= limit


@dataclass
class BudgetLedger:
    """The owner's record of one crawl's budget: what it granted in total and to which request."""

    crawl_id: str
    max_links: int
    granted_total: int = 0
    recent: dict[int, dict[str, int]] = field(default_factory=dict)
    """Per partition, the last answers by request id, oldest first."""
    open_depth: int = 0
    """Requests up to this depth are answered at once (see the module docstring)."""
    held: list[BudgetRequest] = field(default_factory=list)
    """Deeper requests waiting for their depth to open, at most one per partition, in arrival
    order."""

    @property
    def left(self) -> int | None:
        """Budget not yet granted; None for an unlimited crawl."""
        return None if self.max_links == UNLIMITED else self.max_links - self.granted_total

    def grant(self, request: BudgetRequest) -> int:
        """The amount granted to ``request``: never more than is left, the same for a resend."""
        if request.crawl_id != self.crawl_id:
            raise ValueError(
                f"budget request for {request.crawl_id!r} at the ledger of {self.crawl_id!r}"
            )
        answers = self.recent.setdefault(request.partition, {})
        earlier = answers.get(request.request_id)
        if earlier is not None:
            return earlier
        left = self.left
        amount = request.wanted if left is None else max(0, min(request.wanted, left))
        self.granted_total += amount
        answers[request.request_id] = amount
        while len(answers) > REMEMBERED_REQUESTS_PER_PARTITION:
            del answers[next(iter(answers))]
        return amount

    def grant_message(self, request: BudgetRequest) -> BudgetGrant:
        """:meth:`grant`, as the BudgetGrant to send back to the requesting partition."""
        return BudgetGrant(
            crawl_id=self.crawl_id,
            partition=request.partition,
            granted=self.grant(request),
            request_id=request.request_id,
        )

    def receive(self, request: BudgetRequest) -> list[BudgetGrant]:
        """A request arrived: the grants to send now (none while it is held)."""
        answers = self.recent.get(request.partition, {})
        if request.request_id in answers:
            return [self.grant_message(request)]
        if any(
            h.partition == request.partition and h.request_id == request.request_id
            for h in self.held
        ):
            return []
        self.held = [h for h in self.held if h.partition != request.partition]
        if request.depth <= self.open_depth or self.left == 0:
            return [self.grant_message(request), *self._refuse_held()]
        self.held.append(request)
        return []

    def open(self, depth: int) -> list[BudgetGrant]:
        """Every depth below ``depth`` is finished everywhere: answer the requests it opens."""
        self.open_depth = max(self.open_depth, depth)
        opened = sorted((h for h in self.held if h.depth <= self.open_depth), key=lambda h: h.depth)
        self.held = [h for h in self.held if h.depth > self.open_depth]
        return [*(self.grant_message(h) for h in opened), *self._refuse_held()]

    def _refuse_held(self) -> list[BudgetGrant]:
        """With nothing left to grant, every held request is answered (with zero)."""
        if self.left != 0:
            return []
        refused, self.held = self.held, []
        return [self.grant_message(h) for h in refused]

    def to_bytes(self) -> bytes:
        recent = [
            [partition, request_id, amount]
            for partition, answers in self.recent.items()
            for request_id, amount in answers.items()
        ]
        return _dump(
            {
                "crawl_id": self.crawl_id,
                "max_links": self.max_links,
                "granted_total": self.granted_total,
                "recent": recent,
                "open_depth": self.open_depth,
                "held": [h.model_dump() for h in self.held],
            }
        )

    @classmethod
    def from_bytes(cls, raw: bytes) -> BudgetLedger:
        data = json.loads(raw)
        recent: dict[int, dict[str, int]] = {}
        for partition, request_id, amount in data["recent"]:
            recent.setdefault(int(partition), {})[str(request_id)] = int(amount)
        return cls(
            crawl_id=str(data["crawl_id"]),
            max_links=int(data["max_links"]),
            granted_total=int(data["granted_total"]),
            recent=recent,
            open_depth=int(data.get("open_depth", 0)),
            held=[BudgetRequest.model_validate(h) for h in data.get("held", [])],
        )


@dataclass
class BudgetAccount:
    """One partition's share of one crawl's budget: granted but unspent, spent, and the request
    in flight."""

    crawl_id: str
    partition: int
    available: int = 0
    consumed: int = 0
    exhausted: bool = False
    next_sequence: int = 0
    pending_id: str | None = None
    pending_wanted: int = 0
    pending_since_ms: int = 0
    pending_depth: int = 0
    replaced: list[str] = field(default_factory=list)
    """Ids of requests replaced by a shallower one: their late grants still count."""

    def try_consume(self, count: int = 1) -> bool:
        """Spend ``count`` units for URLs about to be leased; False (nothing spent) if short."""
        if count < 0:
            raise ValueError("cannot consume a negative budget")
        if self.available < count:
            return False
        self.available -= count
        self.consumed += count
        return True

    def wants_more(
        self, waiting: int, depth: int = 0, *, low_water: int = DEFAULT_LOW_WATER
    ) -> bool:
        """Whether to ask the owner for more, with ``waiting`` URLs of the crawl needing budget at
        ``depth``: when nothing is outstanding, or only a request for a deeper depth."""
        return (
            not self.exhausted
            and (self.pending_id is None or depth < self.pending_depth)
            and self.available < low_water
            and waiting > self.available
        )

    def request(
        self,
        waiting: int,
        now_ms: int,
        *,
        depth: int = 0,
        low_water: int = DEFAULT_LOW_WATER,
        chunk: int = DEFAULT_CHUNK,
    ) -> BudgetRequest | None:
        """A new request when :meth:`wants_more`, recorded as outstanding; otherwise None."""
        if not self.wants_more(waiting, depth, low_water=low_water):
            return None
        if self.pending_id is not None:
            self.replaced = [*self.replaced, self.pending_id][-REMEMBERED_REPLACED_IDS:]
        self.pending_id = f"{self.partition}-{self.next_sequence}"
        self.next_sequence += 1
        self.pending_wanted = max(1, min(chunk, waiting - self.available))
        self.pending_since_ms = now_ms
        self.pending_depth = depth
        return self._pending_request()

    def resend(
        self, now_ms: int, *, after_ms: int = DEFAULT_RESEND_AFTER_MS
    ) -> BudgetRequest | None:
        """The outstanding request again, same id, when unanswered for ``after_ms``."""
        if self.pending_id is None or now_ms - self.pending_since_ms < after_ms:
            return None
        self.pending_since_ms = now_ms
        return self._pending_request()

    def apply(self, grant: BudgetGrant) -> int:
        """Add a grant for the outstanding request; returns what was added (0 for a duplicate)."""
        if grant.crawl_id != self.crawl_id or grant.partition != self.partition:
            return 0
        if grant.request_id in self.replaced:
            self.replaced = [r for r in self.replaced if r != grant.request_id]
            self.available += grant.granted
            return grant.granted
        if grant.request_id != self.pending_id:
            return 0
        self.pending_id = None
        self.pending_wanted = 0
        self.pending_depth = 0
        if grant.granted == 0:
            self.exhausted = True
        self.available += grant.granted
        return grant.granted

    def _pending_request(self) -> BudgetRequest:
        if self.pending_id is None:
            raise ValueError("no budget request outstanding")
        return BudgetRequest(
            crawl_id=self.crawl_id,
            partition=self.partition,
            wanted=self.pending_wanted,
            request_id=self.pending_id,
            depth=self.pending_depth,
        )

    def to_bytes(self) -> bytes:
        return _dump(asdict(self))

    @classmethod
    def from_bytes(cls, raw: bytes) -> BudgetAccount:
        data = json.loads(raw)
        pending = data["pending_id"]
        return cls(
            crawl_id=str(data["crawl_id"]),
            partition=int(data["partition"]),
            available=int(data["available"]),
            consumed=int(data["consumed"]),
            exhausted=bool(data["exhausted"]),
            next_sequence=int(data["next_sequence"]),
            pending_id=None if pending is None else str(pending),
            pending_wanted=int(data["pending_wanted"]),
            pending_since_ms=int(data["pending_since_ms"]),
            pending_depth=int(data.get("pending_depth", 0)),
            replaced=[str(r) for r in data.get("replaced", [])],
        )


def _dump(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":"), sort_keys=True).encode("utf-8")
