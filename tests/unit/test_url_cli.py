"""`streamcrawl url`: how a URL's status reads, whatever state it is in."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from frontier.api import build_app
from frontier.lookup import PartitionNotHeldError, UrlStatus
from schemas.members import Member
from streamcrawl.apiserver import ApiServer
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.url_cli import CrawlNotFoundError, ask_owner, status_lines

NOW_MS = 1_796_000_000_000  # 2026-11-30 00:53:20 UTC


def _lines(**fields: Any) -> list[str]:
    base = {"crawl_id": "c1", "url": "https://a.example/x", "host": "a.example", "partition": 2}
    status = UrlStatus.model_validate({**base, **fields})
    return status_lines(status.model_dump(mode="json"), NOW_MS)


def test_a_url_waiting_for_its_recrawl_says_when_and_how_often() -> None:
    lines = _lines(
        admitted=True,
        state="waiting",
        waiting_for="recrawl",
        depth=1,
        attempts=1,
        last_outcome="304",
        due_ms=NOW_MS + 12 * 60_000 + 3_000,
        recrawl_interval_ms=40 * 60_000,
        etag='"v3"',
        content_hash="ab12" * 16,
    )
    assert lines == [
        "https://a.example/x",
        "crawl: c1  host: a.example  partition: 2",
        "state: waiting for a recrawl, due 2026-11-30 01:05:23 UTC (in 12m 3s)",
        "depth: 1  attempts: 1  last outcome: 304",
        "recrawl interval: 40m",
        'etag: "v3"  sha256: ab12ab12ab12ab12',
    ]


def test_a_leased_url_names_its_lease_and_deadline() -> None:
    lines = _lines(
        admitted=True,
        state="leased",
        depth=0,
        attempts=2,
        lease_id="l-7",
        lease_deadline_ms=NOW_MS + 9 * 60_000,
    )
    assert lines[2] == (
        "state: leased to a fetcher (lease l-7, deadline 2026-11-30 01:02:20 UTC (in 9m))"
    )
    assert lines[3] == "depth: 0  attempts: 2  last outcome: none yet"


def test_a_url_never_admitted_says_why_when_the_scope_knows() -> None:
    refused = _lines(admitted=False, scope="exclude")
    assert refused[2] == (
        "not admitted: the crawl's scope refuses it: it matches the crawl's --exclude pattern"
    )
    trap = _lines(admitted=False, scope="trap_path_segments")
    assert trap[2].endswith("it looks like a crawler trap (trap_path_segments)")
    unseen = _lines(admitted=False)
    assert unseen[2].startswith("not admitted: no page of the crawl has linked it so far")
    purged = _lines(admitted=False, purged=True)
    assert purged[2].startswith("not known: the crawl has finished and this frontier keeps none")


URLS_TOPIC = "t.urls"


class HeldUrls:
    """A frontier's lookups: a.example is in partition 3, every other host in 5; it answers for
    the partition it holds."""

    def __init__(self, held: int) -> None:
        self.held = held

    def status(self, crawl_id: str, url: str) -> UrlStatus | None:
        if crawl_id != "c1":
            return None
        if not url.startswith("http"):
            raise ValueError(f"not a crawlable http(s) URL: {url!r}")
        partition = 3 if "a.example" in url else 5
        if partition != self.held:
            raise PartitionNotHeldError(partition, "is not held here")
        host = url.split("/")[2]
        fields = {"crawl_id": crawl_id, "url": url, "host": host, "partition": partition}
        return UrlStatus(**fields, admitted=True, state="done")


class NoSeeds:
    async def __call__(self, key: str, value: bytes) -> None:
        raise AssertionError("a lookup publishes nothing")


class NoCrawls:
    def status(self, crawl_id: str, /) -> str | None:
        return None

    def counters(self, crawl_id: str, /) -> dict[str, int]:
        return {}

    def crawls(self) -> list[Any]:
        return []


def _member(instance: str, address: str, partitions: list[int]) -> Member:
    return Member(
        role="frontier",
        instance=instance,
        http_address=address,
        api_address=address,
        partitions=[f"{URLS_TOPIC}:{p}" for p in partitions],
        ready=True,
        updated_at=0,
        heartbeat_ms=1000,
    )


@pytest.fixture
def frontiers() -> Iterator[dict[str, Member]]:
    """Two frontier APIs holding partitions 3 and 5, and one that no longer answers."""
    servers = {
        name: ApiServer(build_app(NoSeeds(), NoCrawls(), urls=HeldUrls(held)), "127.0.0.1", 0)
        for name, held in (("f-3", 3), ("f-5", 5))
    }
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead_address = f"127.0.0.1:{closed.getsockname()[1]}"
    members = {"f-0": _member("f-0", dead_address, [0, 1])}
    members.update(
        {name: _member(name, server.start(), [int(name[2:])]) for name, server in servers.items()}
    )
    yield members
    for server in servers.values():
        server.stop()


def test_the_frontier_holding_the_url_answers_whichever_is_asked_first(
    frontiers: dict[str, Member],
) -> None:
    ordered = [frontiers["f-0"], frontiers["f-5"], frontiers["f-3"]]  # f-0 is gone
    status = ask_owner(ordered, URLS_TOPIC, "c1", "https://a.example/x")
    assert (status["partition"], status["state"]) == (3, "done")
    status = ask_owner(ordered, URLS_TOPIC, "c1", "https://b.example/y")
    assert status["partition"] == 5
    with pytest.raises(CrawlNotFoundError, match="no crawl 'c9'"):
        ask_owner(ordered, URLS_TOPIC, "c9", "https://a.example/x")
    with pytest.raises(StreamcrawlError, match=r"no live frontier holds partition 3 of t\.urls"):
        ask_owner([frontiers["f-5"]], URLS_TOPIC, "c1", "https://a.example/x")
    with pytest.raises(StreamcrawlError, match="not a crawlable"):
        ask_owner([frontiers["f-3"]], URLS_TOPIC, "c1", "ftp://a.example/x")
