"""The `urls` decoder: a DiscoveredUrls of exact types is checked without pydantic; every value
decodes as `URLS_MESSAGE` would, or is refused with the model's reason."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from frontier.wire import ReceivedUrls, _checked, decode_pending, decode_urls
from schemas.exceptions import DecodeError
from schemas.serde import decode, encode
from schemas.urls import URLS_MESSAGE, DiscoveredUrl, DiscoveredUrls, ParseReport

MESSAGE = DiscoveredUrls(
    crawl_id="c",
    host="a.example",
    depth=2,
    source_url="https://b.example/\u00e9",
    redirect_hops=1,
    discovered_at=1_700_000_000_000,
    urls=[DiscoveredUrl(url="https://a.example/x"), DiscoveredUrl(url='https://a.example/"q"')],
    part=1,
    parts=3,
    origin="lease-1",
)
HINTED = MESSAGE.model_copy(
    update={"urls": [DiscoveredUrl(url="https://a.example/s", priority=0.8), *MESSAGE.urls]}
)
MODIFIED = MESSAGE.model_copy(
    update={
        "urls": [
            *MESSAGE.urls,
            DiscoveredUrl(url="https://a.example/m", priority=0.5, modified_at=1_796_601_600_000),
        ]
    }
)

REQUISITES = MESSAGE.model_copy(update={"requisites": True, "origin": "lease-1/requisites"})


def fields(message: DiscoveredUrls = MESSAGE, **changed: Any) -> dict[str, Any]:
    value: dict[str, Any] = orjson.loads(encode(message))
    value.update(changed)
    return value


def same(received: ReceivedUrls, model: DiscoveredUrls) -> bool:
    return received == ReceivedUrls.of(model)


@pytest.mark.parametrize("message", [MESSAGE, HINTED, MODIFIED, REQUISITES])
def test_what_the_services_send_takes_the_strict_path_and_decodes_as_the_model(
    message: DiscoveredUrls,
) -> None:
    raw = encode(message)
    assert _checked(orjson.loads(raw)) is not None
    decoded = decode_urls(raw)
    assert isinstance(decoded, ReceivedUrls)
    assert same(decoded, message)
    assert (decoded.priorities or [None])[0] == message.urls[0].priority


def test_hints_are_kept_beside_the_urls_and_left_out_when_none() -> None:
    decoded = decode_urls(encode(HINTED))
    assert isinstance(decoded, ReceivedUrls)
    assert decoded.priorities == [0.8, None, None]
    plain = decode_urls(orjson.dumps(fields(urls=[{"url": "u", "priority": None}, {"url": "w"}])))
    assert isinstance(plain, ReceivedUrls) and plain.priorities is None
    assert plain.modified_at is None
    modified = decode_urls(encode(MODIFIED))
    assert isinstance(modified, ReceivedUrls)
    assert modified.modified_at == [None, None, 1_796_601_600_000]
    assert modified.priorities == [None, None, 0.5]
    assert decode_urls(modified.to_json()) == modified  # what `pending` keeps


@pytest.mark.parametrize(
    "value",
    [
        {
            k: v
            for k, v in fields().items()
            if k not in ("v", "source_url", "part", "parts", "origin")
        },
        {k: v for k, v in fields().items() if k != "redirect_hops"},
        fields(extra={"x": 1}),  # unknown fields are ignored, at both levels
        fields(urls=[{"url": "https://a.example/", "extra": [1]}]),
        fields(urls=[]),
        fields(source_url=None),
        fields(urls=[{"url": "u", "priority": 1}]),  # an int hint: the model makes it a float
        fields(urls=[{"url": "u", "priority": "0.5"}]),  # lax: a numeric string too
        fields(depth=2.0),  # lax: a whole float is an int
        fields(discovered_at="5"),
        fields(v=True),
        fields(urls=[{"url": "u", "v": "2"}]),
        fields(urls=[{"url": "u", "v": 2, "priority": 0.1}, {"url": "w", "v": 1}]),
        fields(urls=[{"url": "u", "modified_at": 5.0}]),  # lax: a whole float is an int
        fields(urls=[{"url": "u", "modified_at": "5"}]),
        fields(requisites=True),
        fields(requisites=1),  # lax: the model makes 1 true
        fields(requisites="false"),
    ],
)
def test_values_decode_as_the_model_decodes_them(value: dict[str, Any]) -> None:
    raw = orjson.dumps(value)
    decoded = decode_urls(raw)
    model = decode(URLS_MESSAGE, raw)
    assert isinstance(model, DiscoveredUrls) and isinstance(decoded, ReceivedUrls)
    assert same(decoded, model)


BAD = [
    None,
    b"",
    b"not json",
    b'{"kind":"discovered_urls"',
    b"[1, 2]",
    b'{"crawl_id":"c"}',  # no kind
    orjson.dumps(fields(kind="other")),
    orjson.dumps({k: v for k, v in fields().items() if k != "crawl_id"}),
    orjson.dumps({k: v for k, v in fields().items() if k != "discovered_at"}),
    orjson.dumps({k: v for k, v in fields().items() if k != "urls"}),
    orjson.dumps(fields(v=0)),
    orjson.dumps(fields(v=None)),
    orjson.dumps(fields(crawl_id=5)),
    orjson.dumps(fields(host=None)),
    orjson.dumps(fields(depth=-1)),
    orjson.dumps(fields(depth=1.5)),
    orjson.dumps(fields(depth="x")),
    orjson.dumps(fields(source_url=7)),
    orjson.dumps(fields(redirect_hops=-1)),
    orjson.dumps(fields(discovered_at=-1)),
    orjson.dumps(fields(discovered_at=2**53 + 1)),
    orjson.dumps(fields(part=-1)),
    orjson.dumps(fields(parts=0)),
    orjson.dumps(fields(origin=7)),
    orjson.dumps(fields(urls={"url": "u"})),
    orjson.dumps(fields(urls=["https://a.example/"])),
    orjson.dumps(fields(urls=[None])),
    orjson.dumps(fields(urls=[{"priority": 0.5}])),
    orjson.dumps(fields(urls=[{"url": 5}])),
    orjson.dumps(fields(urls=[{"url": None}])),
    orjson.dumps(fields(urls=[{"url": "u", "priority": "high"}])),
    orjson.dumps(fields(urls=[{"url": "u", "priority": [0.5]}])),
    orjson.dumps(fields(urls=[{"url": "u", "modified_at": -1}])),
    orjson.dumps(fields(urls=[{"url": "u", "modified_at": "yesterday"}])),
    orjson.dumps(fields(urls=[{"url": "u"}, [1]])),
    b'{"kind":"discovered_urls","crawl_id":"c","host":"h","depth":1,"discovered_at":1,'
    b'"urls":[{"url":"\\ud800"}]}',  # a lone surrogate
    orjson.dumps(fields(urls=[{"url": "u", "v": 0}])),
    orjson.dumps(fields(urls=[{"url": "u", "v": None}])),
    orjson.dumps(fields(urls=[{"url": "u"}, {"url": "w", "v": 1.5}])),
]


@pytest.mark.parametrize("raw", BAD)
def test_what_the_model_refuses_is_refused_with_the_models_reason(raw: bytes | None) -> None:
    with pytest.raises(DecodeError) as expected:
        decode(URLS_MESSAGE, raw)
    with pytest.raises(DecodeError) as refused:
        decode_urls(raw)
    assert str(refused.value) == str(expected.value)


def test_an_integer_past_64_bits_is_the_models_to_decide() -> None:
    raw = encode(MESSAGE)[:-1] + b',"redirect_hops":99999999999999999999999}'
    model = decode(URLS_MESSAGE, raw)
    decoded = decode_urls(raw)
    assert isinstance(model, DiscoveredUrls) and isinstance(decoded, ReceivedUrls)
    assert same(decoded, model) and decoded.redirect_hops == 99999999999999999999999


def test_a_duplicate_field_counts_once_as_the_models_last_one() -> None:
    raw = encode(MESSAGE)[:-1] + b',"depth":7}'
    model = decode(URLS_MESSAGE, raw)
    decoded = decode_urls(raw)
    assert isinstance(model, DiscoveredUrls) and isinstance(decoded, ReceivedUrls)
    assert model.depth == decoded.depth == 7


def test_a_parse_report_is_the_models() -> None:
    report = ParseReport(
        crawl_id="c", page_url="https://a.example/", lease_id="l", discovered_messages=2
    )
    assert decode_urls(encode(report)) == report


@pytest.mark.parametrize("message", [MESSAGE, HINTED, REQUISITES])
def test_pending_json_reads_back_and_is_the_models_json(message: DiscoveredUrls) -> None:
    received = ReceivedUrls.of(message)
    assert decode_pending(received.to_json()) == received
    assert DiscoveredUrls.model_validate_json(received.to_json()) == message
    assert decode_pending(encode(message)) == received  # what earlier versions stored
    with pytest.raises(ValueError, match="not a DiscoveredUrls"):
        decode_pending(
            encode(ParseReport(crawl_id="c", page_url="p", lease_id="l", discovered_messages=0))
        )
