"""The in-link decoder: a value of the handler's own layout is checked without pydantic and
carries its reverse record as received; every value decodes as `InLink` would, or is refused with
the model's reason."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from linkgraph.indexes import in_link_head, in_link_value, new_edge_value
from linkgraph.inlinks import reverse_value
from linkgraph.records import EdgeRecord
from linkgraph.wire import LAYOUT, decode_in_link
from schemas.exceptions import DecodeError
from schemas.links import LinkEdge
from schemas.links_by_target import InLink
from schemas.serde import decode, encode

FIELDS = (*LAYOUT[1:], "v")


def sent(**edge: Any) -> bytes:
    """A value as the forward pass sends it (`indexes.in_link_value`)."""
    fields: dict[str, Any] = {
        "to_url": 'https://t.example/a?q="x",y\\z',
        "anchor_text": 'say "anchor_text":\ttab',
        "context_window": "before , after",
        "link_type": "INTERNAL",
        "rel": ["nofollow", "ugc"],
        "position": "NAV",
        "discovered_at": 900,
    } | edge
    link = LinkEdge(**fields)
    encoded = new_edge_value(link, 1000)
    return in_link_value(in_link_head('https://s.example/\u00e9,"to_url":'), link.to_url, encoded)


def same(decoded: Any, model: InLink) -> bool:
    return all(getattr(decoded, name) == getattr(model, name) for name in FIELDS if name != "v")


@pytest.mark.parametrize(
    "raw",
    [sent(), sent(rel=[], anchor_text=""), sent(link_type="REDIRECT", position="FOOTER")],
)
def test_a_value_of_the_handlers_layout_carries_its_reverse_record(raw: bytes) -> None:
    decoded = decode_in_link(raw)
    model = InLink.model_validate_json(raw)
    assert same(decoded, model)
    assert decoded.record is not None
    # Byte for byte what the handler would encode for it, and the edge record's fields only.
    assert decoded.record == reverse_value(decoded, decoded.discovered_at)
    assert EdgeRecord.decode(decoded.record).anchor_text == model.anchor_text


def test_a_value_of_another_layout_decodes_through_the_model_without_a_record() -> None:
    model = InLink.model_validate_json(sent())
    for raw in (
        encode(model),  # pydantic's own field order (rel before the dates)
        orjson.dumps(orjson.loads(sent()), option=orjson.OPT_SORT_KEYS),
        orjson.dumps({**orjson.loads(sent()), "extra": 1}),  # an unknown field: ignored
        sent().replace(b',"anchor_text":', b', "anchor_text": '),  # spaces: still JSON
    ):
        decoded = decode_in_link(raw)
        assert same(decoded, model)
        assert decoded.record is None or decoded.record == reverse_value(decoded, 900)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("v", 0),
        ("from_url", 5),
        ("link_type", "WRONG"),
        ("position", None),
        ("discovered_at", -1),
        ("last_seen_at", 2**53 + 1),
        ("last_seen_at", 10.5),
        ("rel", ["ok", 3]),
        ("rel", "nofollow"),
        ("gone", "maybe"),
        ("anchor_text", ["x"]),
    ],
)
def test_what_the_model_refuses_is_refused_with_its_reason(field: str, value: Any) -> None:
    raw = orjson.dumps({**orjson.loads(sent()), field: value})
    with pytest.raises(DecodeError) as refused:
        decode(InLink, raw)
    with pytest.raises(DecodeError) as ours:
        decode_in_link(raw)
    assert str(ours.value) == str(refused.value) and field in str(ours.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("v", True),
        ("v", "1"),
        ("discovered_at", True),
        ("gone", 1),
        ("gone", "yes"),
        ("last_seen_at", 5.0),
    ],
)
def test_what_the_model_coerces_goes_through_the_model(field: str, value: Any) -> None:
    """The strict check passes only exact types; a value the model would coerce (or refuse) is
    left to it, so both decoders always agree."""
    raw = orjson.dumps({**orjson.loads(sent()), field: value})
    try:
        model = InLink.model_validate_json(raw)
    except Exception:
        with pytest.raises(DecodeError):
            decode_in_link(raw)
        return
    decoded = decode_in_link(raw)
    assert same(decoded, model) and decoded.record is None


def test_no_value_and_not_json_are_refused() -> None:
    with pytest.raises(DecodeError, match="no value"):
        decode_in_link(None)
    with pytest.raises(DecodeError, match="JSON"):
        decode_in_link(b"{not json")
