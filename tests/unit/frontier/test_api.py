"""The crawl-control API against a fake `seeds` publisher and a fake status view: every status
code, seed 004's payload mapping, the bearer token, and the OpenAPI document."""

from __future__ import annotations

import contextlib
import json
import socket
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import jsonschema
import openapi_spec_validator
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from pydantic import SecretStr

from frontier.api import (
    MAX_BODY_BYTES,
    FieldError,
    Submissions,
    TableCrawlView,
    build_app,
    crawl_request_from,
    openapi_document,
)
from frontier.exceptions import ApiPortUnavailableError
from frontier.lookup import PartitionNotHeldError, UrlStatus
from frontier.progress import ProgressBook
from frontier.service import FrontierServiceSettings, start_api
from schemas.crawls import CrawlState, CrawlStatus
from schemas.progress import PartitionProgress
from schemas.seeds import MAX_REQUEST_BYTES, SEED_MESSAGE, CrawlCommand, CrawlRequest
from schemas.serde import decode, encode
from streamcrawl.apiserver import ApiServer
from streamcrawl.exceptions import DeliveryError

SEED_004 = {
    "seedUrls": ["https://en.wikipedia.org/wiki/Main_Page"],
    "config": {
        "maxDepth": -1,
        "politenessDelay": 200,
        "maxRetries": 3,
        "recrawlIntervalHours": 24,
        "contentType": "html",
        "domainWhitelist": ["en.wikipedia.org"],
    },
}
SEED = "https://example.com/"
Client = TestClient[web.Request, web.Application]


