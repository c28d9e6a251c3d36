"""The contract's models: strict inbound seeds, lenient internal records, versions, partitions.

DESIGN.md section 2: inbound user messages reject unknown fields, internal messages ignore them so a
rolling upgrade never dead-letters traffic, and every value carries a schema version.
"""

from __future__ import annotations

import inspect
import json
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from schemas import (
    budget,
    crawls,
    deadletter,
    fetch,
    links,
    links_by_target,
    members,
    outcomes,
    pages,
    progress,
    scores,
    seeds,
    urls,
)
from schemas.base import SCHEMA_VERSION, InboundModel, InternalModel
from schemas.exceptions import DecodeError
from schemas.partitioning import partition_for_key
from schemas.seeds import CrawlRequest
from schemas.serde import decode, encode

TOPIC_MODULES: tuple[ModuleType, ...] = (
    budget,
    crawls,
    deadletter,
    fetch,
    links,
    links_by_target,
    members,
    outcomes,
    pages,
    progress,
    scores,
    seeds,
    urls,
)
NOW = 1_700_000_000_000


def _request(**fields: Any) -> bytes:
    return json.dumps(
        {"kind": "crawl_request", "seeds": ["https://example.com/"], **fields}
    ).encode()


def _command(**fields: Any) -> bytes:
    return json.dumps(
        {"kind": "crawl_command", "crawl_id": "c1", "action": "pause", **fields}
    ).encode()


def _accepted(data: bytes) -> Any:
    return decode(seeds.SEED_MESSAGE, data)


def _rejection(data: bytes) -> str:
    with pytest.raises(DecodeError) as caught:
        decode(seeds.SEED_MESSAGE, data)
    return str(caught.value)


# --- seeds: inbound, strict -------------------------------------------------------------------


def test_minimal_request_takes_defaults_and_current_version() -> None:
    request = _accepted(_request())

    assert isinstance(request, seeds.CrawlRequest)
    assert request.v == SCHEMA_VERSION
    assert request.seeds == ["https://example.com/"]
    assert request.max_depth == 2
    assert request.content_types == ["text/html", "application/xhtml+xml"]
    assert request.crawl_id != _accepted(_request()).crawl_id, "each request gets a fresh id"


@pytest.mark.parametrize("action", ["pause", "resume", "cancel"])
def test_commands_decode_by_kind(action: str) -> None:
    command = _accepted(_command(crawl_id="crawl-7", action=action))

    assert isinstance(command, seeds.CrawlCommand)
    assert (command.crawl_id, command.action) == ("crawl-7", action)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (_request(max_dept=3), "max_dept"),
        (_request(seed=["https://example.org/"]), "seed"),
        (_command(reason="typo"), "reason"),
    ],
)
def test_unknown_fields_are_rejected_by_name(data: bytes, field: str) -> None:
    reason = _rejection(data)

    assert f".{field}: Extra inputs are not permitted" in reason


def test_unknown_kind_and_unknown_action_are_rejected() -> None:
    assert "kind" in _rejection(_request(kind="crawl_delete"))
    assert "action" in _rejection(_command(action="restart"))


NOT_HTTP = "only http and https URLs are crawled"


@pytest.mark.parametrize(
    ("seed", "reason"),
    [
        ("ftp://example.com/file.txt", NOT_HTTP),
        ("javascript:alert(1)", NOT_HTTP),
        ("mailto:someone@example.com", NOT_HTTP),
        ("file:///etc/passwd", NOT_HTTP),
        ("data:text/html,hello", NOT_HTTP),
        ("/relative/path", NOT_HTTP),
        ("relative/path", NOT_HTTP),
        ("example.com/no-scheme", NOT_HTTP),
        ("//example.com/scheme-relative", NOT_HTTP),
        ("http:///no-host", "URL has no host"),
        ("https://", "URL has no host"),
        ("http://example.com:99999/", "not a crawlable URL"),
        ("http://example.com:0/", "not a crawlable URL"),
        ("http://exa mple.com/", "not a crawlable URL"),
        ("http://[::1/", "Invalid IPv6 URL"),
    ],
)
def test_seeds_must_be_http_urls_with_a_host(seed: str, reason: str) -> None:
    rejection = _rejection(_request(seeds=["https://good.example/", seed]))

    assert f"crawl_request.seeds: Value error, {reason}" in rejection


