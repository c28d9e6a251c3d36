"""Bytes on the wire: JSON round trips per topic, the page envelope, parts, dead letters."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from schemas import (
    budget,
    crawls,
    deadletter,
    fetch,
    items,
    links,
    links_by_target,
    members,
    outcomes,
    pages,
    progress,
    registry,
    scores,
    seeds,
    urls,
)
from schemas.exceptions import DecodeError
from schemas.serde import (
    PART_HEADROOM_BYTES,
    decode,
    decode_page,
    encode,
    encode_page,
    split_into_parts,
)

NOW = 1_700_000_000_000
EVERY_BYTE = bytes(range(256))


def _crawl_request() -> seeds.CrawlRequest:
    return seeds.CrawlRequest(
        crawl_id="crawl-1",
        seeds=["https://example.com/", "http://example.org:8080/start?x=1"],
        max_depth=-1,
        max_links=10_000,
        max_pages_per_host=50,
        max_duration_ms=3_600_000,
        same_domain="registered_domain",
        domain_whitelist=["example.com"],
        include_pattern=r"^https://example\.com/",
        exclude_pattern=r"\.pdf$",
        politeness_delay_ms=250,
        max_retries=7,
        recrawl_interval_hours=1.5,
        content_types=["text/html"],
        respect_robots=False,
        use_sitemaps=True,
        priority="pagerank",
        follow_nofollow=True,
        max_redirects=9,
        scope_score_threshold=0.25,
    )


IN_LINK_EDGE: dict[str, Any] = {
    "anchor_text": "see",
    "context_window": "please see this",
    "link_type": "SPONSORED",
    "position": "SIDEBAR",
    "discovered_at": NOW,
    "last_seen_at": NOW + 5,
    "gone": True,
}
"""An in-link's edge: the `links.by-target` value alone, and with its ends."""


def _edge(to_url: str, anchor: str = "anchor") -> links.LinkEdge:
    return links.LinkEdge(
        to_url=to_url,
        anchor_text=anchor,
        context_window=f"… {anchor} …",
        link_type="NOFOLLOW",
        rel=["nofollow", "ugc"],
        position="FOOTER",
        discovered_at=NOW,
    )


def _page() -> pages.FetchedPage:
    return pages.FetchedPage(
        crawl_id="crawl-1",
        url="https://example.com/a",
        final_url="https://example.com/b",
        lease_id="lease-1",
        depth=3,
        status=200,
        headers={"content-type": "text/html; charset=utf-8", "x-odd": "line\nbreak\r\n"},
        content_type="text/html",
        body_size=0,
        sha256="00" * 32,
        truncated=True,
        fetched_at=NOW,
        elapsed_ms=12,
        follow_nofollow=True,
    )