class FakeSeeds:
    """Records what the API publishes; raises `failure` instead when one is set."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes]] = []
        self.failure: Exception | None = None

    async def __call__(self, key: str, value: bytes) -> None:
        if self.failure is not None:
            raise self.failure
        self.records.append((key, value))

    def messages(self) -> list[CrawlRequest | CrawlCommand]:
        return [decode(SEED_MESSAGE, value) for _, value in self.records]


class FakeView:
    def __init__(self) -> None:
        self.statuses: dict[str, str] = {}
        self.totals: dict[str, dict[str, int]] = {}
        self.states: list[CrawlState] = []

    def crawls(self) -> list[CrawlState]:
        return list(self.states)

    def status(self, crawl_id: str, /) -> str | None:
        return self.statuses.get(crawl_id)

    def counters(self, crawl_id: str, /) -> dict[str, int]:
        return dict(self.totals.get(crawl_id, {}))


@pytest.fixture
def published() -> FakeSeeds:
    return FakeSeeds()


@pytest.fixture
def view() -> FakeView:
    return FakeView()


async def serve(app: web.Application) -> Client:
    client: Client = TestClient(TestServer(app))
    await client.start_server()
    return client


@pytest.fixture
async def client(published: FakeSeeds, view: FakeView) -> AsyncIterator[Client]:
    client = await serve(build_app(published, view))
    yield client
    await client.close()


async def start(client: Client, payload: Any) -> tuple[int, dict[str, Any]]:
    response = await client.post("/v1/crawl/start", json=payload)
    return response.status, await response.json()


def fields(body: dict[str, Any]) -> list[str | None]:
    return [error["field"] for error in body["errors"]]


# ----- POST /v1/crawl/start ----------------------------------------------------------------------


async def test_seed_004_payload_is_published_as_a_crawl_request(
    client: Client, published: FakeSeeds
) -> None:
    response = await client.post("/v1/crawl/start", json=SEED_004)

    assert response.status == 202
    body = await response.json()
    crawl_id = body["crawlId"]
    assert body == {"crawlId": crawl_id, "status": "submitted"}
    assert response.headers["Location"] == f"/v1/crawl/{crawl_id}"
    [(key, _)] = published.records
    assert key == crawl_id
    [request] = published.messages()
    assert isinstance(request, CrawlRequest)
    assert request.crawl_id == crawl_id
    assert request.seeds == ["https://en.wikipedia.org/wiki/Main_Page"]
    assert request.max_depth == -1
    assert request.politeness_delay_ms == 200
    assert request.max_retries == 3
    assert request.recrawl_interval_hours == 24
    assert request.content_types == ["text/html", "application/xhtml+xml"]
    assert request.domain_whitelist == ["en.wikipedia.org"]


@pytest.mark.parametrize(
    "payload",
    [
        {"seeds": [SEED], "max_links": 10, "crawl_id": "c1", "exclude_pattern": "/blog/"},
        {
            "config": {"seeds": [SEED], "max_links": 10, "crawl_id": "c1"},
            "excludePattern": "/blog/",
        },
        {
            "seedUrls": [SEED],
            "crawlId": "c1",
            "config": {"maxLinks": 10, "exclude_pattern": "/blog/"},
        },
    ],
    ids=["snake-top", "snake-in-config", "camel"],
)
def test_crawl_request_fields_under_snake_or_camel_names_anywhere(payload: Any) -> None:
    request = crawl_request_from(payload)

    assert isinstance(request, CrawlRequest)
    assert (request.crawl_id, request.seeds, request.max_links) == ("c1", [SEED], 10)
    assert request.exclude_pattern == "/blog/"


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("html", ["text/html", "application/xhtml+xml"]),
        ("HTML", ["text/html", "application/xhtml+xml"]),
        ("text/html", ["text/html"]),
        (["html", "application/pdf"], ["text/html", "application/xhtml+xml", "application/pdf"]),
        ("any", ["*/*"]),
    ],
)
def test_content_type_aliases_expand_to_media_types(
    content_type: object, expected: list[str]
) -> None:
    request = crawl_request_from({"seedUrls": [SEED], "config": {"contentType": content_type}})

    assert isinstance(request, CrawlRequest)
    assert request.content_types == expected


def test_an_unknown_content_type_alias_is_an_error() -> None:
    errors = crawl_request_from({"seedUrls": [SEED], "config": {"contentType": "pdf"}})

    assert isinstance(errors, list)
    assert [error.field for error in errors] == ["config.contentType"]


def test_a_setting_given_twice_is_an_error_naming_both_places() -> None:
    errors = crawl_request_from({"seedUrls": [SEED], "max_depth": 1, "config": {"maxDepth": 2}})

    assert errors == [FieldError("config.maxDepth", "sets the same as max_depth; give it once")]


async def test_validation_errors_name_the_fields_as_the_client_wrote_them(client: Client) -> None:
    status, body = await start(
        client,
        {
            "seedUrls": ["https://ok.example/", "ftp://example.com/"],
            "config": {"maxDepth": -5, "maxDepht": 3},
            "colour": "blue",
        },
    )

    assert status == 400
    assert sorted(fields(body)) == ["colour", "config.maxDepht", "config.maxDepth", "seedUrls"]
    messages = {error["field"]: error["message"] for error in body["errors"]}
    assert "ftp://example.com/" in messages["seedUrls"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"config": {"maxDepth": 2}}, "seedUrls"),
        ({"seedUrls": []}, "seedUrls"),
        ({"seedUrls": [SEED], "config": ["maxDepth"]}, "config"),
        ({"seedUrls": [SEED], "config": {"config": {}}}, "config.config"),
        ({"seedUrls": [SEED], "crawlId": "has space"}, "crawlId"),
        ({"seedUrls": [SEED], "include_pattern": "(unclosed"}, "include_pattern"),
        ([SEED], None),
    ],
)
async def test_bad_bodies_are_400(client: Client, payload: Any, field: str | None) -> None:
    status, body = await start(client, payload)

    assert status == 400
    assert field in fields(body)


@pytest.mark.parametrize("body", [b"{not json", b'{"seedUrls": NaN}', b"\xff\xfe{", b"[" * 100_000])
async def test_bodies_that_are_not_json_are_400(
    client: Client, published: FakeSeeds, body: bytes
) -> None:
    response = await client.post(
        "/v1/crawl/start", data=body, headers={"Content-Type": "application/json"}
    )

    assert response.status == 400
    assert (await response.json())["errors"][0]["field"] is None
    assert published.records == []


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_a_body_that_is_not_json_is_415(client: Client, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = await client.post(
        "/v1/crawl/start", data=json.dumps(SEED_004).encode(), headers=headers
    )

    assert response.status == 415
    assert "errors" in await response.json()


async def test_a_json_suffix_media_type_is_json(client: Client) -> None:
    response = await client.post(
        "/v1/crawl/start",
        data=json.dumps(SEED_004).encode(),
        headers={"Content-Type": "application/vnd.streamcrawl+json; charset=utf-8"},
    )

    assert response.status == 202


async def test_a_body_over_the_cap_is_413(client: Client, published: FakeSeeds) -> None:
    padding = "x" * MAX_BODY_BYTES
    status, body = await start(client, {"seedUrls": [SEED], "padding": padding})

    assert status == 413
    assert "errors" in body
    assert published.records == []


async def test_a_request_that_encodes_over_the_topic_limit_is_413(
    client: Client, published: FakeSeeds
) -> None:
    seeds = [f"https://example.com/{n}/" + "p" * 7_000 for n in range(596)]
    seeds.append("https://example.com/last/")
    base = len(encode(CrawlRequest(crawl_id="c1", seeds=seeds)))
    seeds[-1] += "p" * (MAX_REQUEST_BYTES + 1 - base)  # encodes one byte over the limit
    body = json.dumps({"seedUrls": seeds, "crawlId": "c1"}, separators=(",", ":")).encode()
    assert len(body) <= MAX_BODY_BYTES, "the body itself is under the cap"

    response = await client.post(
        "/v1/crawl/start", data=body, headers={"Content-Type": "application/json"}
    )
    status = response.status

    assert status == 413
    assert published.records == []


async def test_a_crawl_id_already_known_is_409(client: Client, view: FakeView) -> None:
    assert (await start(client, {"seedUrls": [SEED], "crawlId": "c1"}))[0] == 202
    assert (await start(client, {"seedUrls": [SEED], "crawlId": "c1"}))[0] == 409
    view.statuses["c2"] = "done"
    response = await client.post("/v1/crawl/start", json={"seedUrls": [SEED], "crawlId": "c2"})
    assert response.status == 409
    assert response.headers["Location"] == "/v1/crawl/c2"


@pytest.mark.parametrize("failure", [DeliveryError("broker down"), TimeoutError()])
async def test_a_broker_that_does_not_take_the_request_is_503(
    client: Client, published: FakeSeeds, failure: Exception
) -> None:
    published.failure = failure

    status, body = await start(client, {"seedUrls": [SEED], "crawlId": "c1"})

    assert status == 503
    assert "could not publish" in body["errors"][0]["message"]
    assert (await client.get("/v1/crawl/c1")).status == 404, "not remembered as submitted"


# ----- GET /v1/crawl/{id} ------------------------------------------------------------------------


async def test_a_crawl_is_submitted_until_its_owner_writes_crawls(
    client: Client, view: FakeView
) -> None:
    _, body = await start(client, SEED_004)
    crawl_id = body["crawlId"]

    response = await client.get(f"/v1/crawl/{crawl_id}")
    assert response.status == 200
    assert await response.json() == {"crawlId": crawl_id, "status": "submitted", "counters": {}}

    view.statuses[crawl_id] = "active"
    view.totals[crawl_id] = {"fetched": 3, "queued": 2}
    response = await client.get(f"/v1/crawl/{crawl_id}")
    assert await response.json() == {
        "crawlId": crawl_id,
        "status": "active",
        "counters": {"fetched": 3, "queued": 2},
    }


async def test_a_crawl_known_only_to_the_tables_is_found(client: Client, view: FakeView) -> None:
    view.statuses["elsewhere"] = "done"

    response = await client.get("/v1/crawl/elsewhere")

    assert response.status == 200
    assert (await response.json())["status"] == "done"


def _state(crawl_id: str, status: CrawlStatus, created_at: int) -> CrawlState:
    request = CrawlRequest(crawl_id=crawl_id, seeds=[SEED])
    return CrawlState(
        crawl_id=crawl_id,
        request=request,
        status=status,
        created_at=created_at,
        updated_at=created_at + 5,
        owner_partition=0,
    )


async def test_the_crawls_are_listed_with_their_counters_and_filtered_by_status(
    client: Client, view: FakeView
) -> None:
    view.states = [_state("old", "done", 1), _state("new", "active", 2)]
    view.totals["new"] = {"fetched": 7, "queued": 3}

    response = await client.get("/v1/crawls")

    assert response.status == 200
    assert await response.json() == {
        "crawls": [
            {
                "crawlId": "old",
                "status": "done",
                "createdAt": 1,
                "updatedAt": 6,
                "seeds": [SEED],
                "counters": {},
            },
            {
                "crawlId": "new",
                "status": "active",
                "createdAt": 2,
                "updatedAt": 7,
                "seeds": [SEED],
                "counters": {"fetched": 7, "queued": 3},
            },
        ]
    }
    active = await (await client.get("/v1/crawls", params={"status": "active"})).json()
    assert [crawl["crawlId"] for crawl in active["crawls"]] == ["new"]
    bad = await client.get("/v1/crawls", params={"status": "finished"})
    assert bad.status == 400
    assert (await bad.json())["errors"][0]["field"] == "status"


@pytest.mark.parametrize("path", ["/v1/crawl/unknown", "/v1/crawl/start", "/v1/crawl/a%20b"])
async def test_an_unknown_crawl_is_404(client: Client, path: str) -> None:
    response = await client.get(path)

    assert response.status == 404
    assert "errors" in await response.json()


# ----- POST /v1/crawl/{id}/pause|resume|cancel ---------------------------------------------------


@pytest.mark.parametrize("action", ["pause", "resume", "cancel"])
async def test_a_command_is_published_behind_its_crawl(
    client: Client, published: FakeSeeds, action: str
) -> None:
    _, body = await start(client, SEED_004)
    crawl_id = body["crawlId"]

    response = await client.post(f"/v1/crawl/{crawl_id}/{action}")

    assert response.status == 202
    assert await response.json() == {"crawlId": crawl_id, "action": action}
    assert response.headers["Location"] == f"/v1/crawl/{crawl_id}"
    assert [key for key, _ in published.records] == [crawl_id, crawl_id]
    assert published.messages()[-1] == CrawlCommand(crawl_id=crawl_id, action=action)


async def test_a_command_for_a_crawl_in_the_tables_is_202(
    client: Client, view: FakeView, published: FakeSeeds
) -> None:
    view.statuses["c9"] = "paused"

    assert (await client.post("/v1/crawl/c9/resume")).status == 202
    assert published.messages() == [CrawlCommand(crawl_id="c9", action="resume")]


async def test_a_command_for_an_unknown_crawl_is_404(client: Client, published: FakeSeeds) -> None:
    assert (await client.post("/v1/crawl/nobody/cancel")).status == 404
    assert (await client.post("/v1/crawl/nobody/explode")).status == 404
    assert published.records == []


async def test_a_command_the_broker_does_not_take_is_503(
    client: Client, view: FakeView, published: FakeSeeds
) -> None:
    view.statuses["c1"] = "active"
    published.failure = DeliveryError("broker down")

    assert (await client.post("/v1/crawl/c1/pause")).status == 503


async def test_a_wrong_method_is_405_in_the_error_shape(client: Client) -> None:
    response = await client.get("/v1/crawl/c1/pause")

    assert response.status == 405
    assert "POST" in response.headers["Allow"]
    assert "errors" in await response.json()


# ----- token, health, OpenAPI --------------------------------------------------------------------


@pytest.fixture
async def guarded(published: FakeSeeds, view: FakeView) -> AsyncIterator[Client]:
    client = await serve(build_app(published, view, token=SecretStr("s3cret")))
    yield client
    await client.close()


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", "Bearer s3cre", "Bearer s3cret2", "Basic s3cret", "s3cret", "Bearer"],
)
async def test_without_the_token_every_request_is_401(
    guarded: Client, published: FakeSeeds, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    for method, path in [
        ("POST", "/v1/crawl/start"),
        ("GET", "/v1/crawl/c1"),
        ("POST", "/v1/crawl/c1/cancel"),
        ("GET", "/v1/openapi.json"),
        ("GET", "/healthz"),
        ("GET", "/no/such/path"),
    ]:
        response = await guarded.request(method, path, json=SEED_004, headers=headers)
        assert response.status == 401, (method, path)
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert published.records == []


@pytest.mark.parametrize("scheme", ["Bearer", "bearer"])
async def test_with_the_token_requests_pass(guarded: Client, scheme: str) -> None:
    headers = {"Authorization": f"{scheme} s3cret"}

    response = await guarded.post("/v1/crawl/start", json=SEED_004, headers=headers)
    assert response.status == 202
    crawl_id = (await response.json())["crawlId"]
    assert (await guarded.get(f"/v1/crawl/{crawl_id}", headers=headers)).status == 200


class FakeUrls:
    """URL lookups: a.example's partition (3) is held here, every other host's elsewhere (5)."""

    def status(self, crawl_id: str, url: str) -> UrlStatus | None:
        if crawl_id != "c1":
            return None
        if not url.startswith("http"):
            raise ValueError(f"not a crawlable http(s) URL: {url!r}")
        if "a.example" not in url:
            raise PartitionNotHeldError(5, "is not held here")
        return UrlStatus(
            crawl_id=crawl_id, url=url, host="a.example", partition=3, admitted=True, state="done"
        )


async def test_a_url_is_looked_up_on_the_instance_holding_its_partition(
    published: FakeSeeds, view: FakeView
) -> None:
    client = await serve(build_app(published, view, urls=FakeUrls()))
    try:
        response = await client.get("/v1/crawl/c1/url", params={"url": "https://a.example/x"})
        assert response.status == 200
        document = await response.json()
        assert (document["url"], document["state"], document["partition"]) == (
            "https://a.example/x",
            "done",
            3,
        )
        response = await client.get("/v1/crawl/c1/url", params={"url": "https://b.example/"})
        assert response.status == 421
        document = await response.json()
        assert document["partition"] == 5
        assert document["errors"] == [{"field": None, "message": "partition 5 is not held here"}]
        response = await client.get("/v1/crawl/c9/url", params={"url": "https://a.example/x"})
        assert response.status == 404
        for query in ({"url": "ftp://a.example/"}, {}):
            response = await client.get("/v1/crawl/c1/url", params=query)
            assert response.status == 400
            [error] = (await response.json())["errors"]
            assert error["field"] == "url"
    finally:
        await client.close()


async def test_an_api_without_frontier_state_answers_no_url_lookups(client: Client) -> None:
    response = await client.get("/v1/crawl/c1/url", params={"url": "https://a.example/x"})
    assert response.status == 503


async def test_health(client: Client) -> None:
    response = await client.get("/healthz")

    assert response.status == 200
    assert await response.json() == {"healthy": True}


EXPECTED_PATHS = {
    "/v1/crawl/start",
    "/v1/crawls",
    "/v1/crawl/{crawlId}",
    "/v1/crawl/{crawlId}/pause",
    "/v1/crawl/{crawlId}/resume",
    "/v1/crawl/{crawlId}/cancel",
    "/v1/crawl/{crawlId}/url",
    "/v1/openapi.json",
    "/healthz",
}


async def test_the_openapi_document_parses_and_has_every_path(client: Client) -> None:
    response = await client.get("/v1/openapi.json")

    assert response.status == 200
    document = json.loads(await response.read())
    assert document["openapi"] == "3.1.0"
    assert set(document["paths"]) == EXPECTED_PATHS
    schemas = document["components"]["schemas"]
    refs = {ref for ref in _refs(document) if ref.startswith("#/components/schemas/")}
    assert {ref.rsplit("/", 1)[1] for ref in refs} <= set(schemas)
    assert schemas["CrawlRequest"]["properties"].keys() == CrawlRequest.model_fields.keys()
    assert "security" not in document


def test_the_openapi_document_is_valid_openapi_3_1() -> None:
    openapi_spec_validator.validate(openapi_document(token_required=False))
    guarded = openapi_document(token_required=True)
    openapi_spec_validator.validate(guarded)
    assert guarded["security"] == [{"bearer": []}]


def test_seed_004_validates_against_the_documented_start_schema() -> None:
    document = openapi_document(token_required=False)
    schema = {"$ref": "#/components/schemas/StartCrawl", "components": document["components"]}
    validator = jsonschema.Draft202012Validator(schema)

    assert validator.is_valid(SEED_004)
    assert validator.is_valid({"seeds": [SEED], "max_links": 5})
    assert not validator.is_valid({**SEED_004, "colour": "blue"})
    assert not validator.is_valid({**SEED_004, "config": {"maxDepht": 3}})


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


# ----- the production view and the submission memory --------------------------------------------


class FakeTable(dict[str, CrawlState]):
    """The `crawls` table as a TopicTable shows it."""

    def snapshot(self) -> dict[str, CrawlState]:
        return dict(self)


def test_the_table_view_sums_the_latest_snapshot_of_every_partition() -> None:
    request = CrawlRequest(crawl_id="c1", seeds=[SEED])
    state = CrawlState(
        crawl_id="c1",
        request=request,
        status="paused",
        created_at=1,
        updated_at=2,
        owner_partition=0,
    )
    book = ProgressBook()
    for partition, number, fetched in [(0, 1, 1), (0, 2, 4), (1, 1, 2), (1, 2, 3), (2, 7, 5)]:
        counters = {"fetched": fetched, "queued": partition}
        book.record(
            PartitionProgress(
                crawl_id="c1", partition=partition, snapshot=number, at=number, counters=counters
            )
        )
    newer = state.model_copy(update={"crawl_id": "c0", "created_at": 9})
    view = TableCrawlView(FakeTable({"c0": newer, "c1": state}), book)

    assert view.status("c1") == "paused"
    assert [crawl.crawl_id for crawl in view.crawls()] == ["c1", "c0"], "oldest first"
    assert view.counters("c1") == {"fetched": 4 + 3 + 5, "queued": 0 + 1 + 2}
    assert view.status("c2") is None
    assert view.counters("c2") == {}


def test_submissions_keep_the_newest_ids() -> None:
    submitted = Submissions(limit=2)
    for crawl_id in ("a", "b", "a", "c"):
        submitted.add(crawl_id)

    assert "a" in submitted
    assert "c" in submitted
    assert "b" not in submitted


# ----- serving -----------------------------------------------------------------------------------


def test_the_api_server_serves_on_its_own_thread_and_stops(view: FakeView) -> None:
    server = ApiServer(build_app(FakeSeeds(), view), "127.0.0.1", 0)
    address = server.start()
    try:
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(f"http://{address}/healthz", timeout=10) as response:
            assert json.loads(response.read()) == {"healthy": True}
    finally:
        server.stop()


def test_an_explicit_api_port_that_is_taken_stops_the_frontier() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = FrontierServiceSettings(
            kafka={"bootstrap_servers": "127.0.0.1:1"}, frontier={"api_port": port}
        )
        stop = pytest.raises(ApiPortUnavailableError, match=str(port))
        with contextlib.ExitStack() as stack, stop:
            start_api(settings, {}, ProgressBook(), stack)
