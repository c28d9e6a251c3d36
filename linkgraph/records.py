"""What the link graph keeps per partition, and how it is laid out in RocksDB.

Four tables (column families) of one state partition p, which holds every URL whose murmur2
partition is p (`links` is keyed by source, `links.by-target` partitioned by target, both with the
deployment's partition count, so one instance owns a URL's out-links, in-links and node):

- ``forward``: ``from_url TAB to_url`` -> edge record (seed 002's fields; from/to are the key).
- ``reverse``: ``to_url TAB from_url`` -> the same edge record, built from `links.by-target`.
- ``anchors``: ``to_url TAB anchor_text TAB from_url`` -> empty, one entry per live in-link with a
  text, so an in-link is indexed by blind writes; the anchors query counts a target's entries per
  text (a prefix scan of its in-links, as the in-links query does).
- ``nodes``: ``url`` -> node record; plus one partition summary under ``STATS_KEY``.

Values are compact JSON (orjson) with named fields, so a changelog record reads on its own and an
older reader ignores fields it does not know. Canonical URLs never contain a TAB (it is
percent-encoded), so the separator cannot occur inside a URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import orjson

from linkgraph.exceptions import CorruptRecordError

FORWARD = "forward"
REVERSE = "reverse"
ANCHORS = "anchors"
NODES = "nodes"
TABLES = (FORWARD, REVERSE, ANCHORS, NODES)

SEPARATOR = "\t"
STATS_KEY = b"\x00stats"
"""Sorts before every URL; the per-partition counts behind the size gauges."""
MAX_CRAWL_IDS = 16
"""A node remembers at most this many crawls that saw it (bounded record size)."""


def edge_key(first: str, second: str) -> bytes:
    return f"{first}{SEPARATOR}{second}".encode()


def anchor_key(to_url: str, text: str, from_url: str) -> bytes:
    """The text may hold a TAB; the source URL cannot, so it is what follows the last one."""
    return f"{to_url}{SEPARATOR}{text}{SEPARATOR}{from_url}".encode()


def anchor_text_of(key: bytes, prefix: bytes) -> str:
    return key[len(prefix) : key.rindex(b"\t")].decode()


def prefix_of(url: str) -> bytes:
    return f"{url}{SEPARATOR}".encode()


def split_key(key: bytes) -> tuple[str, str]:
    first, _, second = key.decode().partition(SEPARATOR)
    return first, second


def _loads(raw: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise CorruptRecordError(f"undecodable record: {error}") from error
    if not isinstance(value, dict):
        raise CorruptRecordError("a record is a JSON object")
    return value


@dataclass
class EdgeRecord:
    """One edge; the same record in the forward and the reverse index."""

    anchor_text: str
    context_window: str
    link_type: str
    position: str
    discovered_at: int
    last_seen_at: int
    rel: list[str] = field(default_factory=list)
    gone: bool = False
    """The source's latest complete fetch no longer has this link (kept, not forgotten)."""

    def encode(self) -> bytes:
        """Its fields in order, by orjson's own dataclass serialiser (no dict built per record)."""
        return orjson.dumps(self)

    @classmethod
    def decode(cls, raw: bytes) -> EdgeRecord:
        value = _loads(raw)
        if value.keys() == _EDGE_FIELDS:  # a record this version wrote: taken as it is
            record = cls.__new__(cls)
            record.__dict__ = value
            return record
        try:
            return cls(
                anchor_text=value["anchor_text"],
                context_window=value["context_window"],
                link_type=value["link_type"],
                position=value["position"],
                discovered_at=value["discovered_at"],
                last_seen_at=value["last_seen_at"],
                rel=value.get("rel", []),
                gone=value.get("gone", False),
            )
        except KeyError as error:
            raise CorruptRecordError(f"edge record without {error}") from error

    def as_json(self, from_url: str, to_url: str) -> dict[str, Any]:
        """The API's edge record: seed 002's fields plus rel and gone."""
        return {
            "from_url": from_url,
            "to_url": to_url,
            "anchor_text": self.anchor_text,
            "context_window": self.context_window,
            "link_type": self.link_type,
            "position": self.position,
            "discovered_at": self.discovered_at,
            "last_seen_at": self.last_seen_at,
            "rel": self.rel,
            "gone": self.gone,
        }


@dataclass
class FetchAssembly:
    """The source's newest fetch while its parts arrive: which parts, how many edges refreshed."""

    fetched_at: int = -1
    parts: int = 1
    parts_seen: list[int] = field(default_factory=list)
    refreshed: int = 0
    """Distinct edges of this fetch seen so far (new, revived or moved forward)."""

    @property
    def complete(self) -> bool:
        return len(self.parts_seen) >= self.parts


