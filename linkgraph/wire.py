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
decode every value alike. The check costs what the model's validation did (3.1 against 3.2 us a
value, measured on the 2-core machine), so the encode the handler no longer makes is saved, not
moved into the loop's decoding.
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
    """`InLink`'s fields, validated, and the reverse record as received (None: to be encoded).
    Its attributes are the decoded JSON object itself (`__dict__`), as `records` does for its
    own records: no constructor call per field."""

    from_url: str
    to_url: str
    anchor_text: str
    context_window: str
    link_type: str
    position: str
    rel: list[str]
    discovered_at: int
    last_seen_at: int
    gone: bool
    record: bytes | None
    """`EdgeRecord`'s fields as the value had them, discovered at `discovered_at`."""

    def __init__(self, fields: dict[str, Any], record: bytes | None) -> None:
        """`fields`: `InLink`'s (its version too), taken as they are, not copied."""
        fields["record"] = record
        self.__dict__ = fields

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
        if type(fields) is dict and tuple(fields) == LAYOUT and _valid(*fields.values()):
            start = raw.find(RECORD_START)
            return ReceivedInLink(fields, b"{" + raw[start + 1 :] if start > 0 else None)
    in_link: InLink = decode(InLink, raw)
    return ReceivedInLink(dict(in_link.__dict__), None)


def _valid(  # the fields of `LAYOUT`, in its order
    version: Any,
    from_url: Any,
    to_url: Any,
    anchor_text: Any,
    context_window: Any,
    link_type: Any,
    position: Any,
    discovered_at: Any,
    last_seen_at: Any,
    rel: Any,
    gone: Any,
) -> bool:
    """`InLink` accepts these fields as they are (exact types, so nothing would be coerced)."""
    return (
        type(version) is int
        and version >= 1
        and type(from_url) is str
        and type(to_url) is str
        and type(anchor_text) is str
        and type(context_window) is str
        and type(link_type) is str
        and link_type in LINK_TYPES
        and type(position) is str
        and position in POSITIONS
        and type(discovered_at) is int
        and 0 <= discovered_at <= MAX_EPOCH_MILLIS
        and type(last_seen_at) is int
        and 0 <= last_seen_at <= MAX_EPOCH_MILLIS
        and type(rel) is list
        and (not rel or all(type(flag) is str for flag in rel))
        and type(gone) is bool
    )