def test_seeds_keep_http_and_https_stripped() -> None:
    request = _accepted(
        _request(seeds=["  HTTP://Example.COM/a ", "https://example.org:8443/b?q=1"])
    )

    assert request.seeds == ["HTTP://Example.COM/a", "https://example.org:8443/b?q=1"]


def test_seed_url_length_is_capped() -> None:
    prefix = "https://example.com/"
    longest = prefix + "a" * (seeds.MAX_URL_LENGTH - len(prefix))

    assert _accepted(_request(seeds=[longest])).seeds == [longest]
    reason = _rejection(_request(seeds=[longest + "a"]))
    assert "seeds" in reason
    assert f"longer than {seeds.MAX_URL_LENGTH}" in reason


def test_seed_list_is_bounded() -> None:
    assert "seeds" in _rejection(_request(seeds=[]))


@pytest.mark.parametrize(
    ("field", "lowest", "highest"),
    [
        ("max_depth", -1, 10_000),
        ("max_links", -1, 10**12),
        ("max_pages_per_host", -1, 10**12),
        ("max_duration_ms", -1, 10**12),
        ("politeness_delay_ms", 0, 3_600_000),
        ("max_retries", 0, 100),
        ("max_redirects", 0, 50),
    ],
)
def test_numbers_are_bounded(field: str, lowest: int, highest: int) -> None:
    assert getattr(_accepted(_request(**{field: lowest})), field) == lowest
    assert getattr(_accepted(_request(**{field: highest})), field) == highest
    for outside in (lowest - 1, highest + 1):
        assert f"crawl_request.{field}: Input should be" in _rejection(_request(**{field: outside}))


@pytest.mark.parametrize(
    ("field", "accepted", "rejected"),
    [
        ("recrawl_interval_hours", [0.001, 24 * 3650], [0, -1, 24 * 3650 + 0.5]),
        ("scope_score_threshold", [0, 0.5, 1], [-0.01, 1.01]),
    ],
)
def test_fractions_are_bounded(field: str, accepted: list[float], rejected: list[float]) -> None:
    for value in accepted:
        assert getattr(_accepted(_request(**{field: value})), field) == value
    for value in rejected:
        assert f"crawl_request.{field}" in _rejection(_request(**{field: value}))


def test_a_number_of_the_wrong_type_is_rejected() -> None:
    assert "max_depth" in _rejection(_request(max_depth="deep"))
    assert "max_depth" in _rejection(_request(max_depth=2.5))


@pytest.mark.parametrize("field", ["include_pattern", "exclude_pattern"])
@pytest.mark.parametrize(
    "pattern",
    [
        "(",
        "[a-",
        "(?<=a+)b",
        "a{4294967296}",
        "(" * 1000 + ")" * 1000,
    ],
    ids=["unbalanced", "open-class", "variable-lookbehind", "huge-repeat", "deep-nesting"],
)
def test_patterns_that_do_not_compile_are_rejected_clearly(field: str, pattern: str) -> None:
    reason = _rejection(_request(**{field: pattern}))

    assert f"crawl_request.{field}: Value error, pattern does not compile" in reason


def test_patterns_are_length_capped_and_kept_when_valid() -> None:
    valid = r"^https://example\.com/(docs|blog)/"

    request = _accepted(_request(include_pattern=valid, exclude_pattern=r"\.pdf$"))
    assert (request.include_pattern, request.exclude_pattern) == (valid, r"\.pdf$")
    too_long = "a" * (seeds.MAX_PATTERN_LENGTH + 1)
    assert "longer than" in _rejection(_request(include_pattern=too_long))


def test_content_types_accept_a_string_or_a_list() -> None:
    assert _accepted(_request(content_types="text/plain")).content_types == ["text/plain"]
    both = ["text/html", "application/pdf"]
    assert _accepted(_request(content_types=both)).content_types == both
    assert "content_types" in _rejection(_request(content_types=5))


def test_domain_whitelist_is_lowercased_and_tidied() -> None:
    request = _accepted(_request(domain_whitelist=["Example.COM", " Sub.Example.ORG. ", "  "]))

    assert request.domain_whitelist == ["example.com", "sub.example.org"]


