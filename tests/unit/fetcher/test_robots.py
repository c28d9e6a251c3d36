"""robots.txt: statuses, redirects, size cap, TTLs, Crawl-delay, Sitemap, Google's spec cases."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from fetcher.http import FetchLimits
from fetcher.results import FetchResult, FetchTarget
from fetcher.robots import RobotsCache, RobotsSettings, robots_origin
from streamcrawl.clock import FakeClock
from tests.unit.fetcher.conftest import FAST_LIMITS, STRICT, Sessions
from tests.unit.fetcher.servers import app_server

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
SETTINGS = RobotsSettings(user_agent_token="testbot", timeout_s=2.0)


def _app(robots: Handler, hits: list[str]) -> web.Application:
    async def counted(request: web.Request) -> web.StreamResponse:
        hits.append(request.path)
        return await robots(request)

    app = web.Application()
    app.router.add_get("/{tail:.*}", counted)
    return app


async def _cache(
    sessions: Sessions,
    clock: FakeClock,
    settings: RobotsSettings = SETTINGS,
    limits: FetchLimits = FAST_LIMITS,
) -> RobotsCache:
    session = await sessions.open(limits=limits)
    return RobotsCache.from_session(settings, session, limits, clock)


def _text(body: str, status: int = 200) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=body, status=status, content_type="text/plain")

    return handler


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 410, 418, 451, 499])
async def test_unavailable_allows_everything(
    status: int, sessions: Sessions, clock: FakeClock
) -> None:
    """RFC 9309 2.3.1.3: any 4xx (429 aside, below) means no robots.txt, and the crawler may
    access any resource; 401 and 403 included, as Google documents."""
    hits: list[str] = []
    async with app_server(_app(_text("no robots.txt here", status=status), hits)) as server:
        cache = await _cache(sessions, clock)
        rules = await cache.rules_for(server.url("/any/page"))
    assert (rules.verdict, rules.reason, rules.status) == ("allow_all", f"http {status}", status)
    assert rules.allows(server.url("/private"))
    assert rules.expires_at == clock.monotonic() + SETTINGS.ttl_s
    assert hits == ["/robots.txt"]


@pytest.mark.parametrize("status", [500, 503, 429])
async def test_server_error_disallows_everything_and_is_asked_again_sooner(
    status: int, sessions: Sessions, clock: FakeClock
) -> None:
    answers = [(status, ""), (200, "User-agent: *\nDisallow: /private\n")]
    hits: list[str] = []

    async def flaky(request: web.Request) -> web.StreamResponse:
        code, body = answers[min(len(hits), len(answers)) - 1]
        return web.Response(text=body, status=code)

    async with app_server(_app(flaky, hits)) as server:
        cache = await _cache(sessions, clock)
        url = server.url("/page")
        first = await cache.rules_for(url)
        assert (first.verdict, first.allows(url)) == ("disallow_all", False)
        clock.advance(SETTINGS.error_ttl_s - 1)
        assert cache.cached(url) is first
        clock.advance(1)
        assert cache.cached(url) is None
        second = await cache.rules_for(url)
    assert second.verdict == "parsed"
    assert second.allows(url) and not second.allows(server.url("/private/x"))
    assert len(hits) == 2


async def test_timeout_disallows_everything(sessions: Sessions, clock: FakeClock) -> None:
    async def stall(request: web.Request) -> web.StreamResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    settings = SETTINGS.model_copy(update={"timeout_s": 0.2})
    async with app_server(_app(stall, [])) as server:
        cache = await _cache(sessions, clock, settings)
        rules = await cache.rules_for(server.url("/"))
    assert (rules.verdict, rules.status) == ("disallow_all", None)
    assert rules.reason.startswith("timeout")
    assert rules.expires_at == clock.monotonic() + settings.error_ttl_s


async def test_refused_address_disallows_everything(clock: FakeClock, sessions: Sessions) -> None:
    session = await sessions.open(policy=STRICT)
    cache = RobotsCache.from_session(SETTINGS, session, FAST_LIMITS, clock)
    rules = await cache.rules_for("http://127.0.0.1:9/page")
    assert rules.verdict == "disallow_all"
    assert rules.reason.startswith("blocked_address")


def _redirect_chain(length: int) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        step = 0 if request.path == "/robots.txt" else int(request.path.removeprefix("/hop"))
        if step < length:
            raise web.HTTPFound(f"/hop{step + 1}")
        return web.Response(text="User-agent: *\nDisallow: /secret\n")

    return handler


async def test_five_redirects_are_followed(sessions: Sessions, clock: FakeClock) -> None:
    hits: list[str] = []
    async with app_server(_app(_redirect_chain(5), hits)) as server:
        cache = await _cache(sessions, clock)
        rules = await cache.rules_for(server.url("/"))
    assert rules.verdict == "parsed"
    assert not rules.allows(server.url("/secret"))
    assert len(hits) == 6


async def test_more_than_five_redirects_count_as_not_found(
    sessions: Sessions, clock: FakeClock
) -> None:
    hits: list[str] = []
    async with app_server(_app(_redirect_chain(6), hits)) as server:
        cache = await _cache(sessions, clock)
        rules = await cache.rules_for(server.url("/"))
    assert rules.verdict == "allow_all"
    assert rules.allows(server.url("/secret"))
    assert hits == ["/robots.txt", "/hop1", "/hop2", "/hop3", "/hop4", "/hop5"]


async def test_only_the_first_500_kib_are_parsed(sessions: Sessions, clock: FakeClock) -> None:
    head = "User-agent: *\nDisallow: /early\n"
    filler = "# padding\n" * ((SETTINGS.max_bytes - len(head)) // 10 - 1)
    prefix = head + filler
    cut_line = "Disallow: /p" + "x" * 100 + "\n"
    straddle = SETTINGS.max_bytes - len(prefix) - len("Disallow: /p")
    body = prefix + " " * straddle + cut_line + "Disallow: /late\n" * 1000
    assert len(body) > SETTINGS.max_bytes
    async with app_server(_app(_text(body), [])) as server:
        cache = await _cache(sessions, clock)
        rules = await cache.rules_for(server.url("/"))
    assert rules.verdict == "parsed"
    assert not rules.allows(server.url("/early/page"))
    assert rules.allows(server.url("/late/page"))
    assert rules.allows(server.url("/pz"))


async def test_crawl_delay_and_sitemaps(sessions: Sessions, clock: FakeClock) -> None:
    body = (
        "User-agent: *\nCrawl-delay: 1\n\n"
        "User-agent: testbot\nCrawl-delay: 120\nDisallow: /x\n\n"
        "Sitemap: https://cdn.example.com/sitemap.xml\n"
        "Sitemap: /local-sitemap.xml\n"
        "Sitemap: javascript:alert(1)\n"
    )
    async with app_server(_app(_text(body), [])) as server:
        cache = await _cache(sessions, clock)
        rules = await cache.rules_for(server.url("/"))
    assert rules.crawl_delay_s == 60.0
    assert rules.sitemaps == (
        "https://cdn.example.com/sitemap.xml",
        server.url("/local-sitemap.xml"),
    )


async def test_fractional_crawl_delay_for_the_wildcard_group(
    sessions: Sessions, clock: FakeClock
) -> None:
    async with app_server(_app(_text("User-agent: *\nCrawl-delay: 2.5\n"), [])) as server:
        cache = await _cache(sessions, clock)
        rules = await cache.rules_for(server.url("/"))
    assert rules.crawl_delay_s == 2.5


async def test_fetched_once_per_origin_until_it_expires(
    sessions: Sessions, clock: FakeClock
) -> None:
    hits: list[str] = []
    arrived, gate = asyncio.Event(), asyncio.Event()

    async def gated(request: web.Request) -> web.StreamResponse:
        arrived.set()
        await gate.wait()
        return web.Response(text="User-agent: *\nDisallow: /no\n")

    async with app_server(_app(gated, hits)) as server:
        cache = await _cache(sessions, clock)
        waiters = [
            asyncio.ensure_future(cache.rules_for(server.url(f"/page{i}"))) for i in range(10)
        ]
        await arrived.wait()
        gate.set()
        results = await asyncio.gather(*waiters)
        again = await cache.rules_for(server.url("/other"))
        clock.advance(SETTINGS.ttl_s)
        refreshed = await cache.rules_for(server.url("/other"))
    assert all(rules is results[0] for rules in results)
    assert again is results[0]
    assert refreshed is not results[0]
    assert hits == ["/robots.txt", "/robots.txt"]


def test_origin_keys() -> None:
    assert robots_origin("HTTP://Example.COM:80/a?b#c") == "http://example.com"
    assert robots_origin("https://example.com:8443/x") == "https://example.com:8443"
    assert robots_origin("ftp://example.com/") is None


GOOGLE_CASES = [
    # Groups: rules outside a group are ignored; a user agent's groups are merged.
    (
        "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\n"
        "disallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\n"
        "allow: /z/\ndisallow: /\n",
        [
            ("FooBot", "/x/b", True),
            ("FooBot", "/z/d", True),
            ("FooBot", "/y/c", False),
            ("BarBot", "/y/c", True),
            ("BarBot", "/w/a", True),
            ("BarBot", "/z/d", False),
            ("BazBot", "/z/d", True),
            ("FooBot", "/foo/bar/", False),
            ("BazBot", "/foo/bar/", False),
        ],
    ),
    # Line names are case-insensitive.
    (
        "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
        [("FooBot", "/x/y", True), ("FooBot", "/a/b", False)],
    ),
    # User-agent values are case-insensitive.
    (
        "User-Agent: FOO\nAllow: /x/\nDisallow: /\n",
        [("foo", "/x/y", True), ("foo", "/a/b", False)],
    ),
    # A specific group wins over "*"; no matching group and no "*" means allowed.
    (
        "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n",
        [("FooBot", "/x/y", False), ("BarBot", "/x/y", True)],
    ),
    ("user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\n", [("QuxBot", "/x", True)]),
    # Paths are case-sensitive.
    ("user-agent: FooBot\ndisallow: /X/\n", [("FooBot", "/x/y", True)]),
    # The longest match wins; on a tie, allow wins.
    (
        "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
        [("FooBot", "/x/page.html", True), ("FooBot", "/x/", False)],
    ),
    ("user-agent: FooBot\ndisallow: /\nallow: /\n", [("FooBot", "/x/page.html", True)]),
    (
        "user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
        [("FooBot", "/x", False), ("FooBot", "/x/", True)],
    ),
    (
        "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
        [("FooBot", "/page.html", False), ("FooBot", "/page", True)],
    ),
    # Non-ASCII rules match the percent-encoded URL.
    (
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/\u30c4\n",
        [("FooBot", "/foo/bar/%E3%83%84", True)],
    ),
    # "*" matches any sequence, "$" anchors the end.
    (
        "User-agent: FooBot\nDisallow: /foo/bar$\nDisallow: /*/private\n",
        [
            ("FooBot", "/foo/bar", False),
            ("FooBot", "/foo/bar/qux", True),
            ("FooBot", "/a/b/private/x", False),
        ],
    ),
    # An empty robots.txt allows everything.
    ("", [("FooBot", "/anything", True)]),
    # A UTF-8 byte order mark does not hide the first line (Protego reads it as part of the
    # line's name: this fetcher drops it).
    pytest.param("\ufeffUser-agent: FooBot\nDisallow: /\n", [("FooBot", "/x", False)], id="bom"),
    # Lines without a colon, and common misspellings, are read as what they mean.
    pytest.param("user-agent FooBot\ndisallow /\n", [("FooBot", "/x/y", False)], id="no-colon"),
    pytest.param(
        "useragent: FooBot\ndissallow: /a\ndisalow: /b\n",
        [("FooBot", "/a", False), ("FooBot", "/b", False), ("FooBot", "/c", True)],
        id="typos",
    ),
    # Other lines inside a group (Crawl-delay, Sitemap, unknown ones) do not end it.
    pytest.param(
        "user-agent: FooBot\ncrawl-delay: 5\ndisallow: /a\nsitemap: https://foo.bar/s.xml\n"
        "noindex: /x\ndisallow: /b\nuser-agent: BarBot\ndisallow: /c\n",
        [
            ("FooBot", "/a", False),
            ("FooBot", "/b", False),
            ("FooBot", "/c", True),
            ("BarBot", "/b", True),
            ("BarBot", "/c", False),
        ],
        id="other-lines-in-a-group",
    ),
    pytest.param(
        "Sitemap: https://foo.bar/sitemap.xml\nUser-agent: FooBot\nDisallow: /x\n",
        [("FooBot", "/x", False), ("FooBot", "/y", True)],
        id="sitemap-before-any-group",
    ),
    # Line endings: CR LF and a lone CR, blank lines inside a group; comments end a line.
    pytest.param(
        "User-Agent: foo\r\nAllow: /some/path\r\nUser-Agent: bar\r\n\r\n\r\nDisallow: /\r\n",
        [("foo", "/some/path/", True), ("bar", "/some/path/", False)],
        id="crlf",
    ),
    pytest.param(
        "User-Agent: foo\rAllow: /some/path\rUser-Agent: bar\r\r\rDisallow: /\r",
        [("foo", "/some/path/", True), ("bar", "/some/path/", False)],
        id="cr",
    ),
    pytest.param(
        "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
        [("FooBot", "/foo/bar", True), ("FooBot", "/foo/quz", False)],
        id="comments",
    ),
    # "$" anchors the end: "/" alone, or a file type without a query after it.
    pytest.param(
        "user-agent: FooBot\nallow: /$\ndisallow: /\n",
        [("FooBot", "/", True), ("FooBot", "/page.html", False)],
        id="end-anchor-root",
    ),
    pytest.param(
        "user-agent: FooBot\ndisallow: /*.php$\n",
        [("FooBot", "/a.php", False), ("FooBot", "/a.php?x=1", True), ("FooBot", "/a.php5", True)],
        id="end-anchor-type",
    ),
    # An allowed index.html allows its directory too.
    pytest.param(
        "User-agent: FooBot\nAllow: /allowed-slash/index.html\nDisallow: /\n",
        [
            ("FooBot", "/allowed-slash/", True),
            ("FooBot", "/allowed-slash/index.html", True),
            ("FooBot", "/allowed-slash/index.htm", False),
            ("FooBot", "/other", False),
        ],
        id="index-html-is-its-directory",
    ),
    # Percent-encoding: an encoded unreserved character equals the character, hex case does not
    # matter, raw UTF-8 equals its encoding, and a query's "?" and "&" match literally.
    pytest.param(
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\nAllow: /caf%c3%a9/\n"
        "Allow: /\u30c4/\nAllow: /search?q=a&b=http://foo.bar?c\n",
        [
            ("FooBot", "/foo/bar/baz", True),
            ("FooBot", "/foo/bar/%62%61%7A", True),
            ("FooBot", "/caf%C3%A9/menu", True),
            ("FooBot", "/caf\u00e9/menu", True),
            ("FooBot", "/%E3%83%84/x", True),
            ("FooBot", "/search?q=a&b=http://foo.bar?c", True),
            ("FooBot", "/other", False),
        ],
        id="percent-encoding",
    ),
    # Longest match, whichever comes first; a longer disallow beats a shorter allow.
    pytest.param(
        "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
        [("FooBot", "/x/page.html", True), ("FooBot", "/x/y.html", False)],
        id="longest-allow",
    ),
    pytest.param(
        "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n",
        [("FooBot", "/x/page.html", False), ("FooBot", "/x/other", True)],
        id="longest-disallow",
    ),
    pytest.param(
        "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n",
        [("FooBot", "/page.htm", False), ("FooBot", "/page", True)],
        id="longest-with-wildcard",
    ),
    pytest.param(
        "user-agent: FooBot\ndisallow: /folder\nallow: /folder\n",
        [("FooBot", "/folder/page", True)],
        id="tie-allow-wins",
    ),
    # User-agent lines match our product token case-insensitively, as a whole token: a longer
    # token (testbot-news, testbotx) names another crawler, whose group is not ours.
    pytest.param(
        "User-agent: *\nDisallow: /\n\nUser-agent: TESTBOT-news\nAllow: /\n\n"
        "User-agent: tEsTbOt\nAllow: /x/\nDisallow: /\n",
        [
            ("testbot", "/x/y", True),
            ("testbot", "/y", False),
            ("TestBot", "/x/y", True),
            ("testbot-news", "/y", True),
            ("otherbot", "/x/y", False),
        ],
        id="product-token",
    ),
    pytest.param(
        "User-agent: testbotx\nDisallow: /\n", [("testbot", "/x", True)], id="longer-token"
    ),
    pytest.param(
        "User-agent: a-bot\nUser-agent: testbot\nDisallow: /both\nUser-agent: *\nDisallow: /rest\n",
        [
            ("testbot", "/both", False),
            ("testbot", "/rest", True),
            ("a-bot", "/both", False),
            ("zbot", "/both", True),
            ("zbot", "/rest", False),
        ],
        id="one-group-for-several-agents",
    ),
]


@pytest.mark.parametrize(("robots_txt", "checks"), GOOGLE_CASES)
async def test_google_spec_cases(
    robots_txt: str, checks: list[tuple[str, str, bool]], clock: FakeClock
) -> None:
    async def serve(target: FetchTarget) -> FetchResult:
        return FetchResult(
            url=target.url,
            kind="done",
            status=200,
            fetched_at_ms=clock.now_ms(),
            elapsed_s=0.0,
            body=robots_txt.encode(),
            sha256="0" * 64,
        )

    for agent, path, allowed in checks:
        settings = SETTINGS.model_copy(update={"user_agent_token": agent})
        rules = await RobotsCache(settings, serve, clock).rules_for("http://foo.bar/")
        assert rules.allows(f"http://foo.bar{path}") is allowed, (agent, path)
