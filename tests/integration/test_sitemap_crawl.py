"""A crawl with `use_sitemaps` (`--sitemaps`) through the real services (frontier, fetcher, parser)
against a site whose robots.txt names a sitemap index, served as sites serve them: the index as
application/xml, one sitemap gzipped (application/gzip), one as text/xml.

The crawl keeps HTML only (the default content types), yet every sitemap is fetched and every page
they list is crawled; a sitemap entry is one link deeper than its sitemap, so with max_depth 2 the
pages' own links (depth 3) are not followed. Until session 37 the fetcher refused the index for
its media type and no page of the sitemaps was ever fetched.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.seeds import CrawlRequest
from tests.support import LocalSite, ServiceProcess, crawl_to_the_end

pytestmark = pytest.mark.kafka

HTML = {"Content-Type": "text/html; charset=utf-8"}


def urlset(site: LocalSite, paths: list[str]) -> bytes:
    entries = "".join(f"<url><loc>{site.url(path)}</loc></url>" for path in paths)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
    ).encode()


def page(links: list[str]) -> bytes:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return f"<html><body>{anchors}</body></html>".encode()


@pytest.fixture
def site() -> Iterator[LocalSite]:
    local = LocalSite({}).start()
    index = "".join(
        f"<sitemap><loc>{local.url(path)}</loc></sitemap>"
        for path in ("/sitemaps/pages.xml.gz", "/sitemaps/more.xml")
    )
    local.routes.update(
        {
            "/": (200, HTML, page([])),
            "/robots.txt": (
                200,
                {"Content-Type": "text/plain"},
                f"User-agent: *\nAllow: /\nSitemap: {local.url('/sitemap_index.xml')}\n".encode(),
            ),
            "/sitemap_index.xml": (
                200,
                {"Content-Type": "application/xml"},
                b'<?xml version="1.0" encoding="UTF-8"?><sitemapindex '
                b'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                + index.encode()
                + b"</sitemapindex>",
            ),
            "/sitemaps/pages.xml.gz": (
                200,
                {"Content-Type": "application/gzip"},
                gzip.compress(urlset(local, ["/a", "/b"])),
            ),
            "/sitemaps/more.xml": (200, {"Content-Type": "text/xml"}, urlset(local, ["/c"])),
            "/a": (200, HTML, page(["/a/child"])),
            "/b": (200, HTML, page([])),
            "/c": (200, HTML, page([])),
            "/a/child": (200, HTML, page([])),
        }
    )
    yield local
    local.stop()


def test_a_sitemap_crawl_fetches_the_sitemaps_and_every_page_they_list(
    kafka_bootstrap: str, tmp_path: Path, site: LocalSite, started: list[ServiceProcess]
) -> None:
    request = CrawlRequest(
        seeds=[site.url("/")], max_depth=2, use_sitemaps=True, politeness_delay_ms=0
    )
    crawl_to_the_end(kafka_bootstrap, tmp_path, started, request)
    assert sorted(site.paths()) == sorted(
        [
            "/",
            "/robots.txt",
            "/sitemap.xml",  # the conventional place, tried too: 404 here
            "/sitemap_index.xml",
            "/sitemaps/pages.xml.gz",
            "/sitemaps/more.xml",
            "/a",
            "/b",
            "/c",
        ]
    )
