"""The link graph's HTTP API (the contract in the helpers' common brief; JSON everywhere).

Per key, answered by the instance owning the URL's partition, any other forwarding there:
  GET /v1/graph/out?url=U[&limit=N&cursor=C&link_type=T&position=P&live=1]
  GET /v1/graph/in?url=U[...same]   GET /v1/graph/anchors?url=U   GET /v1/graph/node?url=U
Global, answered by the ranker's latest result (any instance proxies to the leading ranker):
  GET /v1/graph/top?limit=N[&host=H&crawl_id=C&teleport=seeds|pattern&pattern=RE]
  GET /v1/graph/orphans[?crawl_id=C] | /v1/graph/domains | /v1/graph/farms | /v1/graph/syndication
  GET /v1/graph/important | /v1/graph/ranking (the latest ranking's summary)
  GET /v1/graph/path?url=U[&crawl_id=C] (a shortest click path to U from the seeds)
  POST /v1/graph/rank (rank now, on demand; answers with the summary)
  GET /v1/graph/export[?what=vertices] (CSV edge or vertex list, `linkgraph.export`, streamed,
  its rows in `EXPORT_ROWS_HEADER`; any instance)
Errors are {"error": "..."} with 4xx/5xx. A forwarded request carries `FORWARDED_HEADER`, and an
instance that receives one for a key it does not own answers 503 instead of forwarding again.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from linkgraph.exceptions import QueryError
from linkgraph.queries import AnchorQuery, Direction, EdgeQuery, NodeQuery, Query
from linkgraph.routing import Router
from schemas.canonical import canonical_url
from streamcrawl.graph_cli import EXPORT_CHUNK_BYTES, EXPORT_ROWS_HEADER

FORWARDED_HEADER = "X-Streamcrawl-Forwarded"
QUERY_TIMEOUT_S = 30.0
GLOBAL_VIEWS = (
    "top",
    "orphans",
    "domains",
    "farms",
    "syndication",
    "important",
    "ranking",
    "path",
)


class LocalGraph(Protocol):
    def open_partitions(self) -> set[int]: ...

    def submit(self, partition: int, query: Query) -> Future[dict[str, Any]]: ...


class GlobalAnswers(Protocol):
    """The ranker's side: None from `leading` when another instance ranks."""

    def leading(self) -> bool: ...

    def answer(self, view: str, params: Mapping[str, str]) -> dict[str, Any]: ...

    async def rank_now(self) -> dict[str, Any]: ...


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _int(params: Mapping[str, str], name: str, default: int) -> int:
    raw = params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as error:
        raise QueryError(f"{name} must be an integer") from error


def parse_query(kind: str, params: Mapping[str, str]) -> Query:
    raw_url = params.get("url")
    if not raw_url:
        raise QueryError("url is required")
    url = canonical_url(raw_url)
    if url is None:
        raise QueryError(f"not an http(s) URL: {raw_url}")
    if kind == "anchors":
        return AnchorQuery(url, limit=_int(params, "limit", 1000))
    if kind == "node":
        return NodeQuery(url)
    direction: Direction = "out" if kind == "out" else "in"
    return EdgeQuery(
        direction,
        url,
        limit=_int(params, "limit", 100),
        cursor=params.get("cursor") or None,
        link_type=params.get("link_type") or None,
        position=params.get("position") or None,
        live_only=params.get("live") in ("1", "true"),
    )


Exporter = Callable[[Path, bool], int]
"""Writes the edge (False) or vertex (True) CSV to a path, returns its rows."""


