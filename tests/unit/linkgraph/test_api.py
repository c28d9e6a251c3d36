"""The graph API's routing on real HTTP servers (127.0.0.1, free ports): answered by the owner of
the key's partition, forwarded by any other instance, never forwarded twice; global views from
the leading ranker, proxied by the others; errors as {"error": ...} with 4xx/5xx."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from concurrent.futures import Future
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from linkgraph.api import FORWARDED_HEADER, GraphApi
from linkgraph.exceptions import NotOwnedError, QueryError
from linkgraph.queries import Query
from linkgraph.routing import RANKER_ROLE, Router
from schemas import members
from schemas.base import now_millis
from schemas.partitioning import partition_for_key

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
