"""The crawl-control HTTP API (DESIGN.md sections 2 and 5): start, follow, pause, resume and cancel
crawls. Every frontier process serves it on its own port, never the metrics port
(`frontier.service` runs it; `FrontierOptions.api_*` configure it).

- ``POST /v1/crawl/start`` validates the body into a CrawlRequest and publishes it to `seeds` keyed
  by crawl id, as the CLI does (DESIGN section 3, step 1); 202 with a Location header.
- ``GET /v1/crawl/{id}``: status and counters, read from the `crawls` table and the summed latest
  `progress` snapshot of every partition. A crawl this process published whose owner has not
  written `crawls` yet is "submitted"; any other id missing from `crawls` is 404.
- ``GET /v1/crawls[?status=...]``: every crawl of the `crawls` table, oldest first, with its
  seeds, times and counters (400 for a status that does not exist).
- ``POST /v1/crawl/{id}/pause|resume|cancel`` publishes a CrawlCommand behind the request (same
  key, so the owner sees them in order), 202; 404 for a crawl neither in `crawls` nor published
  here. The owner decides whether the command changes anything (a resume of an active crawl does
  not), since the API's view of the status may lag.
- ``GET /v1/crawl/{id}/url?url=...``: one URL of the crawl as the frontier knows it
  (`frontier.lookup`), from the instance holding the URL's state partition; another instance
  answers 421 with the partition number, and the CLI then asks the one `members` lists for it.
- ``GET /v1/openapi.json`` (OpenAPI 3.1) and ``GET /healthz``.

With a token configured every request needs ``Authorization: Bearer <token>`` (401 otherwise;
compared as SHA-256 digests in constant time, so neither content nor length leaks). Errors answer
``{"errors": [{"field": ..., "message": ...}]}``.

The start body is seed document 004's ``{"seedUrls": [...], "config": {...}}`` or CrawlRequest's
own fields. Names map to CrawlRequest fields as follows:

==============================  ================================================================
seedUrls                        seeds
maxDepth                        max_depth (-1: unlimited)
politenessDelay (ms)            politeness_delay_ms
maxRetries                      max_retries
recrawlIntervalHours            recrawl_interval_hours
contentType                     content_types: a media type, a list of them, or an alias
                                (``html`` = text/html + application/xhtml+xml, ``any`` = */*)
domainWhitelist                 domain_whitelist (hosts under these domains are admitted besides
                                the seeds' own hosts, `frontier.scope`)
any other field                 itself, as snake_case (max_links) or camelCase (maxLinks)
==============================  ================================================================

Every name is accepted at top level and inside ``config``. Nothing wins over anything: a setting
given twice (under two names, or both at top level and in config) is a 400 naming both places, so
no value is silently dropped. Unknown names are 400 too (the inbound-message rule of section 2).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, get_args

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from pydantic import SecretStr, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from frontier.config import ProgressView
from frontier.lookup import PartitionNotHeldError, UrlStatus
from schemas import seeds
from schemas.crawls import CrawlState, CrawlStatus
from schemas.seeds import (
    CONTENT_TYPE_ALIASES,
    MAX_REQUEST_BYTES,
    CrawlCommand,
    CrawlId,
    CrawlRequest,
    expand_content_types,
)
from schemas.serde import encode
from streamcrawl.exceptions import StreamcrawlError

MAX_BODY_BYTES = seeds.TOPIC.max_message_bytes
"""Request bodies above this answer 413; the encoded request must also fit the `seeds` topic."""
MAX_REPORTED_ERRORS = 50
REMEMBERED_SUBMISSIONS = 10_000
SUBMITTED = "submitted"
ACTIONS = ("pause", "resume", "cancel")

Publish = Callable[[str, bytes], Awaitable[None]]
"""Send one `seeds` record (key, value); returns once the broker has it, raises StreamcrawlError or
TimeoutError when it does not."""

_CRAWL_ID: TypeAdapter[str] = TypeAdapter(CrawlId)


class CrawlStatusView(Protocol):
    """What the API reads about crawls: a status in `crawls`, summed counters, every crawl."""

    def status(self, crawl_id: str, /) -> str | None: ...

    def counters(self, crawl_id: str, /) -> dict[str, int]: ...

    def crawls(self) -> list[CrawlState]:
        """Every crawl in `crawls`, oldest first."""
        ...


class UrlQuery(Protocol):
    """One URL of a crawl as the frontier knows it (`frontier.lookup.UrlLookup`)."""

    def status(self, crawl_id: str, url: str) -> UrlStatus | None: ...


class CrawlTable(Protocol):
    """The `crawls` table (a `streamcrawl.table.TopicTable`): one crawl's state, or all."""

    def get(self, key: str, /) -> CrawlState | None: ...

    def snapshot(self) -> Mapping[str, CrawlState]: ...


