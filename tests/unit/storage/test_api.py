"""The page API over a real index partition and storage root: every endpoint and error, and how a
URL held by another instance is routed through `members`."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from schemas.base import now_millis
from schemas.members import Member
from schemas.partitioning import partition_for_key
from storage.api import build_app
from storage.routing import LocalIndex, PageRouter
from streamcrawl.state import PartitionStore
from tests.unit.storage.archive import Archive, make_page

Client = TestClient[web.Request, web.Application]
URL = "https://example.org/a"
OLD = b"<html>first version</html>"
NEW = b"<html>second version</html>"


class OneStore:
    """The service loop's view of its stores: here it holds partition 0 only."""

    def __init__(self, store: PartitionStore) -> None:
        self._store = store

    def store(self, partition: int) -> PartitionStore | None:
        return self._store if partition == 0 else None


class Members:
    def __init__(self, members: list[Member]) -> None:
        self._members = {f"{m.role}/{m.instance}": m for m in members}

    def snapshot(self) -> dict[str, Member]:
        return dict(self._members)


def member(instance: str, partitions: list[str], *, age_ms: int = 0) -> Member:
    return Member(
        role="storage",
        instance=instance,
        http_address="127.0.0.1:1",
        api_address=f"{instance}.test:80",
        partitions=partitions,
        ready=True,
        updated_at=now_millis() - age_ms,
        heartbeat_ms=1000,
    )


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[Archive]:
    built = Archive(tmp_path / "root", tmp_path / "state")
    built.deliver(make_page(URL, OLD, 1_000), OLD)
    built.deliver(make_page(URL, NEW, 2_000), NEW)
    yield built
    built.close()


@pytest.fixture
async def client(archive: Archive) -> AsyncIterator[Client]:
    local = LocalIndex(partitions=1)
    local.attach(OneStore(archive.store))
    app = build_app(PageRouter(local, None, "crawl.pages", "storage-1"), archive.blobs)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def test_latest_metadata_history_and_bodies(client: Client) -> None:
    response = await client.get("/v1/page", params={"url": URL})
    assert response.status == 200
    latest = await response.json()
    assert latest["url"] == URL and latest["fetched_at"] == 2_000
    assert latest["content_hash"] == hashlib.sha256(NEW).hexdigest()
    assert latest["warc_file"].startswith("warc/crawl-1/") and latest["warc_offset"] > 0

    response = await client.get("/v1/page/history", params={"url": URL})
    history = await response.json()
    assert [v["fetched_at"] for v in history["history"]] == [1_000, 2_000]

    response = await client.get("/v1/page/body", params={"url": URL})
    assert response.status == 200 and await response.read() == NEW
    assert response.headers["Content-Type"].startswith("text/html")
    old_hash = hashlib.sha256(OLD).hexdigest()
    response = await client.get("/v1/page/body", params={"url": URL, "content_hash": old_hash})
    assert await response.read() == OLD


async def test_errors_are_json_with_their_status(client: Client) -> None:
    cases = [
        ("/v1/page", {}, 400),
        ("/v1/page", {"url": "https://example.org/unknown"}, 404),
        ("/v1/page/body", {"url": URL, "content_hash": "XYZ"}, 400),
        ("/v1/page/body", {"url": URL, "content_hash": "0" * 64}, 404),
        ("/v1/nothing", {}, 404),
    ]
    for path, params, status in cases:
        response = await client.get(path, params=params)
        assert response.status == status, (path, params)
        assert "error" in await response.json()


async def test_a_missing_blob_is_a_server_error(client: Client, archive: Archive) -> None:
    (archive.root / archive.history(URL).latest.blob).unlink()  # type: ignore[union-attr]
    response = await client.get("/v1/page/body", params={"url": URL})
    assert response.status == 500 and "missing" in (await response.json())["error"]


async def test_warc_listing(client: Client) -> None:
    response = await client.get("/v1/storage/warcs", params={"crawl_id": "crawl-1"})
    listing = await response.json()
    assert len(listing["files"]) == 1
    [entry] = listing["files"]
    assert entry["crawl"] == "crawl-1" and entry["open"] is True and entry["bytes"] > 0
    response = await client.get("/v1/storage/warcs", params={"crawl_id": "other"})
    assert (await response.json())["files"] == []


async def test_a_url_of_a_partition_nobody_holds_answers_503(archive: Archive) -> None:
    local = LocalIndex(partitions=2)
    local.attach(OneStore(archive.store))
    elsewhere = next(
        f"https://example.org/{i}"
        for i in range(100)
        if partition_for_key(f"https://example.org/{i}".encode(), 2) == 1
    )
    app = build_app(PageRouter(local, Members([]), "crawl.pages", "storage-1"), archive.blobs)
    async with TestClient(TestServer(app)) as test_client:
        response = await test_client.get("/v1/page", params={"url": elsewhere})
        assert response.status == 503
        assert "partition 1" in (await response.json())["error"]
        forwarded = await test_client.get(
            "/v1/page", params={"url": elsewhere}, headers={"X-Streamcrawl-Forwarded": "1"}
        )
        assert forwarded.status == 503


def test_the_owner_is_a_live_member_holding_the_partition_other_than_this_one() -> None:
    table = Members(
        [
            member("storage-1", ["crawl.pages:0", "crawl.pages:1"]),
            member("storage-2", ["crawl.pages:1"], age_ms=60_000),  # stale: died
            member("storage-3", ["crawl.pages:1"]),
            member("storage-4", ["other.pages:2"]),
        ]
    )
    router = PageRouter(LocalIndex(partitions=3), table, "crawl.pages", "storage-1")
    assert router.owner_address(1) == "storage-3.test:80"
    assert router.owner_address(0) is None  # only this instance lists it
    assert router.owner_address(2) is None
