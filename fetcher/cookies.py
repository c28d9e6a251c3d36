"""The cookies a crawl's fetches keep, per crawl and host, as a browser keeps them.

A crawl with ``use_cookies`` (`schemas.seeds.CrawlRequest`) sends back what a site set, as
Scrapy's CookiesMiddleware and Heritrix's cookie store do: a site that sets a cookie and redirects
to the same URL (a cookie check, a consent wall, a session) then serves the page on the next fetch
(the frontier fetches a URL again after a redirect to itself, `frontier.outcomes`).

Each (crawl, host) has its own jar, aiohttp's `CookieJar`, which applies RFC 6265's rules:
Domain and Path matching, expiry (``Max-Age=0`` deletes), Secure cookies only over https. A host
is fetched by the fetcher owning its partition, so its jar is where its fetches are; a cookie set
for a parent domain is not shared with sibling hosts, and jars do not outlive the process (a
rebalance or a restart starts them empty, as a new browser session would). robots.txt fetches
carry none. Crawls never share cookies.

Memory is bounded: at most ``max_jars`` jars (the least recently used goes first), each holding at
most :data:`MAX_COOKIES` cookies (RFC 6265 section 6.1's minimum a browser should keep; further
new names are ignored) of at most :data:`MAX_COOKIE_BYTES` (name and value) each.
"""

from __future__ import annotations

from collections import OrderedDict
from http.cookies import BaseCookie, SimpleCookie

import aiohttp
from yarl import URL

MAX_COOKIES = 50
MAX_COOKIE_BYTES = 4096
DEFAULT_MAX_JARS = 10_000


class CookieJars:
    """Every crawl's jars of this fetcher; one instance per process (inside its event loop)."""

    def __init__(self, max_jars: int = DEFAULT_MAX_JARS) -> None:
        self.max_jars = max_jars
        self._jars: OrderedDict[tuple[str, str], aiohttp.CookieJar] = OrderedDict()

    def __len__(self) -> int:
        return len(self._jars)

    def header_for(self, crawl_id: str, url: URL) -> str | None:
        """The Cookie header a request of ``crawl_id`` to ``url`` carries; None when no cookie
        applies."""
        key = (crawl_id, url.host_port_subcomponent or "")
        jar = self._jars.get(key)
        if jar is None:
            return None
        self._jars.move_to_end(key)
        cookies = jar.filter_cookies(url)
        if not cookies:
            return None
        return "; ".join(f"{morsel.key}={morsel.coded_value}" for morsel in cookies.values())

    def remember(self, crawl_id: str, url: URL, set_cookies: BaseCookie[str]) -> None:
        """Keep what a response to ``url`` set (``ClientResponse.cookies``), within the limits."""
        if not set_cookies:
            return
        key = (crawl_id, url.host_port_subcomponent or "")
        jar = self._jars.get(key)
        if jar is None:
            jar = self._jars[key] = aiohttp.CookieJar(unsafe=True)  # IP hosts keep cookies too
            while len(self._jars) > self.max_jars:
                self._jars.popitem(last=False)
        else:
            self._jars.move_to_end(key)
        known = {cookie.key for cookie in jar}
        kept: BaseCookie[str] = SimpleCookie()
        for name, morsel in set_cookies.items():
            if len(name) + len(morsel.value) > MAX_COOKIE_BYTES:
                continue
            if name not in known and len(known) >= MAX_COOKIES:
                continue
            kept[name] = morsel
            known.add(name)
        jar.update_cookies(kept, url)