class TableCrawlView:
    """The view over the frontier's own tables: the `crawls` table and the progress book."""

    def __init__(self, table: CrawlTable, progress: ProgressView) -> None:
        self._table = table
        self._progress = progress

    def status(self, crawl_id: str, /) -> str | None:
        state = self._table.get(crawl_id)
        return None if state is None else state.status

    def crawls(self) -> list[CrawlState]:
        return sorted(self._table.snapshot().values(), key=lambda state: state.created_at)

    def counters(self, crawl_id: str, /) -> dict[str, int]:
        totals: dict[str, int] = {}
        for history in self._progress.snapshots(crawl_id).values():
            if history:
                for name, value in history[-1].counters.items():
                    totals[name] = totals.get(name, 0) + value
        return totals


# ----- the start payload -----------------------------------------------------------------------

CONFIG = "config"
SEED_004_NAMES = {
    "seedUrls": "seeds",
    "politenessDelay": "politeness_delay_ms",
    "contentType": "content_types",
}
"""Seed 004's names that are not the camelCase of a CrawlRequest field."""
_SHOWN_AS = {"seeds": "seedUrls"}
"""How an error names a field the client did not send (a missing seed list)."""


def _accepted_names() -> dict[str, str]:
    names: dict[str, str] = {}
    for field in CrawlRequest.model_fields:
        names[field] = field
        names[to_camel(field)] = field
    names.update(SEED_004_NAMES)
    return names


FIELD_NAMES = _accepted_names()
"""Every name the start body accepts, mapped to its CrawlRequest field."""


@dataclass(frozen=True)
class FieldError:
    field: str | None
    """Where in the body, as the client wrote it (``config.maxDepth``, ``seedUrls[0]``)."""
    message: str

    def as_json(self) -> dict[str, str | None]:
        return {"field": self.field, "message": self.message}


def crawl_request_from(payload: object) -> CrawlRequest | list[FieldError]:
    """Map a start body (seed 004's shape or CrawlRequest's fields) to a validated CrawlRequest,
    or every problem found, each named by where the client put it."""
    if not isinstance(payload, dict):
        return [FieldError(None, "the body must be a JSON object")]
    entries = [(name, name, value) for name, value in payload.items() if name != CONFIG]
    errors: list[FieldError] = []
    if CONFIG in payload:
        config = payload[CONFIG]
        if isinstance(config, dict):
            entries += [(name, f"{CONFIG}.{name}", value) for name, value in config.items()]
        else:
            errors.append(FieldError(CONFIG, "must be a JSON object"))
    fields: dict[str, object] = {}
    where: dict[str, str] = {}
    for name, path, value in entries:
        field = FIELD_NAMES.get(name)
        if field is None:
            errors.append(FieldError(path, "unknown field"))
        elif field in where:
            errors.append(FieldError(path, f"sets the same as {where[field]}; give it once"))
        else:
            fields[field] = value
            where[field] = path
    if "content_types" in fields:
        expanded, problem = expand_content_types(fields["content_types"])
        if problem is not None:
            errors.append(FieldError(where["content_types"], problem))
        fields["content_types"] = expanded
    try:
        request = CrawlRequest.model_validate(fields)
    except ValidationError as error:
        errors.extend(
            FieldError(_client_path(item["loc"], where), item["msg"]) for item in error.errors()
        )
        return errors
    return errors or request


