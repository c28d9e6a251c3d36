"""`streamcrawl duplicates` through the real services (frontier, fetcher, parser): the URLs of a
crawl that got the same body, read from `outcomes`."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.seeds import CrawlRequest
from tests.support import LocalSite, ServiceProcess, crawl_to_the_end, wait_for

pytestmark = pytest.mark.kafka

HTML = {"Content-Type": "text/html; charset=utf-8"}
HOME = b'<html><body><a href="/?from=nav">home</a><a href="/Index.html">index</a>' + (
    b'<a href="/offer">offer</a><a href="/print/offer">print</a></body></html>'
)
OFFER = b"<html><body><h1>Kettles</h1></body></html>"


@pytest.fixture
def site() -> Iterator[LocalSite]:
    local = LocalSite(
        {
            "/robots.txt": (200, {}, b"User-agent: *\n"),
            "/": (200, HTML, HOME),
            "/?from=nav": (200, HTML, HOME),
            "/Index.html": (200, HTML, HOME),
            "/offer": (200, HTML, OFFER),
            "/print/offer": (200, HTML, OFFER + b"<!-- print -->"),
        }
    ).start()
    yield local
    local.stop()


def test_duplicates_groups_the_urls_that_got_the_same_body(
    kafka_bootstrap: str, tmp_path: Path, site: LocalSite, started: list[ServiceProcess]
) -> None:
    request = CrawlRequest(crawl_id="dups", seeds=[site.url("/")], politeness_delay_ms=0)
    deployment = crawl_to_the_end(kafka_bootstrap, tmp_path, started, request)

    listed = deployment.cli("duplicates", "dups")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("3 URLs, sha256 ")
    assert sorted(lines[1:]) == sorted(
        f"  {site.url(path)}" for path in ("/", "/?from=nav", "/Index.html")
    )
    assert "1 group of duplicate pages in crawl dups" in listed.stderr

    as_json = deployment.cli("duplicates", "dups", "--json")
    [group] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert len(group["sha256"]) == 64 and len(group["urls"]) == 3


def _page(article: str, links: str = "", head: str = "") -> bytes:
    """One page of a template whose menu and footer outweigh its article."""
    menu = " ".join(f'<a href="/section-{n}">Section {n} of our catalogue</a>' for n in range(40))
    footer = "Opening hours, delivery terms, returns policy and contact details. " * 20
    return (
        f"<html><head>{head}</head><body><header><nav>{menu}</nav></header>"
        f"<main><article>{article}</article>{links}</main><footer>{footer}</footer></body></html>"
    ).encode()


KETTLE = (
    "Our stainless steel kettle boils a litre of water in under three minutes, switches itself "
    "off when the water boils, and keeps its handle cool; the filter lifts out for cleaning and "
    "the base turns all the way round for left and right hands alike. "
) * 2
TOASTER = (
    "The toaster takes four slices at once, browns them evenly at six settings, warms bagels on "
    "one side only and lifts small slices high enough to reach; its crumb tray slides out from "
    "the front and the cord winds away underneath when the toaster is stored. "
) * 2


@pytest.fixture
def catalogue() -> Iterator[LocalSite]:
    links = "".join(
        f'<a href="{path}">more</a>'
        for path in ("/kettle", "/kettle?ref=mail", "/toaster", "/kettle-print", "/about")
    )
    local = LocalSite(
        {
            "/robots.txt": (200, {}, b"User-agent: *\n"),
            "/": (200, HTML, _page("Welcome to our shop of kitchen things.", links)),
            "/kettle": (200, HTML, _page(KETTLE + "In stock.")),
            "/kettle?ref=mail": (200, HTML, _page(KETTLE + "In stock today.")),
            "/toaster": (200, HTML, _page(TOASTER)),
            "/kettle-print": (
                200,
                HTML,
                _page(KETTLE, head='<link rel="canonical" href="/kettle">'),
            ),
            "/about": (200, HTML, _page("A small shop.")),
        }
    ).start()
    yield local
    local.stop()


def test_duplicates_near_groups_pages_whose_main_texts_are_nearly_alike(
    kafka_bootstrap: str, tmp_path: Path, catalogue: LocalSite, started: list[ServiceProcess]
) -> None:
    """Every page shares the menu and footer; only the kettle's two URLs say nearly the same in
    their main text. The print version names the kettle as canonical, so it does not count, and
    the home and about pages are too short to sign: three pages are compared."""
    request = CrawlRequest(
        crawl_id="near",
        seeds=[catalogue.url("/")],
        politeness_delay_ms=0,
        include_pattern="^[^?]*(\\?ref=mail)?$",
        exclude_pattern="/section-",
        find_near_duplicates=True,
    )
    deployment = crawl_to_the_end(kafka_bootstrap, tmp_path, started, request)

    # The crawl is done once the frontier has every page's report; a page's links (its
    # signature) travel on `links`, which nothing of that waits for: the last may land later.
    def listing() -> subprocess.CompletedProcess[str]:
        return deployment.cli("duplicates", "near", "--near")

    wait_for(lambda: "of 3 signed pages" in listing().stderr, 60, "every page's signature read")
    listed = listing()
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == "2 URLs nearly alike"
    assert lines[1] == f"  100%  {catalogue.url('/kettle')}"
    assert lines[2].endswith(f"  {catalogue.url('/kettle?ref=mail')}")
    assert "1 group of near-duplicate pages in crawl near: 2 of 3 signed pages" in listed.stderr

    as_json = deployment.cli("duplicates", "near", "--near", "--json")
    [group] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert group["similarity"][0] == 1.0 and 0.9 <= group["similarity"][1] < 1.0

    strict = deployment.cli("duplicates", "near", "--near", "--similarity", "1")
    assert strict.stdout == "" and "no near-duplicate pages among 3 signed pages" in strict.stderr

    exact = deployment.cli("duplicates", "near")
    assert "no duplicate pages in crawl near" in exact.stderr  # no two bodies are the same
