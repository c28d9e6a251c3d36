"""A crawl's cookies (`fetcher.cookies`): kept per crawl and host with RFC 6265's rules, bounded,
and sent by `fetcher.http.fetch` only for crawls that ask for them."""

from __future__ import annotations

from http.cookies import SimpleCookie

from aiohttp import web
from yarl import URL

from fetcher.cookies import MAX_COOKIE_BYTES, MAX_COOKIES, CookieJars
from fetcher.http import fetch
from fetcher.results import FetchTarget
from streamcrawl.clock import FakeClock
from tests.unit.fetcher.conftest import FAST_LIMITS, Sessions
from tests.unit.fetcher.servers import app_server

SITE = URL("http://shop.example/cart")


def set_cookies(*headers: str) -> SimpleCookie:
    cookies = SimpleCookie()
    for header in headers:
        cookies.load(header)
    return cookies


async def test_a_jar_sends_back_what_a_host_set_by_its_rules() -> None:
    jars = CookieJars()
    assert jars.header_for("c1", SITE) is None
    jars.remember("c1", SITE, set_cookies("sid=abc; Path=/", "lang=de; Path=/cart"))
    assert jars.header_for("c1", SITE) == "sid=abc; lang=de"
    assert jars.header_for("c1", URL("http://shop.example/help")) == "sid=abc"  # path
    assert jars.header_for("c2", SITE) is None  # crawls never share
    assert jars.header_for("c1", URL("http://other.example/cart")) is None  # nor hosts
    jars.remember("c1", SITE, set_cookies("sid=gone; Max-Age=0; Path=/"))
    assert jars.header_for("c1", SITE) == "lang=de"  # Max-Age=0 deletes
    secure = URL("https://bank.example/")
    jars.remember("c1", secure, set_cookies("token=t; Secure"))
    assert jars.header_for("c1", secure) == "token=t"
    assert jars.header_for("c1", URL("http://bank.example/")) is None  # Secure: https only


async def test_jars_are_bounded_in_number_size_and_cookies() -> None:
    jars = CookieJars(max_jars=2)
    for host in ("a", "b", "c"):
        jars.remember("c1", URL(f"http://{host}.example/"), set_cookies("k=v"))
    assert len(jars) == 2
    assert jars.header_for("c1", URL("http://a.example/")) is None  # the oldest went

    many = set_cookies(*(f"n{index}=v" for index in range(MAX_COOKIES + 10)))
    jars.remember("c1", SITE, many)
    header = jars.header_for("c1", SITE)
    assert header is not None and header.count("=") == MAX_COOKIES
    jars.remember("c1", SITE, set_cookies("n0=changed"))  # a known name is still updated
    assert "n0=changed" in (jars.header_for("c1", SITE) or "")

    huge = set_cookies(f"big={'x' * MAX_COOKIE_BYTES}")
    jars.remember("c2", SITE, huge)
    assert jars.header_for("c2", SITE) is None


def cookie_check() -> web.Application:
    """/page answers 302 to itself with a cookie, then 200 to a request carrying it."""

    async def page(request: web.Request) -> web.Response:
        if request.cookies.get("checked") != "yes":
            response = web.Response(status=302, headers={"Location": str(request.url)})
            response.set_cookie("checked", "yes", path="/")
            return response
        return web.Response(text=f"cookie header: {request.headers['Cookie']}")

    app = web.Application()
    app.router.add_get("/page", page)
    return app


async def test_a_crawl_with_cookies_gets_past_a_cookie_check(
    sessions: Sessions, clock: FakeClock
) -> None:
    session = await sessions.open()
    async with app_server(cookie_check()) as server:
        url = server.url("/page")
        headers = {"Cookie": "consent=1"}
        first = await fetch(session, FetchTarget(url, cookie_jar="c1"), FAST_LIMITS, clock)
        assert (first.kind, first.redirect_to) == ("redirect", url)
        again = FetchTarget(url, cookie_jar="c1", headers=headers)
        second = await fetch(session, again, FAST_LIMITS, clock)
        assert (second.kind, bytes(second.body)) == (
            "done",
            b"cookie header: consent=1; checked=yes",
        )
        plain = await fetch(session, FetchTarget(url), FAST_LIMITS, clock)
        assert plain.kind == "redirect", "a crawl without cookies sends none"
        other = await fetch(session, FetchTarget(url, cookie_jar="c2"), FAST_LIMITS, clock)
        assert other.kind == "redirect", "nor another crawl's"