def _client_path(loc: Sequence[int | str], where: Mapping[str, str]) -> str | None:
    if not loc:
        return None
    head = str(loc[0])
    path = where.get(head, _SHOWN_AS.get(head, head))
    for part in loc[1:]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


# ----- the application -------------------------------------------------------------------------


def error_response(
    status: int, errors: Sequence[FieldError], headers: Mapping[str, str] | None = None
) -> web.Response:
    shown = [error.as_json() for error in errors[:MAX_REPORTED_ERRORS]]
    if len(errors) > MAX_REPORTED_ERRORS:
        shown.append({"field": None, "message": f"{len(errors) - MAX_REPORTED_ERRORS} more"})
    return web.json_response({"errors": shown}, status=status, headers=headers)


def _problem(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return error_response(status, [FieldError(None, message)], headers)


class Submissions:
    """Crawl ids this process published, newest kept: their owner may not have written `crawls`
    yet. Bounded, since the `crawls` table answers for every crawl once its owner wrote it."""

    def __init__(self, limit: int = REMEMBERED_SUBMISSIONS) -> None:
        self._limit = limit
        self._ids: OrderedDict[str, None] = OrderedDict()

    def add(self, crawl_id: str) -> None:
        self._ids[crawl_id] = None
        self._ids.move_to_end(crawl_id)
        while len(self._ids) > self._limit:
            self._ids.popitem(last=False)

    def __contains__(self, crawl_id: object) -> bool:
        return crawl_id in self._ids


class CrawlControl:
    """The request handlers, over a publish function and a status view (fakes in tests)."""

    def __init__(
        self, publish: Publish, view: CrawlStatusView, max_body_bytes: int = MAX_BODY_BYTES
    ) -> None:
        self._publish = publish
        self._view = view
        self._max_body_bytes = max_body_bytes
        self._submitted = Submissions()

    def current_status(self, crawl_id: str) -> str | None:
        status = self._view.status(crawl_id)
        if status is None and crawl_id in self._submitted:
            return SUBMITTED
        return status

    async def start(self, request: web.Request) -> web.Response:
        media_type = request.content_type
        if media_type != "application/json" and not media_type.endswith("+json"):
            return _problem(415, f"send application/json, not {media_type}")
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _problem(413, f"the body is over {self._max_body_bytes} bytes")
        try:
            payload = json.loads(body, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as error:  # JSONDecodeError and bad UTF-8 included
            return _problem(400, f"not valid JSON: {str(error)[:200]}")
        parsed = crawl_request_from(payload)
        if not isinstance(parsed, CrawlRequest):
            return error_response(400, parsed)
        crawl_id = parsed.crawl_id
        location = {"Location": f"/v1/crawl/{crawl_id}"}
        if self.current_status(crawl_id) is not None:
            return _problem(409, f"crawl {crawl_id} already exists", location)
        value = encode(parsed)
        if len(value) > MAX_REQUEST_BYTES:
            return _problem(413, f"the request encodes to {len(value)} bytes, over the limit")
        failure = await self._send(crawl_id, value)
        if failure is not None:
            return failure
        self._submitted.add(crawl_id)
        return web.json_response(
            {"crawlId": crawl_id, "status": SUBMITTED}, status=202, headers=location
        )

    async def status(self, request: web.Request) -> web.Response:
        crawl_id = request.match_info["crawl_id"]
        status = self.current_status(crawl_id) if _valid_crawl_id(crawl_id) else None
        if status is None:
            return _problem(404, f"no crawl {crawl_id[:200]!r}")
        counters = self._view.counters(crawl_id)
        return web.json_response({"crawlId": crawl_id, "status": status, "counters": counters})

    async def listing(self, request: web.Request) -> web.Response:
        wanted = request.query.get("status")
        if wanted is not None and wanted not in get_args(CrawlStatus):
            statuses = ", ".join(get_args(CrawlStatus))
            return error_response(400, [FieldError("status", f"one of {statuses}")])
        listed = [
            {
                "crawlId": state.crawl_id,
                "status": state.status,
                "createdAt": state.created_at,
                "updatedAt": state.updated_at,
                "seeds": list(state.request.seeds),
                "counters": self._view.counters(state.crawl_id),
            }
            for state in self._view.crawls()
            if wanted is None or state.status == wanted
        ]
        return web.json_response({"crawls": listed})

    async def command(self, request: web.Request) -> web.Response:
        crawl_id, action = request.match_info["crawl_id"], request.match_info["action"]
        if not _valid_crawl_id(crawl_id) or self.current_status(crawl_id) is None:
            return _problem(404, f"no crawl {crawl_id[:200]!r}")
        command = CrawlCommand.model_validate({"crawl_id": crawl_id, "action": action})
        failure = await self._send(crawl_id, encode(command))
        if failure is not None:
            return failure
        return web.json_response(
            {"crawlId": crawl_id, "action": action},
            status=202,
            headers={"Location": f"/v1/crawl/{crawl_id}"},
        )

    async def _send(self, crawl_id: str, value: bytes) -> web.Response | None:
        """Publish; a 503 when the broker did not take it (the client may retry)."""
        try:
            await self._publish(seeds.key(crawl_id), value)
        except (StreamcrawlError, TimeoutError) as error:
            reason = str(error) or type(error).__name__
            return _problem(503, f"could not publish to seeds ({reason}); retry with this crawlId")
        return None


async def url_status(urls: UrlQuery | None, request: web.Request) -> web.Response:
    """``GET /v1/crawl/{id}/url?url=...``: 200 with the URL's status; 421 with the partition
    when another instance holds it; 404 for no such crawl."""
    if urls is None:
        return _problem(503, "this API serves no URL lookups (no frontier state here)")
    crawl_id, url = request.match_info["crawl_id"], request.query.get("url", "")
    if not url:
        return error_response(400, [FieldError("url", "give the URL to look up: ?url=...")])
    try:
        status = urls.status(crawl_id, url)
    except ValueError as error:
        return error_response(400, [FieldError("url", str(error))])
    except PartitionNotHeldError as error:
        problem = {"errors": [{"field": None, "message": str(error)}]}
        return web.json_response({**problem, "partition": error.partition}, status=421)
    if status is None:
        return _problem(404, f"no crawl {crawl_id[:200]!r}")
    return web.json_response(status.model_dump(mode="json"))


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _valid_crawl_id(crawl_id: str) -> bool:
    try:
        _CRAWL_ID.validate_python(crawl_id)
    except ValidationError:
        return False
    return True


def bearer_guard(token: SecretStr) -> Middleware:
    """Every request must carry ``Authorization: Bearer <token>``; 401 otherwise."""
    expected = hashlib.sha256(token.get_secret_value().encode()).digest()

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        given = hashlib.sha256(credentials.strip().encode("utf-8", "surrogateescape")).digest()
        if not (hmac.compare_digest(given, expected) and scheme.lower() == "bearer"):
            challenge = {"WWW-Authenticate": 'Bearer realm="streamcrawl"'}
            return _problem(401, "a valid bearer token is required", challenge)
        return await handler(request)

    return guard


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own 404 and 405 in the API's error shape."""
    try:
        return await handler(request)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        allow = {"Allow": error.headers["Allow"]} if "Allow" in error.headers else None
        return _problem(error.status, error.reason, allow)


def build_app(
    publish: Publish,
    view: CrawlStatusView,
    *,
    urls: UrlQuery | None = None,
    token: SecretStr | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> web.Application:
    """The API as an aiohttp application, served by `streamcrawl.apiserver.ApiServer`; with
    ``urls``, it also answers for the URLs of the state partitions this instance holds."""
    middlewares: list[Middleware] = [json_errors]
    if token is not None:
        middlewares.insert(0, bearer_guard(token))
    app = web.Application(client_max_size=max_body_bytes, middlewares=middlewares)
    control = CrawlControl(publish, view, max_body_bytes)
    document = openapi_document(token_required=token is not None)

    async def openapi(request: web.Request) -> web.Response:
        return web.json_response(document)

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"healthy": True})

    app.router.add_post("/v1/crawl/start", control.start)
    app.router.add_get("/v1/crawl/{crawl_id}", control.status)
    app.router.add_get("/v1/crawls", control.listing)
    app.router.add_post("/v1/crawl/{crawl_id}/{action:pause|resume|cancel}", control.command)
    app.router.add_get("/v1/crawl/{crawl_id}/url", partial(url_status, urls))
    app.router.add_get("/v1/openapi.json", openapi)
    app.router.add_get("/healthz", health)
    return app


# ----- the OpenAPI document --------------------------------------------------------------------

_REF = "#/components/schemas/{model}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


def _json_body(schema: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(schema)}}}


