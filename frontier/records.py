"""The frontier's tables, their key layouts and the records stored in them (compact JSON).

All tables live in the state partition's RocksDB (one column family each). Integers in keys are
big-endian so byte order is numeric order; strings are UTF-8; NUL separates a string from what
follows (crawl ids and host keys never contain NUL).

==========  =================================  ===============================================
table       key                                value
==========  =================================  ===============================================
visited     crawl_id NUL fingerprint(16)       :class:`VisitedRecord`
queue       host NUL crawl_id NUL              `frontier.queues.QueuedUrl`
            priority-bytes seq(8)
shelved     crawl_id NUL queue key             written by an earlier version (a paused crawl's
                                               queue entries); put back in the queue by
                                               `frontier.upgrade`, never written now
leases      lease_id                           :class:`LeaseRecord`
deadlines   deadline_ms(8) lease_id            empty: the lease-expiry timer index
delayed     due_ms(8) seq(8)                   :class:`DelayedEntry` (retry or recrawl)
hosts       host                               :class:`HostState` (absent when idle)
host_pages  host NUL crawl_id                  pages of the crawl admitted for the host (8)
crawl       crawl_id                           :class:`CrawlRecord` of this partition
owned       crawl_id                           CrawlState JSON, on the crawl's owner only
ledger      crawl_id                           `frontier.budget.BudgetLedger`, owner only
reports     crawl_id NUL lease_id              :class:`ReportWait`
received    crawl_id NUL origin NUL host NUL   empty: a DiscoveredUrls counted once
            part(4)                            (`frontier.admission`)
pending     crawl_id NUL seq(8)                DiscoveredUrls JSON whose crawl is unknown yet
scores      fingerprint(16)                    {"pagerank": latest PageRank of the URL}
meta        ``sequence``                       the partition's arrival counter (8)
==========  =================================  ===============================================

The priority bytes of a queue key are `frontier.priority.encode_priority` followed by a 14-byte BFS
ordinal (see `frontier.admission`), so a crawl's queue on a host releases in (priority, depth, BFS
order).

Every key of a crawl, whatever its table, is deleted once the crawl has been finished for the
retention (`frontier.purge`, which says how keys not prefixed by the crawl id are found).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, get_args

import orjson

from frontier.budget import BudgetAccount, depth_counter
from frontier.fields import ABSENT_FIELD, pack_field, unpack_fields
from frontier.retry import LeaseWindow
from schemas.outcomes import MAX_STATUS, OutcomeKind

VISITED = "visited"
QUEUE = "queue"
SHELVED = "shelved"
LEASES = "leases"
DEADLINES = "deadlines"
DELAYED = "delayed"
HOSTS = "hosts"
HOST_PAGES = "host_pages"
CRAWL = "crawl"
TALLY = "tally"
OWNED = "owned"
LEDGER = "ledger"
REPORTS = "reports"
RECEIVED = "received"
PENDING = "pending"
SCORES = "scores"
META = "meta"

TABLES: tuple[str, ...] = (
    VISITED,
    QUEUE,
    SHELVED,
    LEASES,
    DEADLINES,
    DELAYED,
    HOSTS,
    HOST_PAGES,
    CRAWL,
    TALLY,
    OWNED,
    LEDGER,
    REPORTS,
    RECEIVED,
    PENDING,
    SCORES,
    META,
)

SEPARATOR = b"\x00"
SEQUENCE_KEY = b"sequence"
_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")

UrlState = Literal["queued", "leased", "done", "dead", "waiting"]
DelayKind = Literal["retry", "recrawl"]

R = TypeVar("R")


def u64(value: int) -> bytes:
    return _U64.pack(value)


def read_u64(raw: bytes) -> int:
    return int(_U64.unpack(raw[:8])[0])


def visited_prefix(crawl_id: str) -> bytes:
    return crawl_prefix(crawl_id)


def visited_key(crawl_id: str, fingerprint: bytes) -> bytes:
    return visited_prefix(crawl_id) + fingerprint


def deadline_key(deadline_ms: int, lease_id: str) -> bytes:
    return u64(deadline_ms) + lease_id.encode()


def delayed_key(due_ms: int, sequence: int) -> bytes:
    return u64(due_ms) + u64(sequence)


def host_pages_key(host: str, crawl_id: str) -> bytes:
    return host.encode() + SEPARATOR + crawl_id.encode()


def crawl_prefix(crawl_id: str) -> bytes:
    """The prefix of every key of a crawl in the tables keyed by crawl first."""
    return crawl_id.encode() + SEPARATOR


def report_key(crawl_id: str, lease_id: str) -> bytes:
    return crawl_prefix(crawl_id) + lease_id.encode()


def received_key(crawl_id: str, origin: str, host: str, part: int) -> bytes:
    return SEPARATOR.join((crawl_id.encode(), origin.encode(), host.encode(), _U32.pack(part)))


def pending_prefix(crawl_id: str) -> bytes:
    return crawl_prefix(crawl_id)


def pending_key(crawl_id: str, sequence: int) -> bytes:
    return pending_prefix(crawl_id) + u64(sequence)


def pending_crawl_of(key: bytes) -> str:
    return key.split(SEPARATOR, 1)[0].decode()


def dump(data: Any) -> bytes:
    """Compact JSON of a dict or a dataclass (nested dataclasses included), by orjson."""
    return orjson.dumps(data)


def decode_tally(raw: bytes | None) -> dict[str, int]:
    return {} if raw is None else {str(k): int(v) for k, v in orjson.loads(raw).items()}


def _load(cls: type[R], raw: bytes) -> R:
    return cls(**orjson.loads(raw))


@dataclass
class VisitedRecord:
    """One URL of one crawl as this partition knows it.

    ``queue_key`` (hex) is the URL's place in its host queue, kept after a lease so that a retry or
    an expired lease goes back to the same place; ``state`` says whether it is there now. ``rank``
    is the partition sequence at the URL's first lease: its pages' links sort by it (BFS order).
    ``charged`` says the URL already cost one unit of the crawl's budget. ``outcome`` is the label
    of its latest accepted outcome (`schemas.outcomes.outcome_label`): per crawl, the partition
    counts its URLs by it (``outcome_<label>``), so a crawl's URLs by last outcome need no reading
    of `outcomes`. ``recrawl_interval_ms`` is the interval its last recrawl was scheduled after
    (`frontier.recrawl`; None: never scheduled). ``due_ms`` is when a URL ``waiting`` for a retry
    or a recrawl is queued again (None in the other states).
    """

    depth: int
    state: UrlState
    queue_key: str | None = None
    lease_id: str | None = None
    attempts: int = 0
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    rank: int | None = None
    charged: bool = False
    outcome: str | None = None
    recrawl_interval_ms: int | None = None
    due_ms: int | None = None

    def encode(self) -> bytes:
        """The binary record (see :data:`_VISITED_HEAD`): one is written per admitted URL; a URL
        queued and never leased in the short form of :func:`encode_queued`."""
        if self.queue_key is not None and self == VisitedRecord(
            self.depth, "queued", self.queue_key
        ):
            return encode_queued(self.depth, bytes.fromhex(self.queue_key))
        flags = (1 if self.charged else 0) | (0 if self.rank is None else 2)
        times = (self.recrawl_interval_ms, self.due_ms)
        timed = times != (None, None)
        head = _VISITED_HEAD.pack(
            _BINARY_V4 if timed else _BINARY,
            self.depth,
            _STATE_CODES[self.state],
            flags,
            self.attempts,
            self.rank or 0,
            outcome_code(self.outcome),
        )
        queue_key = None if self.queue_key is None else bytes.fromhex(self.queue_key)
        optional = (self.lease_id, self.etag, self.last_modified, self.content_hash)
        if all(value is None for value in optional):
            strings = _NO_STRINGS
        else:
            strings = b"".join(
                _field(None if value is None else value.encode()) for value in optional
            )
        if not timed:
            return head + _field(queue_key) + strings
        return (
            head
            + _field(queue_key)
            + strings
            + b"".join(_field(None if value is None else _U64.pack(value)) for value in times)
        )

    @classmethod
    def decode(cls, raw: bytes) -> VisitedRecord:
        if raw[:1] == _QUEUED_BYTE:
            return cls(int.from_bytes(raw[1:5], "big"), "queued", raw[5:].hex())
        count = 5
        if raw[:1] in (_BINARY_BYTE, _BINARY_V4_BYTE):
            version, depth, state, flags, attempts, rank, outcome = _VISITED_HEAD.unpack_from(raw)
            offset, count = _VISITED_HEAD.size, 5 if version == _BINARY else 7
        elif raw[:1] == _BINARY_V1_BYTE:
            _, depth, state, flags, attempts, rank = _VISITED_HEAD_V1.unpack_from(raw)
            outcome, offset = 0, _VISITED_HEAD_V1.size
        else:
            return _load(cls, raw)  # written as JSON by an earlier version
        fields = unpack_fields(raw, offset, count)
        queue_key, lease_id, etag, last_modified, content_hash = fields[:5]
        interval, due = (None, None) if count == 5 else (_time(fields[5]), _time(fields[6]))
        return cls(
            depth,
            _STATES[state],
            None if queue_key is None else queue_key.hex(),
            _text(lease_id),
            attempts,
            _text(etag),
            _text(last_modified),
            _text(content_hash),
            rank if flags & 2 else None,
            bool(flags & 1),
            outcome_label_of(outcome),
            interval,
            due,
        )


def encode_queued(depth: int, queue_key: bytes) -> bytes:
    """``VisitedRecord(depth, "queued", queue_key=queue_key.hex()).encode()``, without the
    record: the record of every URL admitted (the short form, see :data:`_QUEUED`)."""
    return queued_head(depth) + queue_key


def queued_head(depth: int) -> bytes:
    """What :func:`encode_queued` puts before the queue key: the same for a message's URLs."""
    return _QUEUED_HEAD.pack(_QUEUED, depth)