def _page_for(body: bytes) -> pages.FetchedPage:
    return _page().model_copy(
        update={"body_size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    )


# One sample per topic (two where a topic carries two kinds), with non-default values so a field
# lost or mangled on the way shows up as inequality.
SAMPLES: dict[str, list[tuple[Any, BaseModel]]] = {
    "seeds": [
        (seeds.SEED_MESSAGE, _crawl_request()),
        (seeds.SEED_MESSAGE, seeds.CrawlCommand(crawl_id="crawl-1", action="cancel")),
    ],
    "crawls": [
        (
            crawls.CrawlState,
            crawls.CrawlState(
                crawl_id="crawl-1",
                request=_crawl_request(),
                status="paused",
                created_at=NOW,
                updated_at=NOW + 1,
                owner_partition=4,
            ),
        )
    ],
    "budget": [
        (
            budget.BUDGET_MESSAGE,
            budget.BudgetRequest(crawl_id="crawl-1", partition=3, wanted=100, request_id="r1"),
        ),
        (
            budget.BUDGET_MESSAGE,
            budget.BudgetGrant(crawl_id="crawl-1", partition=3, granted=0, request_id="r1"),
        ),
    ],
    "urls": [
        (
            urls.URLS_MESSAGE,
            urls.DiscoveredUrls(
                crawl_id="crawl-1",
                host="example.com",
                depth=2,
                source_url="https://example.com/",
                redirect_hops=1,
                discovered_at=NOW,
                urls=[
                    urls.DiscoveredUrl(url="https://example.com/ü", priority=0.8),
                    urls.DiscoveredUrl(url="https://example.com/b"),
                ],
                part=1,
                parts=3,
            ),
        ),
        (
            urls.URLS_MESSAGE,
            urls.ParseReport(
                crawl_id="crawl-1",
                page_url="https://example.com/",
                lease_id="l",
                discovered_messages=4,
            ),
        ),
    ],
    "fetch": [
        (
            fetch.FetchRequest,
            fetch.FetchRequest(
                crawl_id="crawl-1",
                url="https://example.com/a",
                host="example.com",
                depth=2,
                lease_id="lease-1",
                deadline=NOW + 60_000,
                politeness_delay_ms=500,
                respect_robots=False,
                content_types=["text/html"],
                redirect_hops=2,
                etag='"abc"',
                last_modified="Wed, 21 Oct 2015 07:28:00 GMT",
                content_hash="ff" * 32,
            ),
        ),
        (
            fetch.FetchRequest,
            fetch.FetchRequest(
                crawl_id="crawl-1",
                url="https://example.com/product/1",
                host="example.com",
                depth=1,
                lease_id="lease-2",
                deadline=NOW + 60_000,
                extract=items.Extraction(fields={"title": "h1::text", "sku": "xpath://@data-sku"}),
                follow_within=".pagination",
                headers={"Accept-Language": "de", "Cookie": "a=b"},
            ),
        ),
    ],
    "outcomes": [
        (
            outcomes.FetchOutcome,
            outcomes.FetchOutcome(
                crawl_id="crawl-1",
                url="https://example.com/a",
                host="example.com",
                lease_id="lease-1",
                depth=2,
                kind="retryable",
                status=503,
                error="Service Unavailable",
                retry_after_ms=30_000,
                page_sent=True,
                sitemaps=["https://example.com/sitemap.xml"],
                etag="W/1",
                fetched_at=NOW,
                elapsed_ms=40,
            ),
        )
    ],
    "pages": [(pages.FetchedPage, _page())],
    "links": [
        (
            links.PageLinks,
            links.PageLinks(
                crawl_id="crawl-1",
                from_url="https://example.com/",
                fetched_at=NOW,
                edges=[_edge("https://example.org/", 'Ünïcode "quoted"\n')],
                part=2,
                parts=5,
            ),
        )
    ],
    "links.by-target": [
        (links_by_target.InLinkValue, links_by_target.InLinkValue(**IN_LINK_EDGE)),
        (
            links_by_target.InLink,
            links_by_target.InLink(
                from_url="https://example.com/", to_url="https://example.org/", **IN_LINK_EDGE
            ),
        ),
    ],
    "items": [
        (
            items.ExtractedItem,
            items.ExtractedItem(
                crawl_id="crawl-1",
                url="https://example.com/product/1",
                fetched_at=NOW,
                status=203,
                fields={"title": ['Ünïcode "quoted"\n'], "price": []},
                errors={"price": "XPath error: Unregistered function"},
                truncated=True,
            ),
        )
    ],
    "scores": [
        (
            scores.PageScore,
            scores.PageScore(
                url="https://example.com/", host="example.com", pagerank=1 / 3, computed_at=NOW
            ),
        )
    ],
    "progress": [
        (
            progress.PartitionProgress,
            progress.PartitionProgress(
                crawl_id="crawl-1", partition=5, snapshot=17, at=NOW, counters={"queued": 3}
            ),
        )
    ],
    "members": [
        (
            members.Member,
            members.Member(
                role="fetcher",
                instance="f-2",
                http_address="10.0.0.2:9100",
                partitions=["crawl.fetch:1", "crawl.fetch:4"],
                ready=False,
                updated_at=NOW,
                heartbeat_ms=2000,
            ),
        )
    ],
    "deadletter": [
        (
            deadletter.DeadLetter,
            deadletter.dead_letter("parser", "crawl.pages", 3, 99, "bad", EVERY_BYTE),
        )
    ],
}

ROUND_TRIPS = [
    pytest.param(schema, message, id=f"{topic}-{type(message).__name__}")
    for topic, pairs in SAMPLES.items()
    for schema, message in pairs
]


def test_every_topic_has_a_round_trip_sample() -> None:
    assert set(SAMPLES) == {spec.suffix for spec in registry.TOPICS}


@pytest.mark.parametrize(("schema", "message"), ROUND_TRIPS)
def test_encode_decode_round_trip(schema: Any, message: BaseModel) -> None:
    data = encode(message)
    decoded = decode(schema, data)

    assert type(decoded) is type(message)
    assert decoded == message
    assert b"\n" not in data, "compact JSON: the page envelope relies on it"
    assert json.loads(data)["v"] == message.v  # type: ignore[attr-defined]


def test_decode_error_names_the_field() -> None:
    broken = json.loads(encode(SAMPLES["outcomes"][0][1]))
    broken["elapsed_ms"] = -5

    with pytest.raises(DecodeError, match=r"FetchOutcome: elapsed_ms: Input should be greater"):
        decode(outcomes.FetchOutcome, json.dumps(broken).encode())


def test_decode_of_no_value_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="no value"):
        decode(members.Member, None)


# --- the page envelope -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        EVERY_BYTE,
        EVERY_BYTE * 40 + b"\n\n\r\n" + b"\x00" * 10 + b"\n",
        b"\n",
        b'{"v":1}\n',
    ],
    ids=["empty", "every-byte", "many-newlines", "only-newline", "json-looking"],
)
def test_page_body_bytes_survive_the_envelope(body: bytes) -> None:
    page = _page_for(body)

    decoded_page, decoded_body = decode_page(encode_page(page, body))

    assert decoded_body == body
    assert decoded_page == page