def _errors(description: str) -> dict[str, Any]:
    return _json_body("Errors", description)


def _settings_schema(request_schema: Mapping[str, Any]) -> dict[str, Any]:
    """Every accepted name with the schema of the CrawlRequest field it sets."""
    properties = request_schema["properties"]
    content_types = {
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
        "description": "media types (type/subtype, type/*) or the aliases "
        + ", ".join(CONTENT_TYPE_ALIASES),
    }
    settings: dict[str, Any] = {}
    for name, field in FIELD_NAMES.items():
        schema = content_types if field == "content_types" else dict(properties[field])
        settings[name] = {**schema, "description": f"sets CrawlRequest.{field}"}
    return settings


def openapi_document(*, token_required: bool) -> dict[str, Any]:
    """An OpenAPI 3.1 document of this API; body schemas derive from the pydantic models."""
    request_schema = CrawlRequest.model_json_schema(ref_template=_REF)
    settings = _settings_schema(request_schema)
    crawl_id = {
        key: value
        for key, value in request_schema["properties"]["crawl_id"].items()
        if key not in ("title", "default")
    }
    schemas: dict[str, Any] = {
        "CrawlRequest": request_schema,
        "CrawlCommand": CrawlCommand.model_json_schema(ref_template=_REF),
        "CrawlSettings": {"type": "object", "properties": settings, "additionalProperties": False},
        "StartCrawl": {
            "type": "object",
            "description": "Seed 004's {seedUrls, config} or CrawlRequest's fields, snake_case or "
            "camelCase, at top level or in config; each setting once.",
            "properties": {**settings, CONFIG: _ref("CrawlSettings")},
            "additionalProperties": False,
        },
        "CrawlSubmitted": {
            "type": "object",
            "properties": {"crawlId": crawl_id, "status": {"const": SUBMITTED}},
            "required": ["crawlId", "status"],
        },
        "Crawl": {
            "type": "object",
            "properties": {
                "crawlId": crawl_id,
                "status": {"enum": [SUBMITTED, *get_args(CrawlStatus)]},
                "counters": {"type": "object", "additionalProperties": {"type": "integer"}},
            },
            "required": ["crawlId", "status", "counters"],
        },
        "CrawlList": {
            "type": "object",
            "properties": {
                "crawls": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "crawlId": crawl_id,
                            "status": {"enum": list(get_args(CrawlStatus))},
                            "createdAt": {"type": "integer", "description": "epoch ms"},
                            "updatedAt": {"type": "integer", "description": "epoch ms"},
                            "seeds": {"type": "array", "items": {"type": "string"}},
                            "counters": {
                                "type": "object",
                                "additionalProperties": {"type": "integer"},
                            },
                        },
                        "required": [
                            "crawlId",
                            "status",
                            "createdAt",
                            "updatedAt",
                            "seeds",
                            "counters",
                        ],
                    },
                }
            },
            "required": ["crawls"],
        },
        "UrlStatus": UrlStatus.model_json_schema(ref_template=_REF),
        "NotHeldHere": {
            "allOf": [_ref("Errors")],
            "type": "object",
            "properties": {
                "partition": {"type": "integer", "description": "the URL's state partition"}
            },
            "required": ["partition"],
        },
        "CommandSubmitted": {
            "type": "object",
            "properties": {"crawlId": crawl_id, "action": {"enum": list(ACTIONS)}},
            "required": ["crawlId", "action"],
        },
        "Errors": {
            "type": "object",
            "properties": {
                "errors": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "field": {"type": ["string", "null"]},
                            "message": {"type": "string"},
                        },
                        "required": ["field", "message"],
                    },
                }
            },
            "required": ["errors"],
        },
    }
    for name in list(schemas):
        schemas.update(schemas[name].pop("$defs", {}))
    location = {"Location": {"schema": {"type": "string"}, "description": "the crawl's URL"}}
    crawl_param = {"name": "crawlId", "in": "path", "required": True, "schema": crawl_id}
    paths: dict[str, Any] = {
        "/v1/crawl/start": {
            "post": {
                "summary": "Start a crawl: publish a CrawlRequest to seeds",
                "operationId": "startCrawl",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("StartCrawl")}},
                },
                "responses": {
                    "202": {**_json_body("CrawlSubmitted", "published"), "headers": location},
                    "400": _errors("the body does not validate"),
                    "409": _errors("a crawl with this crawlId exists"),
                    "413": _errors(f"the body is over {MAX_BODY_BYTES} bytes"),
                    "415": _errors("the body is not application/json"),
                    "503": _errors("the broker did not take the request"),
                },
            }
        },
        "/v1/crawl/{crawlId}": {
            "get": {
                "summary": "A crawl's status and summed counters",
                "operationId": "getCrawl",
                "parameters": [crawl_param],
                "responses": {
                    "200": _json_body("Crawl", "the crawl"),
                    "404": _errors("no such crawl"),
                },
            }
        },
        "/v1/crawls": {
            "get": {
                "summary": "Every crawl, oldest first, with its seeds, times and counters",
                "operationId": "listCrawls",
                "parameters": [
                    {
                        "name": "status",
                        "in": "query",
                        "required": False,
                        "schema": {"enum": list(get_args(CrawlStatus))},
                    }
                ],
                "responses": {
                    "200": _json_body("CrawlList", "the crawls"),
                    "400": _errors("no such status"),
                },
            }
        },
        **{
            f"/v1/crawl/{{crawlId}}/{action}": {
                "post": {
                    "summary": f"Publish a {action} command for a crawl",
                    "operationId": f"{action}Crawl",
                    "parameters": [crawl_param],
                    "responses": {
                        "202": {**_json_body("CommandSubmitted", "published"), "headers": location},
                        "404": _errors("no such crawl"),
                        "503": _errors("the broker did not take the command"),
                    },
                }
            }
            for action in ACTIONS
        },
        "/v1/crawl/{crawlId}/url": {
            "get": {
                "summary": "One URL of a crawl as the frontier knows it: state, depth, attempts, "
                "latest outcome, validators, recrawl interval, due time, lease",
                "operationId": "getCrawlUrl",
                "parameters": [
                    crawl_param,
                    {"name": "url", "in": "query", "required": True, "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": _json_body("UrlStatus", "the URL (admitted false: never admitted)"),
                    "400": _errors("no URL, or not a crawlable http(s) URL"),
                    "404": _errors("no such crawl"),
                    "421": _json_body(
                        "NotHeldHere", "ask the frontier holding this partition (in members)"
                    ),
                    "503": _errors("this API serves no URL lookups"),
                },
            }
        },
        "/v1/openapi.json": {
            "get": {
                "summary": "This document",
                "operationId": "openapi",
                "responses": {"200": {"description": "OpenAPI 3.1"}},
            }
        },
        "/healthz": {
            "get": {
                "summary": "The API answers",
                "operationId": "health",
                "responses": {"200": {"description": "healthy"}},
            }
        },
    }
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "streamcrawl crawl-control API", "version": "1"},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    if token_required:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
        for operations in paths.values():
            for operation in operations.values():
                operation["responses"]["401"] = _errors("no valid bearer token")
    return document