def peek_depth(raw: bytes) -> int:
    """The depth of an encoded visited record, without decoding the rest (duplicates need only
    that: a URL found again is moved only when found at a lower depth)."""
    if raw[:1] in _BINARY_BYTES:
        return int.from_bytes(raw[1:5], "big")
    return int(json.loads(raw)["depth"])


_BINARY = 3
_BINARY_BYTE = bytes([_BINARY])
_VISITED_HEAD = struct.Struct(">BIBBHQH")
"""version 3, depth, state code, flags (1 charged, 2 rank present), attempts, rank, outcome code
(:func:`outcome_code`); then queue_key (raw bytes), lease_id, etag, last_modified and
content_hash, each a u16 length (0xFFFF: absent) and its bytes. Version 4 is version 3 with two
more fields, the recrawl interval and the due time (milliseconds, u64); a record with neither is
written as version 3.
Version 1 is version 3 without the outcome code; it and a JSON record (first byte ``{``) from an
earlier version still decode."""
_BINARY_V4 = 4
_BINARY_V4_BYTE = bytes([_BINARY_V4])
_BINARY_V1_BYTE = bytes([1])
_VISITED_HEAD_V1 = struct.Struct(">BIBBHQ")
_QUEUED = 2
_QUEUED_BYTE = bytes([_QUEUED])
_QUEUED_HEAD = struct.Struct(">BI")
"""The short form, version 2, of a URL queued and never leased (state ``queued``, no attempts,
rank, charge, lease or validators): version, depth, then the queue key's raw bytes to the end,
22 bytes less than version 1. It is what admission writes for every URL, so
it is most of the visited table's bytes. Versions 1 to 4 and JSON are read alike, whichever
version wrote them; the other states are written as version 3 or 4."""
_BINARY_BYTES = (_BINARY_BYTE, _BINARY_V4_BYTE, _BINARY_V1_BYTE, _QUEUED_BYTE)
_NO_STRINGS = ABSENT_FIELD * 4
_STATES: tuple[UrlState, ...] = ("queued", "leased", "done", "dead", "waiting")
_STATE_CODES: dict[str, int] = {state: code for code, state in enumerate(_STATES)}


