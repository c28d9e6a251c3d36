"""The crawl-control API of a real frontier process, with the fetcher and parser processes, through
the session's broker, against a small site served locally.

A seed-004-style request (``seedUrls`` plus ``config``) posted to the frontier's API port runs to
done, its counters say every reachable page was fetched, and pause and cancel answer 202 (cancel
then shows in the status). Seed 004's ``recrawlIntervalHours`` is left out: a crawl that recrawls
runs until cancelled, so it would never be done.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schemas.registry import ALL_TOPICS
from streamcrawl.broker import free_port
from tests.support import Deployment, LocalSite, ServiceProcess

pytestmark = pytest.mark.kafka

TOKEN = "integration-token"
LINKS = {
    "/": ["/a", "/b"],
    "/a": ["/a/1", "/"],
    "/b": ["/b/1", "/a"],
    "/a/1": [],
    "/b/1": ["/"],
    "/orphan": ["/"],
}
REACHABLE = {"/", "/a", "/b", "/a/1", "/b/1"}
"""Everything linked from the seed; /orphan is served but linked from nowhere."""
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def html(path: str) -> bytes:
    anchors = "".join(f'<a href="{target}">{target}</a>' for target in LINKS[path])
    return f"<html><body><h1>{path}</h1>{anchors}</body></html>".encode()


@pytest.fixture
def site() -> Iterator[LocalSite]:
    routes = {p: (200, {"Content-Type": "text/html; charset=utf-8"}, html(p)) for p in LINKS}
    local = LocalSite(routes).start()
    yield local
    local.stop()


class Api:
    """A small HTTP client for the frontier's API; the token is sent unless told otherwise."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def call(
        self, method: str, path: str, body: Any = None, token: str | None = TOKEN
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base + path, data, headers, method=method)
        try:
            with _DIRECT.open(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def answers(self) -> bool:
        try:
            return self.call("GET", "/healthz")[0] == 200
        except (urllib.error.URLError, ConnectionError):
            return False


def wait_until(condition: Any, timeout_s: float, describe: str, stack: list[ServiceProcess]) -> Any:
    """Poll until `condition()` returns something truthy; on timeout show the services' logs."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        dead = [p.module for p in stack if not p.running]
        if dead or time.monotonic() > deadline:
            for process in stack:
                print(process.module, process.log_tail(20))
            raise TimeoutError(f"{describe}: not within {timeout_s}s (exited: {dead})")
        time.sleep(0.1)


def test_a_seed_004_request_through_the_api_runs_to_done(
    kafka_bootstrap: str, tmp_path: Path, site: LocalSite, started: list[ServiceProcess]
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path)
    deployment.create(ALL_TOPICS)
    port = free_port()
    api_env = {
        "STREAMCRAWL_FRONTIER__API_PORT": str(port),
        "STREAMCRAWL_FRONTIER__API_TOKEN": TOKEN,
    }
    started.extend(deployment.start_crawler(deployment.root / "logs", frontier=api_env))
    api = Api(port)
    wait_until(api.answers, 90, "the frontier's API answering", started)

    assert api.call("GET", "/v1/crawl/nobody")[0] == 404
    assert api.call("POST", "/v1/crawl/nobody/pause")[0] == 404
    payload = {
        "seedUrls": [site.url("/")],
        "config": {
            "maxDepth": -1,
            "politenessDelay": 200,
            "maxRetries": 3,
            "contentType": "html",
            "domainWhitelist": ["127.0.0.1"],
        },
    }
    assert api.call("POST", "/v1/crawl/start", payload, token=None)[0] == 401
    status, accepted = api.call("POST", "/v1/crawl/start", payload)
    assert status == 202, accepted
    crawl_id = accepted["crawlId"]
    status, first = api.call("GET", f"/v1/crawl/{crawl_id}")
    assert status == 200
    assert first["status"] in ("submitted", "active", "done")

    def crawl_in(wanted: str) -> dict[str, Any] | None:
        status, body = api.call("GET", f"/v1/crawl/{crawl_id}")
        assert status == 200, body
        return body if body["status"] == wanted else None

    done = wait_until(lambda: crawl_in("done"), 120, "the crawl done", started)
    fetched_paths = {path for path in site.paths() if path != "/robots.txt"}
    assert fetched_paths == REACHABLE
    assert done["counters"]["fetched"] == len(REACHABLE)
    assert done["counters"]["queued"] == 0
    assert done["counters"]["leased"] == 0
    status, listing = api.call("GET", "/v1/crawls?status=done")
    assert status == 200
    assert [(c["crawlId"], c["counters"]["fetched"]) for c in listing["crawls"]] == [
        (crawl_id, len(REACHABLE))
    ]

    assert api.call("POST", f"/v1/crawl/{crawl_id}/pause")[0] == 202
    assert api.call("POST", f"/v1/crawl/{crawl_id}/cancel")[0] == 202
    wait_until(lambda: crawl_in("cancelled"), 60, "the crawl cancelled", started)
