"""The demo sites served on 127.0.0.1, so `make crawl` shows a real crawl with no internet.

`streamcrawl demo` crawls :func:`demo_site`, a small generated site (`streamcrawl.testsite`: two
hosts, robots.txt, redirects, 404 and 500 pages, a spider trap, nofollow links) whose ground truth
the demo's test compares the summary with. :class:`DemoSite` is the older hand-written two-host
site (a docs host and a blog), kept for the frontier's crash-point test, which crawls it.
"""

from __future__ import annotations

import asyncio
import random
import threading

from aiohttp import web

from streamcrawl.testsite import SiteGraph, generate_site

DEMO_PAGES = 60
DEMO_HOSTS = 2
DEMO_LEVELS = 4
DEMO_SEED = 7
DOC_PAGES = 40
BLOG_POSTS = 10


def demo_site() -> SiteGraph:
    """The generated site `streamcrawl demo` crawls: the same pages on every machine."""
    return generate_site(DEMO_PAGES, hosts=DEMO_HOSTS, levels=DEMO_LEVELS, seed=DEMO_SEED)


def _doc_links(number: int, rng: random.Random) -> list[str]:
    targets = {f"/docs/{rng.randrange(DOC_PAGES)}" for _ in range(rng.randint(1, 6))}
    if number % 7 == 0:
        targets.add("/private/secret")
    if number % 9 == 0:
        targets.add("/docs/missing")
    if number % 11 == 0:
        targets.add("/old-docs")
    return sorted(targets)


def doc_page(number: int, blog: str, seed: int = 7) -> str:
    rng = random.Random(seed * 1000 + number)
    content = "".join(
        f'<p>Section {number}: see <a href="{target}">page {target.rsplit("/", 1)[-1]}</a>.</p>'
        for target in _doc_links(number, rng)
    )
    blog_link = f'<a href="{blog}/posts/{number % BLOG_POSTS}">from the blog</a>'
    return (
        f"<html><head><title>Doc {number}</title></head><body>"
        '<nav><a href="/docs/0">Home</a> <a href="/docs/1">Guide</a></nav>'
        f"<main><h1>Doc {number}</h1>{content}<p>Also {blog_link}.</p></main>"
        '<footer><a href="/docs/2">About</a></footer></body></html>'
    )


def blog_post(number: int, docs: str) -> str:
    return (
        f"<html><body><article><h1>Post {number}</h1>"
        f'<p>Read <a href="{docs}/docs/{number * 3 % DOC_PAGES}">the docs</a> or '
        f'<a href="/posts/{(number + 1) % BLOG_POSTS}">the next post</a>.</p>'
        "</article></body></html>"
    )


class DemoSite:
    """The docs host and the blog host, served from one background thread."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="demo")
        self._runners: list[web.AppRunner] = []
        self.docs = ""
        self.blog = ""
        self.requests: list[str] = []
        """`host:port/path` of every request served, in order (tests compare crawls with it)."""

    @property
    def seed_url(self) -> str:
        return f"{self.docs}/docs/0"

    def start(self) -> DemoSite:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=10)
        return self

    async def _serve(self) -> None:
        docs_app, blog_app = web.Application(), web.Application()
        docs_app.router.add_get("/{tail:.*}", self._docs)
        blog_app.router.add_get("/{tail:.*}", self._blog)
        addresses = []
        for app in (docs_app, blog_app):
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            self._runners.append(runner)
            host, port = runner.addresses[0][:2]
            addresses.append(f"http://{host}:{port}")
        self.docs, self.blog = addresses

    async def _docs(self, request: web.Request) -> web.Response:
        path = request.path
        self.requests.append(f"{request.host}{path}")
        if path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /private/\n")
        if path == "/old-docs":
            raise web.HTTPMovedPermanently("/docs/3")
        number = path.removeprefix("/docs/")
        if path.startswith("/docs/") and number.isdigit() and int(number) < DOC_PAGES:
            return web.Response(text=doc_page(int(number), self.blog), content_type="text/html")
        raise web.HTTPNotFound()

    async def _blog(self, request: web.Request) -> web.Response:
        self.requests.append(f"{request.host}{request.path}")
        number = request.path.removeprefix("/posts/")
        if number.isdigit() and int(number) < BLOG_POSTS:
            return web.Response(text=blog_post(int(number), self.docs), content_type="text/html")
        raise web.HTTPNotFound()

    def stop(self) -> None:
        for runner in self._runners:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