_KIND_CODES = MAX_STATUS
"""Outcome codes: 0 none, an HTTP status as itself, an outcome kind (no status) `MAX_STATUS` +
its index in `OutcomeKind`."""
_KINDS: tuple[str, ...] = get_args(OutcomeKind)


def outcome_code(label: str | None) -> int:
    """The u16 a visited record stores for a label of `schemas.outcomes.outcome_label`."""
    if label is None:
        return 0
    if label.isdigit():
        return int(label)
    return _KIND_CODES + _KINDS.index(label)


def outcome_label_of(code: int) -> str | None:
    if code == 0:
        return None
    return str(code) if code < _KIND_CODES else _KINDS[code - _KIND_CODES]


def _field(value: bytes | None) -> bytes:
    return pack_field(value, "visited record")


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


def _time(value: bytes | None) -> int | None:
    return None if value is None else read_u64(value)


@dataclass(frozen=True)
class LeaseRecord:
    """An open lease: which URL, until when, and its attempt number (1 for the first fetch)."""

    lease_id: str
    crawl_id: str
    url: str
    host: str
    depth: int
    deadline_ms: int
    attempts: int
    redirect_hops: int = 0

    def encode(self) -> bytes:
        return dump(dict(self.__dict__))

    @classmethod
    def decode(cls, raw: bytes) -> LeaseRecord:
        return _load(cls, raw)


@dataclass(frozen=True)
class DelayedEntry:
    """A URL waiting for a retry's backoff or its recrawl to come due."""

    kind: DelayKind
    crawl_id: str
    url: str
    host: str
    depth: int
    attempts: int = 0
    redirect_hops: int = 0

    def encode(self) -> bytes:
        return dump(dict(self.__dict__))

    @classmethod
    def decode(cls, raw: bytes) -> DelayedEntry:
        return _load(cls, raw)


