"""An in-link as the link graph receives it from `links.by-target`, with its reverse record.

The handler's re-keyed value (`indexes.in_link_value`) is the version, then the forward record's
fields in `records.EdgeRecord`'s order; the key holds the edge's ends (`schemas.links_by_target`).
From its first edge field on, the value IS the edge record the reverse index stores. A value laid
out so (every one this version sends) is parsed with orjson, checked field by field against
`InLinkValue`'s rules (a strict subset of what the model accepts: exact JSON types, no coercion),
its ends taken from the key, and it carries those bytes behind a brace as `ReceivedInLink.record`,
so a new in-link stores them as they came, without an encode. So does a value with both ends in it
(`ENDS_LAYOUT`, what earlier versions sent; a compacted topic keeps such records). Any other value
(another layout, a field the strict check does not take, a key that is no pair of URLs) goes
through the pydantic model, which decides and words a dead-letter reason, and carries no record:
the handler encodes one (`inlinks.reverse_value`). `tests/unit/linkgraph/test_wire.py` checks both
paths decode every value alike.
"""

from __future__ import annotations

from typing import Any, get_args

import orjson

from schemas.exceptions import DecodeError
from schemas.links import LinkPosition, LinkType
from schemas.links_by_target import InLink, ends
from schemas.serde import validate

MAX_EPOCH_MILLIS = 2**53
"""`schemas.base.EpochMillis`' bound."""
LINK_TYPES = frozenset(get_args(LinkType))
POSITIONS = frozenset(get_args(LinkPosition))
EDGE_FIELDS = (
    "anchor_text",
    "context_window",
    "link_type",
    "position",
    "discovered_at",
    "last_seen_at",
    "rel",
    "gone",
)
LAYOUT = ("v", *EDGE_FIELDS)
"""The fields of a value `indexes.in_link_value` made, in its order."""
ENDS_LAYOUT = ("v", "from_url", "to_url", *EDGE_FIELDS)
"""The fields of a value of earlier versions, the edge's ends in it, in its order."""
RECORD_START = b',"anchor_text":'
"""Where the edge record's fields begin: a JSON string holds no unescaped quote, so the first
occurrence of these bytes in a value of either layout is the anchor text's member, not a URL's
text."""


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


def decode_in_link(raw: bytes | None, key: bytes | str | None) -> ReceivedInLink:
    """The loop's decoder of `links.by-target` (see the module docstring); a `DecodeError` for
    a value `InLink` refuses."""
    pair = _ends(key)
    if raw is not None:
        try:
            fields = orjson.loads(raw)
        except orjson.JSONDecodeError:
            fields = None
        if type(fields) is dict:
            layout = tuple(fields)
            if layout == LAYOUT and pair is not None and _valid(*fields.values()):
                fields["to_url"], fields["from_url"] = pair
                return ReceivedInLink(fields, _record(raw))
            if layout == ENDS_LAYOUT and _valid_ends(*fields.values()):
                return ReceivedInLink(fields, _record(raw))
    return ReceivedInLink(dict(_validated(raw, pair).__dict__), None)


def _ends(key: bytes | str | None) -> tuple[str, str] | None:
    if key is None:
        return None
    try:
        return ends(key.decode() if isinstance(key, bytes) else key)
    except UnicodeDecodeError:
        return None


def _record(raw: bytes) -> bytes | None:
    start = raw.find(RECORD_START)
    return b"{" + raw[start + 1 :] if start > 0 else None


def _validated(raw: bytes | None, pair: tuple[str, str] | None) -> InLink:
    """The model's decoding of any other value: the ends from the key unless the value has them."""
    if raw is None:
        raise DecodeError("message has no value")
    try:
        fields = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise DecodeError(f"not valid JSON: {error}") from error
    if isinstance(fields, dict) and "from_url" not in fields and "to_url" not in fields:
        if pair is None:
            raise DecodeError("key: not to_url TAB from_url, and the value has no ends")
        fields = {**fields, "to_url": pair[0], "from_url": pair[1]}
    in_link: InLink = validate(InLink, fields)
    return in_link


def _valid_ends(  # the fields of `ENDS_LAYOUT`, in its order
    version: Any, from_url: Any, to_url: Any, *edge: Any
) -> bool:
    return type(from_url) is str and type(to_url) is str and _valid(version, *edge)


def _valid(  # the fields of `LAYOUT`, in its order
    version: Any,
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
