"""An in-link as the link graph receives it from `links.by-target`, with its reverse record.

The handler's re-keyed value (`indexes.in_link_value`) is the version, the edge's ends, then the
forward record's fields in `records.EdgeRecord`'s order: from its first edge field on, the value
IS the edge record the reverse index stores. A value laid out so (every one this version sends) is
parsed with orjson, checked field by field against `schemas.links_by_target.InLink`'s rules (a
strict subset of what the model accepts: exact JSON types, no coercion), and carries those bytes
behind a brace as `ReceivedInLink.record`, so a new in-link stores them as they came, without an
encode. Any other value (another layout, a field the strict check does not take) goes through the
pydantic model, which decides and words a dead-letter reason, and carries no record: the handler
encodes one (`inlinks.reverse_value`). `tests/unit/linkgraph/test_wire.py` checks both paths
decode every value alike.
"""

from __future__ import annotations

from typing import Any, get_args

import orjson

from schemas.links import LinkPosition, LinkType
from schemas.links_by_target import InLink
from schemas.serde import decode

MAX_EPOCH_MILLIS = 2**53
"""`schemas.base.EpochMillis`' bound."""
LINK_TYPES = frozenset(get_args(LinkType))
POSITIONS = frozenset(get_args(LinkPosition))
LAYOUT = (
    "v",
    "from_url",
    "to_url",
    "anchor_text",
    "context_window",
    "link_type",
    "position",
    "discovered_at",
    "last_seen_at",
    "rel",
    "gone",
)
"""The fields of a value `indexes.in_link_value` made, in its order."""
RECORD_START = b',"anchor_text":'
"""Where the edge record's fields begin: a JSON string holds no unescaped quote, so the first
occurrence of these bytes in a value of `LAYOUT` is the anchor text's member, not a URL's text."""


class ReceivedInLink:
    """`InLink`'s fields, validated, and the reverse record as received (None: to be encoded)."""

    __slots__ = (
        "anchor_text",
        "context_window",
        "discovered_at",
        "from_url",
        "gone",
        "last_seen_at",
        "link_type",
        "position",
        "record",
        "rel",
        "to_url",
    )

    def __init__(self, fields: dict[str, Any], record: bytes | None) -> None:
        self.from_url: str = fields["from_url"]
        self.to_url: str = fields["to_url"]
        self.anchor_text: str = fields["anchor_text"]
        self.context_window: str = fields["context_window"]
        self.link_type: str = fields["link_type"]
        self.position: str = fields["position"]
        self.rel: list[str] = fields["rel"]
        self.discovered_at: int = fields["discovered_at"]
        self.last_seen_at: int = fields["last_seen_at"]
        self.gone: bool = fields["gone"]
        self.record = record
        """`EdgeRecord`'s fields as the value had them, discovered at `discovered_at`."""

    def __repr__(self) -> str:
        return f"ReceivedInLink({self.to_url!r} <- {self.from_url!r})"


def decode_in_link(raw: bytes | None) -> ReceivedInLink:
    """The loop's decoder of `links.by-target` (see the module docstring); a `DecodeError` for
    a value `InLink` refuses."""
    if raw is not None:
        try:
            fields = orjson.loads(raw)
        except orjson.JSONDecodeError:
            fields = None
        if type(fields) is dict and tuple(fields) == LAYOUT and _valid(fields):
            start = raw.find(RECORD_START)
            return ReceivedInLink(fields, b"{" + raw[start + 1 :] if start > 0 else None)
    in_link: InLink = decode(InLink, raw)
    return ReceivedInLink(in_link.__dict__, None)


def _valid(fields: dict[str, Any]) -> bool:
    """`InLink` accepts these fields as they are (exact types, so nothing would be coerced)."""
    version, discovered_at, last_seen_at, rel = (
        fields["v"],
        fields["discovered_at"],
        fields["last_seen_at"],
        fields["rel"],
    )
    link_type, position = fields["link_type"], fields["position"]
    return (
        type(version) is int
        and version >= 1
        and type(fields["from_url"]) is str
        and type(fields["to_url"]) is str
        and type(fields["anchor_text"]) is str
        and type(fields["context_window"]) is str
        and type(link_type) is str
        and link_type in LINK_TYPES
        and type(position) is str
        and position in POSITIONS
        and type(discovered_at) is int
        and 0 <= discovered_at <= MAX_EPOCH_MILLIS
        and type(last_seen_at) is int
        and 0 <= last_seen_at <= MAX_EPOCH_MILLIS
        and type(rel) is list
        and all(type(flag) is str for flag in rel)
        and type(fields["gone"]) is bool
    )