def test_host_delays_go_by_the_longest_domain_a_host_is_under() -> None:
    request = CrawlRequest(
        seeds=["https://a.example/"],
        politeness_delay_ms=1000,
        host_delays_ms={"*.Slow.Example.": 5000, "api.slow.example": 60_000, "bücher.de": 0},
    )
    assert request.host_delays_ms == {
        "slow.example": 5000,
        "api.slow.example": 60_000,
        "xn--bcher-kva.de": 0,
    }
    delays = {
        host: request.delay_ms_for(host)
        for host in (
            "slow.example",
            "www.slow.example:8443",
            "api.slow.example",
            "v2.api.slow.example",
            "notslow.example",
            "example",
            "xn--bcher-kva.de",
        )
    }
    assert delays == {
        "slow.example": 5000,
        "www.slow.example:8443": 5000,
        "api.slow.example": 60_000,
        "v2.api.slow.example": 60_000,
        "notslow.example": 1000,
        "example": 1000,
        "xn--bcher-kva.de": 0,
    }
    assert CrawlRequest(seeds=["https://a.example/"], host_delays_ms={}).host_delays_ms is None


@pytest.mark.parametrize("domain", ["https://x.example/", "x.example:8080", "", "a b", "[::1]"])
def test_a_host_delay_is_keyed_by_a_domain_name(domain: str) -> None:
    with pytest.raises(ValidationError, match="host_delays_ms"):
        CrawlRequest(seeds=["https://a.example/"], host_delays_ms={domain: 5})


def test_a_host_delay_is_bounded_like_the_crawls_delay() -> None:
    with pytest.raises(ValidationError, match="less than or equal to 3600000"):
        CrawlRequest(seeds=["https://a.example/"], host_delays_ms={"x.example": 3_600_001})


@pytest.mark.parametrize("crawl_id", ["c", "crawl-2024.01:a_b", "A" * 128])
def test_crawl_ids_of_the_allowed_alphabet_are_accepted(crawl_id: str) -> None:
    assert _accepted(_command(crawl_id=crawl_id)).crawl_id == crawl_id
    assert _accepted(_request(crawl_id=crawl_id)).crawl_id == crawl_id


@pytest.mark.parametrize(
    "crawl_id", ["", "has space", "slash/no", "tab\there", "line\n", "naïve", "A" * 129]
)
def test_crawl_ids_outside_the_pattern_are_rejected(crawl_id: str) -> None:
    assert "crawl_command.crawl_id" in _rejection(_command(crawl_id=crawl_id))
    assert "crawl_request.crawl_id" in _rejection(_request(crawl_id=crawl_id))


@pytest.mark.parametrize("data", [_request, _command])
def test_inbound_rejects_a_newer_schema_version(data: Any) -> None:
    assert _accepted(data(v=SCHEMA_VERSION)).v == SCHEMA_VERSION
    assert ".v: Input should be less than or equal to" in _rejection(data(v=SCHEMA_VERSION + 1))
    assert ".v:" in _rejection(data(v=0))


@pytest.mark.parametrize("data", [None, b"", b"not json", b"\xff\xfe", b"[]", b"{}"])
def test_garbage_is_a_decode_error(data: bytes | None) -> None:
    with pytest.raises(DecodeError):
        decode(seeds.SEED_MESSAGE, data)


# --- internal models: lenient about fields, strict about types ----------------------------------


def _models_of(module: ModuleType) -> list[type[BaseModel]]:
    return [
        value
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, BaseModel)
        and value.__module__ == module.__name__
    ]


ALL_MODELS = [model for module in TOPIC_MODULES for model in _models_of(module)]
INBOUND_MODELS = {seeds.CrawlRequest, seeds.CrawlCommand}


def test_every_model_carries_a_schema_version() -> None:
    assert len(ALL_MODELS) >= 17
    for model in ALL_MODELS:
        assert "v" in model.model_fields, model
        assert model.model_fields["v"].default == SCHEMA_VERSION, model


def test_only_user_messages_are_inbound() -> None:
    for model in ALL_MODELS:
        if model is crawls.StoredCrawlRequest:
            continue  # a stored copy of an inbound request: lenient, tested below
        expected = InboundModel if model in INBOUND_MODELS else InternalModel
        assert issubclass(model, expected), model


def test_a_stored_crawl_request_from_a_newer_version_is_still_read() -> None:
    state = crawls.CrawlState.model_validate(
        {
            "crawl_id": "c1",
            "request": {"seeds": ["https://example.com/"], "v": SCHEMA_VERSION + 1, "new": 1},
            "created_at": NOW,
            "updated_at": NOW,
            "owner_partition": 0,
        }
    )
    assert state.request.seeds == ["https://example.com/"]
    assert state.request.v == SCHEMA_VERSION + 1


