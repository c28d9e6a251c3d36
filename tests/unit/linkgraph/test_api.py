"""The graph API's routing on real HTTP servers (127.0.0.1, free ports): answered by the owner of
the key's partition, forwarded by any other instance, never forwarded twice; global views from
the leading ranker, proxied by the others; errors as {"error": ...} with 4xx/5xx."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from linkgraph.api import FORWARDED_HEADER, GraphApi
from linkgraph.exceptions import NotOwnedError, QueryError
from linkgraph.queries import Query
from linkgraph.routing import RANKER_ROLE, Router
from schemas import members
from schemas.base import now_millis
from schemas.partitioning import partition_for_key
from streamcrawl import graph_cli
from streamcrawl.graph_cli import EXPORT_CHUNK_BYTES, call_any

LINKS = "links"


class Owner:
    """A LocalGraph that owns some partitions and answers with who it is."""

    def __init__(self, name: str, partitions: set[int]) -> None:
        self.name = name
        self.partitions = partitions
        self.asked: list[Query] = []

    def open_partitions(self) -> set[int]:
        return set(self.partitions)

    def submit(self, partition: int, query: Query) -> Future[dict[str, Any]]:
        future: Future[dict[str, Any]] = Future()
        self.asked.append(query)
        if partition not in self.partitions:
            future.set_exception(NotOwnedError(partition))
        elif "missing" in query.url:
            future.set_exception(QueryError("unknown URL", 404))
        else:
            future.set_result({"url": query.url, "answered_by": self.name})
        return future


class Ranks:
    def __init__(self, leading: bool) -> None:
        self._leading = leading

    def leading(self) -> bool:
        return self._leading

    def answer(self, view: str, params: Mapping[str, str]) -> dict[str, Any]:
        return {"view": view, "limit": params.get("limit")}

    async def rank_now(self) -> dict[str, Any]:
        return {"ranking": 1}


def member(role: str, instance: str, address: str, partitions: list[int]) -> members.Member:
    return members.Member(
        role=role,
        instance=instance,
        http_address=address,
        api_address=address,
        partitions=[f"{LINKS}:{p}" for p in partitions],
        ready=True,
        updated_at=now_millis(),
        heartbeat_ms=60_000,
    )


@pytest.fixture
async def pair() -> AsyncIterator[tuple[str, str, Owner, Owner]]:
    table: dict[str, members.Member] = {}
    a, b = Owner("a", {0}), Owner("b", {1})
    server_a = TestServer(GraphApi(a, Router(lambda: table, LINKS, 2), Ranks(True)).app())
    server_b = TestServer(GraphApi(b, Router(lambda: table, LINKS, 2), Ranks(False)).app())
    await server_a.start_server()
    await server_b.start_server()
    address_a = f"{server_a.host}:{server_a.port}"
    address_b = f"{server_b.host}:{server_b.port}"
    table["linkgraph/a"] = member("linkgraph", "a", address_a, [0])
    table["linkgraph/b"] = member("linkgraph", "b", address_b, [1])
    table[f"{RANKER_ROLE}/a"] = member(RANKER_ROLE, "a", address_a, [])
    yield address_a, address_b, a, b
    await server_a.close()
    await server_b.close()


def urls_of(partition: int) -> str:
    for n in range(100):
        url = f"https://site.example/p/{n}"
        if partition_for_key(url.encode(), 2) == partition:
            return url
    raise AssertionError("no URL for the partition")


async def get(address: str, path: str, **params: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://{address}{path}", params=params) as answer,
    ):
        return answer.status, await answer.json()


async def test_each_instance_answers_for_keys_the_other_owns(
    pair: tuple[str, str, Owner, Owner],
) -> None:
    address_a, address_b, _, _ = pair
    for partition, owner in ((0, "a"), (1, "b")):
        url = urls_of(partition)
        for address in (address_a, address_b):
            status, answer = await get(address, "/v1/graph/out", url=url)
            assert (status, answer["answered_by"]) == (200, owner)


async def test_urls_are_canonicalised_and_bad_queries_are_400(
    pair: tuple[str, str, Owner, Owner],
) -> None:
    address_a, _, a, _ = pair
    url = urls_of(0)
    status, _ = await get(address_a, "/v1/graph/in", url=url.replace("https", "HTTPS") + "#frag")
    assert status == 200 and a.asked[-1].url == url
    for params in (
        {},
        {"url": "mailto:x@y"},
        {"url": url, "limit": "0"},
        {"url": url, "limit": "x"},
    ):
        status, answer = await get(address_a, "/v1/graph/out", **params)
        assert status == 400 and "error" in answer
    status, answer = await get(address_a, "/v1/graph/out", url=url, link_type="BOGUS")
    assert status == 400
    status, answer = await get(address_a, "/v1/graph/node", url=url + "missing")
    assert (status, answer) == (404, {"error": "unknown URL"})


async def test_a_forwarded_query_is_never_forwarded_again(
    pair: tuple[str, str, Owner, Owner],
) -> None:
    address_a, _, _, b = pair
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"http://{address_a}/v1/graph/out",
            params={"url": urls_of(1)},
            headers={FORWARDED_HEADER: "1"},
        ) as answer,
    ):
        assert answer.status == 503
    assert b.asked == []


async def test_global_views_come_from_the_leading_ranker(
    pair: tuple[str, str, Owner, Owner],
) -> None:
    address_a, address_b, _, _ = pair
    for address in (address_a, address_b):
        status, answer = await get(address, "/v1/graph/top", limit="7")
        assert (status, answer) == (200, {"view": "top", "limit": "7"})
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"http://{address_b}/v1/graph/rank") as answer,
    ):
        assert (answer.status, await answer.json()) == (200, {"ranking": 1})


async def test_no_owner_and_no_ranker_are_503() -> None:
    server = TestServer(GraphApi(Owner("x", set()), Router(dict, LINKS, 2), None).app())
    await server.start_server()
    address = f"{server.host}:{server.port}"
    try:
        status, answer = await get(address, "/v1/graph/out", url="https://a.example/")
        assert status == 503 and "no live linkgraph" in answer["error"]
        status, answer = await get(address, "/v1/graph/orphans")
        assert status == 503 and "ranker" in answer["error"]
        status, _ = await get(address, "/v1/graph/export")
        assert status == 404
    finally:
        await server.close()


async def test_an_export_is_streamed_into_the_file_with_its_rows_in_a_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bigger than a chunk on both sides; its texts hold line breaks, so only the header's row
    count is right (the file's lines are more)."""
    row = 'https://a.example/,https://b.example/,"two\nlines",' + "x" * 200 + "\n"
    asked: list[bool] = []

    def exporter(path: Path, vertices: bool) -> int:
        asked.append(vertices)
        rows = 3 * EXPORT_CHUNK_BYTES // len(row)
        path.write_text("src,dst,anchor_text,context_window\n" + row * rows, encoding="utf-8")
        return rows

    api = GraphApi(Owner("a", {0}), Router(dict, LINKS, 2), None, exporter)
    server = TestServer(api.app())
    await server.start_server()
    address = f"{server.host}:{server.port}"
    try:
        edges, vertices = tmp_path / "edges.csv", tmp_path / "vertices.csv"
        status, rows = await asyncio.to_thread(
            call_any, [address], "/v1/graph/export", {}, into=edges
        )
        written = edges.read_text(encoding="utf-8")
        assert (status, int(rows)) == (200, written.count(row))
        assert written.count("\n") == 2 * int(rows) + 1
        assert len(edges.read_bytes()) > 3 * EXPORT_CHUNK_BYTES - len(row)
        assert await asyncio.to_thread(graph_cli._export, [address], vertices, True) == 0
        assert f"{rows.decode()} vertices written to {vertices}" in capsys.readouterr().out
        assert vertices.read_bytes() == edges.read_bytes() and asked == [False, True]
    finally:
        await server.close()


async def test_an_export_cut_short_fails_and_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    async def cut_short(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_length = 10 * EXPORT_CHUNK_BYTES
        await response.prepare(request)
        await response.write(b"src,dst\n" + b"x" * EXPORT_CHUNK_BYTES)
        assert request.transport is not None
        request.transport.close()
        return response

    app = web.Application()
    app.router.add_get("/v1/graph/export", cut_short)
    server = TestServer(app)
    await server.start_server()
    edges = tmp_path / "edges.csv"
    edges.write_text("an earlier export\n")
    try:
        with pytest.raises(graph_cli.GraphApiError, match="did not answer"):
            await asyncio.to_thread(
                call_any, [f"{server.host}:{server.port}"], "/v1/graph/export", {}, into=edges
            )
    finally:
        await server.close()
    assert edges.read_text() == "an earlier export\n"
    assert list(tmp_path.iterdir()) == [edges]