@given(st.binary(max_size=4096))
def test_any_body_survives_the_envelope(body: bytes) -> None:
    page = _page_for(body)

    assert decode_page(encode_page(page, body)) == (page, body)


def test_envelope_is_metadata_newline_raw_body() -> None:
    body = EVERY_BYTE
    data = encode_page(_page_for(body), body)

    assert data.endswith(b"\n" + body), "the body is raw bytes, not base64 or escaped"
    assert len(data) == len(encode(_page_for(body))) + 1 + len(body)


def test_encoding_a_page_with_the_wrong_body_size_raises() -> None:
    with pytest.raises(ValueError, match="body_size"):
        encode_page(_page_for(b"abc"), b"abcd")


@pytest.mark.parametrize("change", [b"", b"x", b"\n"], ids=["cut", "extra", "extra-newline"])
def test_body_size_mismatch_is_a_decode_error(change: bytes) -> None:
    body = b"0123456789"
    head = encode(_page_for(body))
    sent = body[:-1] if not change else body + change

    with pytest.raises(DecodeError, match="10 body bytes"):
        decode_page(head + b"\n" + sent)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(encode(_page_for(b"")), id="metadata-only"),
        pytest.param(b"", id="empty"),
        pytest.param(None, id="none"),
    ],
)
def test_an_envelope_without_newline_is_a_decode_error(data: bytes | None) -> None:
    with pytest.raises(DecodeError):
        decode_page(data)


def test_an_envelope_with_bad_metadata_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="body_size"):
        decode_page(b'{"crawl_id": "c"}\nbody')


# --- parts --------------------------------------------------------------------------------------

LINKS_LIMIT = links.TOPIC.max_message_bytes


def _page_links(edges: list[links.LinkEdge], part: int, parts: int) -> links.PageLinks:
    return links.PageLinks(
        crawl_id="crawl-1",
        from_url="https://example.com/hub",
        fetched_at=NOW,
        edges=edges,
        part=part,
        parts=parts,
    )


@pytest.fixture(scope="module")
def many_edges() -> list[links.LinkEdge]:
    # Multi-byte anchors (3 bytes per character in UTF-8) so counting characters instead of bytes
    # would overfill the parts.
    return [
        _edge(f"https://example.org/{n}/{'p' * (n % 50)}", "リンク" * (n % 40))
        for n in range(100_000)
    ]


@pytest.fixture(scope="module")
def edge_parts(many_edges: list[links.LinkEdge]) -> list[links.PageLinks]:
    return split_into_parts(many_edges, _page_links, LINKS_LIMIT)


def test_parts_each_fit_the_links_topic(edge_parts: list[links.PageLinks]) -> None:
    assert len(edge_parts) > 3, "the sample must need several parts"
    for part in edge_parts:
        assert len(encode(part)) <= LINKS_LIMIT - PART_HEADROOM_BYTES


def test_parts_are_numbered_and_count_themselves(edge_parts: list[links.PageLinks]) -> None:
    assert [part.part for part in edge_parts] == list(range(len(edge_parts)))
    assert {part.parts for part in edge_parts} == {len(edge_parts)}
    assert {(part.crawl_id, part.from_url) for part in edge_parts} == {
        ("crawl-1", "https://example.com/hub")
    }