@dataclass
class HostState:
    """A host's leases in flight, its lease window (see `frontier.retry.LeaseWindow`) and its hold:
    ``held_until_ms``, when set, is the epoch ms before which none of its URLs is leased
    (`frontier.outcomes.hold_host`)."""

    in_flight: int = 0
    reduced: int | None = None
    successes: int = 0
    held_until_ms: int | None = None
    new_since_recrawl: int = 0
    """New pages of recrawling crawls leased since the host's last recrawl lease (the recrawl
    turn, `frontier.release`); kept across idle moments, so a polite host counts too."""

    @property
    def window(self) -> LeaseWindow:
        return LeaseWindow(self.reduced, self.successes)

    @window.setter
    def window(self, window: LeaseWindow) -> None:
        self.reduced = window.reduced
        self.successes = window.successes

    @property
    def idle(self) -> bool:
        return (
            self.in_flight == 0
            and self.reduced is None
            and self.held_until_ms is None
            and self.new_since_recrawl == 0
        )

    def encode(self) -> bytes:
        return dump(self)

    @classmethod
    def decode(cls, raw: bytes) -> HostState:
        return _load(cls, raw)


ReportState = Literal["waiting", "early", "reported"]


@dataclass(frozen=True)
class ReportWait:
    """A fetched page's ParseReport, by lease: each lease's outcome and report count once, however
    often they are delivered (`frontier.reports`).

    ``waiting``: the outcome came saying a page was sent, the report has not. ``early``: the report
    came first (reports and outcomes travel on different topics). ``reported``: both came. The
    record stays until the crawl is purged, so a repeated outcome or report finds it and counts
    nothing. ``depth``: the depth a waiting record holds unfinished (None when its outcome came
    after the lease had closed: the URL's new lease holds it).
    """

    crawl_id: str
    state: ReportState
    depth: int | None = None

    def encode(self) -> bytes:
        return dump(self)

    @classmethod
    def decode(cls, raw: bytes) -> ReportWait:
        return _load(cls, raw)


@dataclass
class CrawlRecord:
    """This partition's state for one crawl.

    ``counters`` are cumulative counts and gauges (`frontier.progress` names them). ``unfinished``
    counts, per depth, URLs queued, leased or waiting for a retry plus pages awaiting their
    ParseReport: the BFS-prefix rule leases only the lowest such depth. ``waiting_budget`` counts,
    per depth, queued URLs not yet charged to the budget. ``account`` exists for finite-budget
    crawls.
    ``snapshot``, ``published_at`` and ``dirty`` drive progress publication.
    """

    crawl_id: str
    counters: dict[str, int] = field(default_factory=dict)
    unfinished: dict[str, int] = field(default_factory=dict)
    waiting_budget: dict[str, int] = field(default_factory=dict)
    account: BudgetAccount | None = None
    snapshot: int = 0
    published_at: int = 0
    dirty: bool = True

    def lowest_unfinished(self) -> int | None:
        depths = [int(depth) for depth, count in self.unfinished.items() if count > 0]
        return min(depths) if depths else None

    def add_unfinished(self, depth: int, delta: int) -> bool:
        """Change the count at ``depth``; True when that depth just became empty."""
        left = self.unfinished.get(str(depth), 0) + delta
        if left > 0:
            self.unfinished[str(depth)] = left
            return False
        self.unfinished.pop(str(depth), None)
        return delta < 0

    def progress_counters(self, tally: Mapping[str, int] | None = None) -> dict[str, int]:
        """What a progress snapshot publishes: the counters plus the tally's (`frontier.session`),
        the per-depth ``unfinished`` gauges and the budget account's."""
        counters = dict(self.counters)
        for name, value in (tally or {}).items():
            counters[name] = counters.get(name, 0) + value
        for depth, count in self.unfinished.items():
            counters[depth_counter("unfinished", int(depth))] = count
        if self.account is not None:
            counters["budget_available"] = self.account.available
            counters["budget_consumed"] = self.account.consumed
        return counters

    def add_waiting(self, depth: int, delta: int) -> None:
        """Change the count of queued URLs waiting for budget at ``depth``."""
        left = self.waiting_budget.get(str(depth), 0) + delta
        if left > 0:
            self.waiting_budget[str(depth)] = left
        else:
            self.waiting_budget.pop(str(depth), None)

    def waiting_at(self, depth: int) -> int:
        return self.waiting_budget.get(str(depth), 0)

    def encode(self) -> bytes:
        return dump(self)

    @classmethod
    def decode(cls, raw: bytes) -> CrawlRecord:
        data = orjson.loads(raw)
        account = data.pop("account")
        record = cls(**data)
        record.account = None if account is None else BudgetAccount(**account)
        return record