@dataclass
class NodeRecord:
    url: str
    host: str
    domain: str
    first_seen_at: int
    crawled: bool = False
    fetched_at: int | None = None
    status: int | None = None
    title: str | None = None
    crawl_ids: list[str] = field(default_factory=list)
    out_live: int = 0
    out_total: int = 0
    """Forward edges stored, gone ones included."""
    in_live: int = 0
    in_total: int = 0
    in_epoch: int = 0
    """The node cache's epoch in which the node got its first in-link (`linkgraph.nodecache`):
    if it is the running one, every reverse record of the node was written in it. 0: none."""
    fetch: FetchAssembly = field(default_factory=FetchAssembly)

    @classmethod
    def new(cls, url: str, host: str, domain: str, first_seen_at: int) -> NodeRecord:
        """A node not seen before: the constructor's defaults, without its call per field (one
        per new target; `tests/unit/linkgraph` checks it equals the constructor's)."""
        assembly = FetchAssembly.__new__(FetchAssembly)
        assembly.__dict__ = {"fetched_at": -1, "parts": 1, "parts_seen": [], "refreshed": 0}
        node = cls.__new__(cls)
        node.__dict__ = {
            "url": url,
            "host": host,
            "domain": domain,
            "first_seen_at": first_seen_at,
            "crawled": False,
            "fetched_at": None,
            "status": None,
            "title": None,
            "crawl_ids": [],
            "out_live": 0,
            "out_total": 0,
            "in_live": 0,
            "in_total": 0,
            "in_epoch": 0,
            "fetch": assembly,
        }
        return node

    def add_crawl(self, crawl_id: str) -> None:
        if crawl_id not in self.crawl_ids and len(self.crawl_ids) < MAX_CRAWL_IDS:
            self.crawl_ids.append(crawl_id)

    def encode(self) -> bytes:
        """Its fields in order, the fetch nested, by orjson's dataclass serialiser."""
        return orjson.dumps(self)

    @classmethod
    def decode(cls, raw: bytes) -> NodeRecord:
        value = _loads(raw)
        fetch = value.get("fetch")
        if (
            value.keys() == _NODE_FIELDS
            and isinstance(fetch, dict)
            and fetch.keys() == _FETCH_FIELDS
        ):
            # A record this version wrote: taken as it is, without a constructor call per field.
            assembly = FetchAssembly.__new__(FetchAssembly)
            assembly.__dict__ = fetch
            value["fetch"] = assembly
            node = cls.__new__(cls)
            node.__dict__ = value
            return node
        try:
            fetch = value.get("fetch") or {}
            return cls(
                url=value["url"],
                host=value["host"],
                domain=value["domain"],
                first_seen_at=value["first_seen_at"],
                crawled=value.get("crawled", False),
                fetched_at=value.get("fetched_at"),
                status=value.get("status"),
                title=value.get("title"),
                crawl_ids=value.get("crawl_ids", []),
                out_live=value.get("out_live", 0),
                out_total=value.get("out_total", 0),
                in_live=value.get("in_live", 0),
                in_total=value.get("in_total", 0),
                in_epoch=value.get("in_epoch", 0),
                fetch=FetchAssembly(
                    fetched_at=fetch.get("fetched_at", -1),
                    parts=fetch.get("parts", 1),
                    parts_seen=fetch.get("parts_seen", []),
                    refreshed=fetch.get("refreshed", 0),
                ),
            )
        except KeyError as error:
            raise CorruptRecordError(f"node record without {error}") from error

    def as_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "host": self.host,
            "registered_domain": self.domain,
            "first_seen_at": self.first_seen_at,
            "crawled": self.crawled,
            "fetched_at": self.fetched_at,
            "status": self.status,
            "title": self.title,
            "crawl_ids": self.crawl_ids,
            "out_degree": self.out_live,
            "in_degree": self.in_live,
            "out_links_stored": self.out_total,
            "in_links_stored": self.in_total,
        }


_NEW_TARGET = (
    b'{"url":%b,"host":%b,"first_seen_at":%d,"crawled":false,"fetched_at":null,"status":null,'
    b'"title":null,"crawl_ids":[],"out_live":0,"out_total":0,"in_live":%d,"in_total":%d,'
    b'"in_epoch":%d,"fetch":{"fetched_at":-1,"parts":1,"parts_seen":[],"refreshed":0}}'
)


def new_target_value(
    url: str, origin_fields: bytes, first_seen_at: int, in_live: int, in_total: int, in_epoch: int
) -> bytes:
    """`NodeRecord.encode` of a node only in-links changed (the constructor's defaults but for
    these), byte for byte, without the record, in one formatting: one per new target.
    `origin_fields` is the encoded host, `,"domain":` and the encoded domain
    (`nodecache.origin_fields`)."""
    return _NEW_TARGET % (
        orjson.dumps(url),
        origin_fields,
        first_seen_at,
        in_live,
        in_total,
        in_epoch,
    )


_EDGE_FIELDS = frozenset(f.name for f in fields(EdgeRecord))
_FETCH_FIELDS = frozenset(f.name for f in fields(FetchAssembly))
_NODE_FIELDS = frozenset(f.name for f in fields(NodeRecord))
"""The fields of the records this version writes: a decoded record with exactly these is taken as
it is (`decode`); an older or newer one goes field by field, defaults filling what it lacks."""


@dataclass
class PartitionStats:
    """Counts and byte sizes of one partition's indexes (key + value bytes), for the gauges."""

    entries: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    size: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    epoch: int = 0
    """The last in-link epoch begun on this partition (`linkgraph.nodecache`)."""

    def changed(self, table: str, old: bytes | None, new: bytes | None, key: bytes) -> None:
        if old is None and new is not None:
            self.entries[table] += 1
        elif old is not None and new is None:
            self.entries[table] -= 1
        before = 0 if old is None else len(key) + len(old)
        after = 0 if new is None else len(key) + len(new)
        self.size[table] += after - before

    def encode(self) -> bytes:
        return orjson.dumps({"entries": self.entries, "bytes": self.size, "epoch": self.epoch})

    @classmethod
    def decode(cls, raw: bytes | None) -> PartitionStats:
        if raw is None:
            return cls()
        value = _loads(raw)
        stats = cls()
        stats.entries.update(value.get("entries", {}))
        stats.size.update(value.get("bytes", {}))
        stats.epoch = value.get("epoch", 0)
        return stats