def test_a_seed_message_without_kind_is_a_crawl_request() -> None:
    message = decode(seeds.SEED_MESSAGE, b'{"seeds": ["https://example.com/"]}')
    assert isinstance(message, seeds.CrawlRequest)
    with pytest.raises(DecodeError):
        decode(seeds.SEED_MESSAGE, b'{"kind": "crawl_cmd", "crawl_id": "c", "action": "pause"}')


def _fetch_outcome() -> outcomes.FetchOutcome:
    return outcomes.FetchOutcome(
        crawl_id="c1",
        url="https://example.com/a",
        host="example.com",
        lease_id="l1",
        kind="redirect",
        redirect_to="https://example.com/b",
        fetched_at=NOW,
    )


def _discovered_urls() -> urls.DiscoveredUrls:
    return urls.DiscoveredUrls(
        crawl_id="c1",
        host="example.com",
        depth=1,
        discovered_at=NOW,
        urls=[urls.DiscoveredUrl(url="https://example.com/x", priority=0.5)],
    )


def _page_links() -> links.PageLinks:
    edge = links.LinkEdge(to_url="https://example.org/", link_type="EXTERNAL", discovered_at=NOW)
    return links.PageLinks(
        crawl_id="c1", from_url="https://example.com/", fetched_at=NOW, edges=[edge]
    )


def _member() -> members.Member:
    return members.Member(
        role="frontier",
        instance="f-1",
        http_address="127.0.0.1:8080",
        partitions=["crawl.urls:0"],
        ready=True,
        updated_at=NOW,
        heartbeat_ms=5000,
    )


INTERNAL_SAMPLES = {
    "FetchOutcome": _fetch_outcome,
    "DiscoveredUrls": _discovered_urls,
    "PageLinks": _page_links,
    "Member": _member,
}


@pytest.mark.parametrize("name", sorted(INTERNAL_SAMPLES))
def test_internal_models_ignore_unknown_fields(name: str) -> None:
    message = INTERNAL_SAMPLES[name]()
    newer = json.loads(encode(message))
    newer["field_from_the_future"] = {"nested": [1, 2, 3]}

    assert decode(type(message), json.dumps(newer).encode()) == message


def test_internal_models_ignore_unknown_fields_in_nested_records() -> None:
    message = _page_links()
    newer = json.loads(encode(message))
    newer["edges"][0]["weight"] = 0.7

    assert decode(links.PageLinks, json.dumps(newer).encode()) == message


@pytest.mark.parametrize(
    ("name", "field", "wrong"),
    [
        ("FetchOutcome", "kind", "exploded"),
        ("FetchOutcome", "depth", "deep"),
        ("FetchOutcome", "fetched_at", -1),
        ("DiscoveredUrls", "urls", "https://example.com/x"),
        ("DiscoveredUrls", "depth", -1),
        ("PageLinks", "edges", [{"to_url": 5, "link_type": "INTERNAL", "discovered_at": 1}]),
        ("PageLinks", "parts", 0),
        ("Member", "ready", "maybe"),
        ("Member", "partitions", "crawl.urls:0"),
        ("Member", "heartbeat_ms", None),
    ],
)
def test_internal_models_still_reject_wrong_types(name: str, field: str, wrong: object) -> None:
    message = INTERNAL_SAMPLES[name]()
    broken = json.loads(encode(message))
    broken[field] = wrong

    with pytest.raises(DecodeError, match=field):
        decode(type(message), json.dumps(broken).encode())


@pytest.mark.parametrize("name", sorted(INTERNAL_SAMPLES))
def test_internal_models_reject_missing_required_fields(name: str) -> None:
    message = INTERNAL_SAMPLES[name]()
    required = next(n for n, f in type(message).model_fields.items() if f.is_required())
    broken = json.loads(encode(message))
    del broken[required]

    with pytest.raises(DecodeError, match=f"{required}: Field required"):
        decode(type(message), json.dumps(broken).encode())


# --- partitioning by a part of the key ----------------------------------------------------------

TARGETS = [f"https://site{n}.example/page/{n * 7}" for n in range(200)] + [
    "https://例え.jp/パス",
    "http://example.com:8080/",
    "",
]
SOURCES = [f"https://source{n}.example/" for n in range(40)]


