"""Per-key graph queries over one partition's indexes: out-links, in-links, anchors, node.

Pages are in key order (target URL for out-links, source URL for in-links); the cursor is the last
URL of the previous page, so a page is stable while the index grows. Filters (link type, position)
apply before the limit. Gone edges are listed with ``gone: true`` unless ``live_only``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from linkgraph.exceptions import QueryError
from linkgraph.records import (
    ANCHORS,
    FORWARD,
    NODES,
    REVERSE,
    EdgeRecord,
    NodeRecord,
    prefix_of,
)

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
Direction = Literal["out", "in"]
LINK_TYPES = ("INTERNAL", "EXTERNAL", "NOFOLLOW", "UGC", "SPONSORED", "REDIRECT")
POSITIONS = ("NAV", "CONTENT", "FOOTER", "SIDEBAR")


class TableReader(Protocol):
    def get(self, key: bytes) -> bytes | None: ...

    def scan(self, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]: ...


class Reader(Protocol):
    def table(self, name: str) -> TableReader: ...


@dataclass(frozen=True)
class EdgeQuery:
    direction: Direction
    url: str
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None
    link_type: str | None = None
    position: str | None = None
    live_only: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.limit <= MAX_LIMIT:
            raise QueryError(f"limit must be between 1 and {MAX_LIMIT}")
        if self.link_type is not None and self.link_type not in LINK_TYPES:
            raise QueryError(f"link_type must be one of {', '.join(LINK_TYPES)}")
        if self.position is not None and self.position not in POSITIONS:
            raise QueryError(f"position must be one of {', '.join(POSITIONS)}")


@dataclass(frozen=True)
class AnchorQuery:
    url: str
    limit: int = MAX_LIMIT


@dataclass(frozen=True)
class NodeQuery:
    url: str


Query = EdgeQuery | AnchorQuery | NodeQuery


def answer(reader: Reader, query: Query) -> dict[str, Any]:
    if isinstance(query, EdgeQuery):
        return edges(reader, query)
    if isinstance(query, AnchorQuery):
        return anchors(reader, query)
    return node(reader, query)


def edges(reader: Reader, query: EdgeQuery) -> dict[str, Any]:
    table = reader.table(FORWARD if query.direction == "out" else REVERSE)
    prefix = prefix_of(query.url)
    after = query.cursor.encode() if query.cursor is not None else None
    found: list[dict[str, Any]] = []
    next_cursor: str | None = None
    for key, raw in table.scan(prefix):
        other = key[len(prefix) :]
        if after is not None and other <= after:
            continue
        record = EdgeRecord.decode(raw)
        if query.link_type is not None and record.link_type != query.link_type:
            continue
        if query.position is not None and record.position != query.position:
            continue
        if query.live_only and record.gone:
            continue
        if len(found) == query.limit:
            next_cursor = found[-1]["to_url" if query.direction == "out" else "from_url"]
            break
        other_url = other.decode()
        if query.direction == "out":
            found.append(record.as_json(query.url, other_url))
        else:
            found.append(record.as_json(other_url, query.url))
    return {"url": query.url, "edges": found, "next_cursor": next_cursor}


def anchors(reader: Reader, query: AnchorQuery) -> dict[str, Any]:
    prefix = prefix_of(query.url)
    counted = [
        (int(raw), key[len(prefix) :].decode()) for key, raw in reader.table(ANCHORS).scan(prefix)
    ]
    counted.sort(key=lambda item: (-item[0], item[1]))
    listed = [{"text": text, "count": count} for count, text in counted[: query.limit]]
    return {"url": query.url, "anchors": listed}


def node(reader: Reader, query: NodeQuery) -> dict[str, Any]:
    raw = reader.table(NODES).get(query.url.encode())
    if raw is None:
        raise QueryError(f"unknown URL: {query.url}", 404)
    return NodeRecord.decode(raw).as_json()