def test_parts_keep_every_item_once_in_order(
    many_edges: list[links.LinkEdge], edge_parts: list[links.PageLinks]
) -> None:
    rejoined = [edge for part in edge_parts for edge in part.edges]

    assert rejoined == many_edges


def test_parts_are_packed_full(edge_parts: list[links.PageLinks]) -> None:
    budget = LINKS_LIMIT - PART_HEADROOM_BYTES
    for part, following in itertools.pairwise(edge_parts):
        grown = part.model_copy(update={"edges": [*part.edges, following.edges[0]]})
        assert len(encode(grown)) > budget, f"part {part.part} had room for the next item"


def test_no_items_still_make_one_message() -> None:
    (only,) = split_into_parts([], _page_links, LINKS_LIMIT)

    assert (only.part, only.parts, only.edges) == (0, 1, [])


def test_an_item_larger_than_the_limit_raises() -> None:
    giant = _edge("https://example.org/", "x" * LINKS_LIMIT)

    with pytest.raises(ValueError, match="exceeds the message limit"):
        split_into_parts([_edge("https://example.org/a"), giant], _page_links, LINKS_LIMIT)


def test_many_small_parts_stay_under_a_tight_limit() -> None:
    def build(found: list[urls.DiscoveredUrl], part: int, parts: int) -> urls.DiscoveredUrls:
        return urls.DiscoveredUrls(
            crawl_id="crawl-1",
            host="example.com",
            depth=1,
            discovered_at=NOW,
            urls=found,
            part=part,
            parts=parts,
        )

    found = [urls.DiscoveredUrl(url=f"https://example.com/{n:05d}") for n in range(20_000)]
    limit = PART_HEADROOM_BYTES + 2_000

    messages = split_into_parts(found, build, limit)

    assert len(messages) > 100, "part numbers with several digits must still fit"
    assert all(len(encode(message)) < limit for message in messages)
    assert [u for message in messages for u in message.urls] == found
    assert [m.part for m in messages] == list(range(len(messages)))


# --- dead letters -------------------------------------------------------------------------------

LIMIT = deadletter.MAX_PAYLOAD_BYTES


def _letter(payload: bytes | None, error: str = "undecodable") -> deadletter.DeadLetter:
    return deadletter.dead_letter("frontier", "crawl.urls", 2, 1234, error, payload)


@pytest.mark.parametrize("size", [0, 1, LIMIT - 1, LIMIT])
def test_small_payloads_are_kept_whole(size: int) -> None:
    payload = (EVERY_BYTE * (size // 256 + 1))[:size]
    letter = _letter(payload)

    assert letter.payload == payload
    assert not letter.truncated
    assert letter.payload_size == size
    assert letter.payload_sha256 == hashlib.sha256(payload).hexdigest()


@pytest.mark.parametrize("size", [LIMIT + 1, 16 * 1024 * 1024])
def test_large_payloads_are_cut_with_the_full_hash_and_size(size: int) -> None:
    payload = hashlib.sha256(b"seed").digest() * (size // 32 + 1)
    payload = payload[:size]
    letter = _letter(payload)

    assert letter.truncated
    assert letter.payload == payload[:LIMIT]
    assert letter.payload_size == size
    assert letter.payload_sha256 == hashlib.sha256(payload).hexdigest()
    assert len(encode(letter)) < deadletter.TOPIC.max_message_bytes


def test_no_payload_is_an_empty_one() -> None:
    letter = _letter(None)

    assert (letter.payload, letter.payload_size, letter.truncated) == (b"", 0, False)
    assert letter.payload_sha256 == hashlib.sha256(b"").hexdigest()


def test_long_errors_are_cut() -> None:
    letter = _letter(b"x", error="e" * 100_000)

    assert letter.error == "e" * 4096


def test_payload_bytes_travel_as_base64_json() -> None:
    letter = _letter(EVERY_BYTE * 3 + b"\n\x00")
    data = encode(letter)

    as_json = json.loads(data)
    assert base64.urlsafe_b64decode(as_json["payload"]) == letter.payload
    assert decode(deadletter.DeadLetter, data) == letter
    assert decode(deadletter.DeadLetter, data).payload == EVERY_BYTE * 3 + b"\n\x00"


def test_invalid_base64_payload_is_a_decode_error() -> None:
    as_json = json.loads(encode(_letter(b"abc")))
    as_json["payload"] = "not base64!"

    with pytest.raises(DecodeError, match="payload"):
        decode(deadletter.DeadLetter, json.dumps(as_json).encode())