@pytest.mark.parametrize("partitions", [1, 6, 7, 64])
def test_in_links_partition_by_target_url_alone(partitions: int) -> None:
    for to_url in TARGETS:
        expected = partition_for_key(to_url.encode("utf-8"), partitions)
        assert links_by_target.partition(to_url, partitions) == expected


def test_every_in_link_of_a_target_shares_a_partition_its_full_keys_would_not() -> None:
    to_url = TARGETS[0]
    full_key_partitions = {
        partition_for_key(links_by_target.key(to_url, source).encode(), 12) for source in SOURCES
    }

    assert links_by_target.key(to_url, SOURCES[0]) == f"{to_url}\t{SOURCES[0]}"
    assert len(full_key_partitions) > 1, "the full key would scatter one target's in-links"
    assert links_by_target.partition(to_url, 12) == partition_for_key(to_url.encode(), 12)


@pytest.mark.parametrize("partitions", [1, 6, 7, 64])
def test_scores_partition_by_host_like_the_hosts_urls(partitions: int) -> None:
    hosts = [f"host{n}.example" for n in range(200)] + ["xn--r8jz45g.jp", "example.com:8080"]
    for host in hosts:
        expected = partition_for_key(urls.key(host).encode("utf-8"), partitions)
        assert scores.partition(host, partitions) == expected
        assert partition_for_key(outcomes.key(host).encode("utf-8"), partitions) == expected
    assert scores.key("https://host0.example/page") == "https://host0.example/page"


@pytest.mark.parametrize(
    ("url", "sitemap_like"),
    [
        ("https://example.com/sitemap.xml", True),
        ("https://example.com/SITEMAP_INDEX.XML", True),
        ("https://example.com/wp-sitemap-posts-post-1.xml", True),
        ("https://example.com/sitemaps/posts", True),
        ("https://example.com/feeds/2026/pages.xml.gz", True),
        ("https://example.com/", False),
        ("https://example.com/about.html", False),
        ("https://example.com/page?format=sitemap", False),
        ("https://example.com/archive.tar.gz", False),
    ],
)
def test_sitemap_like_urls(url: str, sitemap_like: bool) -> None:
    assert seeds.looks_like_sitemap(url) is sitemap_like


def test_a_sitemap_crawl_keeps_sitemap_media_types_for_sitemap_like_urls_only() -> None:
    html = ["text/html", "application/xhtml+xml"]
    sitemaps = seeds.CrawlRequest(seeds=["https://example.com/"], use_sitemaps=True)
    index = "https://example.com/sitemap_index.xml"
    assert seeds.fetched_content_types(sitemaps, index) == [*html, *seeds.SITEMAP_MEDIA_TYPES]
    assert seeds.fetched_content_types(sitemaps, "https://example.com/a") == html
    without = seeds.CrawlRequest(seeds=["https://example.com/"])
    assert seeds.fetched_content_types(without, index) == html
    anything = seeds.CrawlRequest(
        seeds=["https://example.com/"], use_sitemaps=True, content_types=["*/*"]
    )
    assert seeds.fetched_content_types(anything, index) == ["*/*"]
    xml_too = seeds.CrawlRequest(
        seeds=["https://example.com/"], use_sitemaps=True, content_types=["text/xml"]
    )
    assert seeds.fetched_content_types(xml_too, index) == [
        "text/xml",
        "application/xml",
        "application/gzip",
        "application/x-gzip",
    ]


def test_a_crawls_headers_are_checked_and_the_fetchers_own_refused() -> None:
    base = {"seeds": ["https://example.com/"]}
    accepted = seeds.CrawlRequest.model_validate(
        {**base, "headers": {"Accept-Language": "de", "X-Research": "contact me@example.org"}}
    )
    assert accepted.headers == {"Accept-Language": "de", "X-Research": "contact me@example.org"}
    refused = {
        "User-Agent": "is the fetcher's to send",
        "accept": "is the fetcher's to send",
        "Proxy-Authorization": "is the fetcher's to send",
        "Authorization": "is the fetcher's to send",
        "X Y": "is not a header name",
        "X-Split": "line break",
    }
    for name, message in refused.items():
        value = "a\r\nInjected: 1" if name == "X-Split" else "x"
        with pytest.raises(ValidationError, match=message):
            seeds.CrawlRequest.model_validate({**base, "headers": {name: value}})
    with pytest.raises(ValidationError, match="at most 20"):
        seeds.CrawlRequest.model_validate({**base, "headers": {f"X-{n}": "v" for n in range(21)}})