class GraphApi:
    def __init__(
        self,
        local: LocalGraph,
        router: Router,
        ranker: GlobalAnswers | None,
        exporter: Exporter | None = None,
    ) -> None:
        self._local = local
        self._router = router
        self._ranker = ranker
        self._exporter = exporter
        self._session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application()
        for kind in ("out", "in", "anchors", "node"):
            app.router.add_get(f"/v1/graph/{kind}", self._per_key(kind))
        for view in GLOBAL_VIEWS:
            app.router.add_get(f"/v1/graph/{view}", self._global(view))
        app.router.add_post("/v1/graph/rank", self._rank)
        app.router.add_get("/v1/graph/export", self._export)
        app.on_cleanup.append(self._close_session)
        return app

    async def _close_session(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    def _per_key(self, kind: str) -> Any:
        async def handle(request: web.Request) -> web.Response:
            try:
                query = parse_query(kind, request.query)
            except QueryError as error:
                return _error(error.status, str(error))
            partition = self._router.partition_of(query.url)
            if partition in self._local.open_partitions():
                try:
                    answer = await asyncio.wait_for(
                        asyncio.wrap_future(self._local.submit(partition, query)), QUERY_TIMEOUT_S
                    )
                except QueryError as error:
                    if error.status != 503 or FORWARDED_HEADER in request.headers:
                        return _error(error.status, str(error))
                except TimeoutError:
                    return _error(504, f"partition {partition} did not answer in time")
                except Exception as error:  # logged by the handler; the client gets JSON
                    return _error(500, f"query failed: {type(error).__name__}: {error}")
                else:
                    return web.json_response(answer)
            if FORWARDED_HEADER in request.headers:
                return _error(503, f"partition {partition} is not served here")
            owner = self._router.owner_address(partition)
            if owner is None:
                return _error(503, f"no live linkgraph instance owns partition {partition}")
            return await self._forward(request, owner)

        return handle

    def _global(self, view: str) -> Any:
        async def handle(request: web.Request) -> web.Response:
            if self._ranker is not None and self._ranker.leading():
                try:
                    answer = await asyncio.to_thread(self._ranker.answer, view, request.query)
                except QueryError as error:
                    return _error(error.status, str(error))
                return web.json_response(answer)
            return await self._to_ranker(request)

        return handle

    async def _rank(self, request: web.Request) -> web.Response:
        if self._ranker is not None and self._ranker.leading():
            try:
                return web.json_response(await self._ranker.rank_now())
            except QueryError as error:
                return _error(error.status, str(error))
        return await self._to_ranker(request)

    async def _export(self, request: web.Request) -> web.StreamResponse:
        """The export written to a scratch file, then streamed from it a chunk at a time: the
        answer is bounded by disk, as the export is, not by this instance's memory."""
        if self._exporter is None:
            return _error(404, "export is not configured on this instance")
        vertices = request.query.get("what") == "vertices"
        with tempfile.TemporaryDirectory(prefix="linkgraph-api-export-") as scratch:
            path = Path(scratch) / "export.csv"
            rows = await asyncio.to_thread(self._exporter, path, vertices)
            response = web.StreamResponse(headers={EXPORT_ROWS_HEADER: str(rows)})
            response.content_type, response.charset = "text/csv", "utf-8"
            response.content_length = path.stat().st_size
            await response.prepare(request)
            with path.open("rb") as handle:
                while chunk := await asyncio.to_thread(handle.read, EXPORT_CHUNK_BYTES):
                    await response.write(chunk)
            await response.write_eof()
        return response

    async def _to_ranker(self, request: web.Request) -> web.Response:
        if FORWARDED_HEADER in request.headers:
            return _error(503, "this instance does not rank")
        address = self._router.ranker_address()
        if address is None:
            return _error(503, "no ranker is leading yet")
        return await self._forward(request, address)

    async def _forward(self, request: web.Request, address: str) -> web.Response:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        url = f"http://{address}{request.path_qs}"
        try:
            async with self._session.request(
                request.method, url, headers={FORWARDED_HEADER: "1"}
            ) as answer:
                body = await answer.read()
                return web.Response(
                    body=body, status=answer.status, content_type="application/json"
                )
        except (aiohttp.ClientError, TimeoutError) as error:
            return _error(502, f"owner {address} did not answer: {error}")
