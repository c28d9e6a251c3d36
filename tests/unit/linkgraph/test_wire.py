"""The in-link decoder: a value of the handler's own layout is checked without pydantic, takes its
ends from the key and carries its reverse record as received; so does a value of the earlier
layout (ends in the value); every value decodes as `InLink` would, or is refused with the model's
reason."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from linkgraph.indexes import in_link_value, new_edge_value
from linkgraph.inlinks import reverse_value
from linkgraph.records import EdgeRecord
from linkgraph.wire import ENDS_LAYOUT, LAYOUT, decode_in_link
from schemas.exceptions import DecodeError
from schemas.links import LinkEdge
from schemas.links_by_target import InLink, InLinkValue, key
from schemas.serde import encode, validate

FROM_URL = 'https://s.example/\u00e9,"to_url":'
TO_URL = 'https://t.example/a?q="x",y\\z'
KEY = key(TO_URL, FROM_URL)
FIELDS = (*ENDS_LAYOUT[1:], "v")


def edge_record(**edge: Any) -> bytes:
    fields: dict[str, Any] = {
        "to_url": TO_URL,
        "anchor_text": 'say "anchor_text":\ttab',
        "context_window": "before , after",
        "link_type": "INTERNAL",
        "rel": ["nofollow", "ugc"],
        "position": "NAV",
        "discovered_at": 900,
    } | edge
    return new_edge_value(LinkEdge(**fields), 1000)


def sent(**edge: Any) -> bytes:
    """A value as the forward pass sends it (`indexes.in_link_value`); its key is `KEY`."""
    return in_link_value(edge_record(**edge))


def sent_before(**edge: Any) -> bytes:
    """A value as earlier versions sent it: version, both ends, then the edge record."""
    head = orjson.dumps({"v": 1, "from_url": FROM_URL, "to_url": TO_URL})[:-1]
    return head + b"," + edge_record(**edge)[1:]


def model(raw: bytes) -> InLink:
    """What the model makes of `raw` with the ends of `KEY` (unless it has its own)."""
    fields = orjson.loads(raw)
    if "from_url" not in fields:
        fields |= {"from_url": FROM_URL, "to_url": TO_URL}
    in_link: InLink = validate(InLink, fields)
    return in_link


def same(decoded: Any, expected: InLink) -> bool:
    return all(getattr(decoded, name) == getattr(expected, name) for name in FIELDS if name != "v")


def test_the_value_is_an_in_link_value_and_the_earlier_one_an_in_link() -> None:
    assert tuple(orjson.loads(sent())) == LAYOUT
    assert InLinkValue.model_validate_json(sent()).anchor_text == 'say "anchor_text":\ttab'
    assert tuple(orjson.loads(sent_before())) == ENDS_LAYOUT
    assert InLink.model_validate_json(sent_before()).to_url == TO_URL
    assert len(sent()) < len(sent_before()) - len(TO_URL) - len(FROM_URL)


@pytest.mark.parametrize(
    "raw",
    [
        sent(),
        sent(rel=[], anchor_text=""),
        sent(link_type="REDIRECT", position="FOOTER"),
        sent_before(),
        sent_before(rel=[], anchor_text=""),
    ],
)
@pytest.mark.parametrize("raw_key", [KEY, KEY.encode()])
def test_a_value_of_the_handlers_layout_carries_its_reverse_record(
    raw: bytes, raw_key: str | bytes
) -> None:
    decoded = decode_in_link(raw, raw_key)
    expected = model(raw)
    assert same(decoded, expected)
    assert (decoded.to_url, decoded.from_url) == (TO_URL, FROM_URL)
    assert decoded.record is not None
    # Byte for byte what the handler would encode for it, and the edge record's fields only.
    assert decoded.record == reverse_value(decoded, decoded.discovered_at)
    assert EdgeRecord.decode(decoded.record).anchor_text == expected.anchor_text


def test_a_value_of_another_layout_decodes_through_the_model_without_a_record() -> None:
    expected = model(sent())
    for raw in (
        encode(expected),  # pydantic's own field order, the ends in the value
        orjson.dumps(orjson.loads(sent()), option=orjson.OPT_SORT_KEYS),
        orjson.dumps({**orjson.loads(sent()), "extra": 1}),  # an unknown field: ignored
        sent().replace(b',"anchor_text":', b', "anchor_text": '),  # spaces: still JSON
    ):
        decoded = decode_in_link(raw, KEY)
        assert same(decoded, expected)
        assert decoded.record is None or decoded.record == reverse_value(decoded, 900)


def test_the_ends_come_from_the_key_unless_the_value_has_them() -> None:
    assert decode_in_link(sent_before(), None).to_url == TO_URL
    assert decode_in_link(sent_before(), "https://a.example/\thttps://b.example/").to_url == TO_URL
    for wrong in (None, "no tab", f"\t{FROM_URL}", f"{TO_URL}\t", b"\xff\t\xfe"):
        with pytest.raises(DecodeError, match="key"):
            decode_in_link(sent(), wrong)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("v", 0),
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
@pytest.mark.parametrize("layout", [sent, sent_before])
def test_what_the_model_refuses_is_refused_with_its_reason(
    field: str, value: Any, layout: Any
) -> None:
    raw = orjson.dumps({**orjson.loads(layout()), field: value})
    with pytest.raises(DecodeError) as refused:
        model(raw)
    with pytest.raises(DecodeError) as ours:
        decode_in_link(raw, KEY)
    assert str(ours.value) == str(refused.value) and field in str(ours.value)


def test_an_earlier_value_with_a_bad_end_is_refused() -> None:
    raw = orjson.dumps({**orjson.loads(sent_before()), "from_url": 5})
    with pytest.raises(DecodeError, match="from_url"):
        decode_in_link(raw, KEY)


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
@pytest.mark.parametrize("layout", [sent, sent_before])
def test_what_the_model_coerces_goes_through_the_model(field: str, value: Any, layout: Any) -> None:
    """The strict check passes only exact types; a value the model would coerce (or refuse) is
    left to it, so both decoders always agree."""
    raw = orjson.dumps({**orjson.loads(layout()), field: value})
    try:
        expected = model(raw)
    except DecodeError:
        with pytest.raises(DecodeError):
            decode_in_link(raw, KEY)
        return
    decoded = decode_in_link(raw, KEY)
    assert same(decoded, expected) and decoded.record is None


def test_no_value_and_not_json_are_refused() -> None:
    with pytest.raises(DecodeError, match="no value"):
        decode_in_link(None, KEY)
    with pytest.raises(DecodeError, match="JSON"):
        decode_in_link(b"{not json", KEY)
