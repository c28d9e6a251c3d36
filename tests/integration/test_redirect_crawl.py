"""Redirects through the real services (frontier, fetcher, parser): a crawl follows a chain of
exactly ``max_redirects`` redirects to its end, and one more is a dead URL (too_many_redirects);
a page's meta refresh is a redirect too (`parser.refresh`), followed at the page's depth; and a
crawl keeping cookies gets past a site that sets one and redirects to the same page.

Until session 45 the fetcher's outcome counted the redirect it reported and the frontier counted
it again, so every redirect spent two hops: ``max_redirects=1`` killed every redirect, and the
default of 5 followed chains of two.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from schemas.seeds import CrawlRequest
from tests.support import LocalSite, ServiceProcess, crawl_to_the_end

pytestmark = pytest.mark.kafka

HTML = {"Content-Type": "text/html; charset=utf-8"}


def moved(path: str) -> tuple[int, dict[str, str], bytes]:
    return (301, {"Location": path}, b"")


def page(links: list[str]) -> tuple[int, dict[str, str], bytes]:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return (200, HTML, f"<html><body>{anchors}</body></html>".encode())


@pytest.fixture
def site() -> Iterator[LocalSite]:
    local = LocalSite(
        {
            "/robots.txt": (200, {}, b"User-agent: *\n"),
            "/": page(["/two-1", "/three-1"]),
            "/two-1": moved("/two-2"),
            "/two-2": moved("/two-end"),
            "/two-end": page([]),
            "/three-1": moved("/three-2"),
            "/three-2": moved("/three-3"),
            "/three-3": moved("/three-end"),
            "/three-end": page([]),
        }
    ).start()
    yield local
    local.stop()


def test_a_chain_of_max_redirects_is_followed_and_a_longer_one_is_dead(
    kafka_bootstrap: str, tmp_path: Path, site: LocalSite, started: list[ServiceProcess]
) -> None:
    seeds = [site.url("/"), site.url("/two-1"), site.url("/three-1")]
    request = CrawlRequest(crawl_id="chains", seeds=seeds, max_redirects=2, politeness_delay_ms=0)
    deployment = crawl_to_the_end(kafka_bootstrap, tmp_path, started, request)

    fetched = site.paths()
    assert "/two-end" in fetched, "two redirects are within max_redirects=2"
    assert "/three-3" in fetched and "/three-end" not in fetched, "the third is one too many"
    letters = deployment.cli("deadletters", "--crawl-id=chains", "--json")
    assert letters.returncode == 0, letters.stderr
    dead = [json.loads(line) for line in letters.stdout.splitlines()]
    assert [(letter["url"], letter["error"].split(":")[0]) for letter in dead] == [
        (site.url("/three-3"), "too_many_redirects")
    ]

    report = deployment.cli("log", "chains", "--seeds")
    assert report.returncode == 0, report.stderr
    assert report.stdout.splitlines() == [
        f"      200  {site.url('/')}",
        f"      301  {site.url('/two-1')}  -> {site.url('/two-end')} (200)",
        f"      301  {site.url('/three-1')}  -> {site.url('/three-end')} (not fetched)",
        "3 seeds: 3 fetched",
    ]
    kinds = deployment.cli("log", "chains", "--mimetypes")
    assert kinds.returncode == 0, kinds.stderr
    rows = {row.split()[0]: row.split()[1:] for row in kinds.stdout.splitlines()[1:]}
    assert rows["text/html"][0] == "2" and int(rows["text/html"][1]) > 0  # / and /two-end
    assert rows["-"] == ["5", "0"]  # the redirects: no body


def refreshing(path: str, links: list[str]) -> tuple[int, dict[str, str], bytes]:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    meta = f'<meta http-equiv="refresh" content="0; url={path}">'
    return (200, HTML, f"<html><head>{meta}</head><body>{anchors}</body></html>".encode())


@pytest.fixture
def moved_site() -> Iterator[LocalSite]:
    local = LocalSite(
        {
            "/robots.txt": (200, {}, b"User-agent: *\n"),
            "/": refreshing("/new-home", ["/linked"]),
            "/new-home": refreshing("/", ["/deeper"]),  # back: a loop ends at the seen URL
            "/linked": page([]),
            "/deeper": page([]),
        }
    ).start()
    yield local
    local.stop()


def test_a_meta_refresh_is_followed_at_the_page_depth(
    kafka_bootstrap: str, tmp_path: Path, moved_site: LocalSite, started: list[ServiceProcess]
) -> None:
    request = CrawlRequest(
        crawl_id="moved", seeds=[moved_site.url("/")], max_depth=0, politeness_delay_ms=0
    )
    deployment = crawl_to_the_end(kafka_bootstrap, tmp_path, started, request)

    fetched = moved_site.paths()
    assert fetched.count("/new-home") == 1, "the refresh is a redirect: depth 0 like its page"
    assert fetched.count("/") == 1, "the refresh back to the seed finds it seen"
    assert "/linked" not in fetched and "/deeper" not in fetched, "links are depth 1"
    shown = deployment.cli("url", "moved", moved_site.url("/new-home"), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["depth"] == 0


class CookieCheck(LocalSite):
    """/members answers 302 to itself with a cookie, and its page to a request carrying it."""

    async def _answer(self, request: web.Request) -> web.Response:
        if request.path != "/members" or request.cookies.get("seen") == "1":
            return await super()._answer(request)
        self.requests.append((0.0, request.path_qs))
        response = web.Response(status=302, headers={"Location": request.path})
        response.set_cookie("seen", "1")
        return response


@pytest.fixture
def cookie_site() -> Iterator[LocalSite]:
    local = CookieCheck(
        {
            "/robots.txt": (200, {}, b"User-agent: *\n"),
            "/": page(["/members"]),
            "/members": page(["/members/list"]),
            "/members/list": page([]),
        }
    ).start()
    yield local
    local.stop()


def test_a_crawl_with_cookies_gets_past_a_cookie_check(
    kafka_bootstrap: str, tmp_path: Path, cookie_site: LocalSite, started: list[ServiceProcess]
) -> None:
    request = CrawlRequest(
        crawl_id="cookies", seeds=[cookie_site.url("/")], use_cookies=True, politeness_delay_ms=0
    )
    deployment = crawl_to_the_end(kafka_bootstrap, tmp_path, started, request)
    fetched = cookie_site.paths()
    assert fetched.count("/members") == 2, "the redirect to itself, then the page"
    assert "/members/list" in fetched, "the page behind the check was parsed"
    shown = deployment.cli("url", "cookies", cookie_site.url("/members"), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["state"] == "done"
