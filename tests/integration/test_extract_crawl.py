"""Extraction through the real services: a crawl naming fields gets one item per product page on
`items`, and `streamcrawl items` writes them as JSON lines (`schemas.items`); its
`--follow-within` keeps the crawl to the product list's links, and its `--header` goes with every
fetch of the crawl, not with robots.txt."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from schemas.registry import ALL_TOPICS
from tests.support import Deployment, LocalSite, ServiceProcess, wait_crawl_done

pytestmark = pytest.mark.kafka

HTML = {"Content-Type": "text/html; charset=utf-8"}


def _product(number: int, price: str | None) -> bytes:
    price_tag = f'<span class="price">{price}</span>' if price else ""
    return (
        f"<html><head><title>Kettle {number}</title></head><body><h1>Kettle {number}</h1>"
        f'{price_tag}<a href="/">home</a></body></html>'
    ).encode()


class Shop(LocalSite):
    """Keeps the request headers of each path."""

    headers_seen: dict[str, dict[str, str]]

    async def _answer(self, request: web.Request) -> web.Response:
        self.headers_seen[request.path] = dict(request.headers)
        return await super()._answer(request)


@pytest.fixture
def shop() -> Iterator[Shop]:
    local = Shop(
        {
            "/robots.txt": (200, {}, b"User-agent: *\n"),
            "/": (
                200,
                HTML,
                b'<title>Shop</title><h1>Shop</h1><nav><a href="/about">about</a></nav>'
                b'<ul class="products"><li><a href="/product/1">1</a></li>'
                b'<li><a href="/product/2">2</a></li><li><a href="/product/3">3</a></li></ul>',
            ),
            "/about": (200, HTML, b"<h1>About</h1>"),
            "/product/1": (200, HTML, _product(1, "19.90")),
            "/product/2": (200, HTML, _product(2, "24.50")),
            "/product/3": (200, HTML, _product(3, None)),
        }
    )
    local.headers_seen = {}
    local.start()
    yield local
    local.stop()


def test_a_crawl_with_selectors_yields_an_item_per_matching_page(
    kafka_bootstrap: str, tmp_path: Path, shop: Shop, started: list[ServiceProcess]
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    deployment.create(ALL_TOPICS)
    started.extend(deployment.start_crawler(tmp_path / "logs"))
    seeded = deployment.cli(
        "seed",
        shop.url("/"),
        "--crawl-id=shop",
        "--delay-ms=0",
        "--extract=name=h1::text",
        "--extract=price=span.price::text",
        "--extract=title=xpath://title/text()",
        "--extract-pattern=/product/",
        "--follow-within=.products",
        "--header=Accept-Language: de",
    )
    assert seeded.returncode == 0, seeded.stderr
    wait_crawl_done(deployment, started, 120)
    assert "/about" not in shop.paths(), "only the product list's links are followed"
    assert shop.headers_seen["/product/2"]["Accept-Language"] == "de"
    assert "Accept-Language" not in shop.headers_seen["/robots.txt"], "robots.txt is the fetcher's"

    written = deployment.cli("items", "shop")
    assert written.returncode == 0, written.stderr
    lines = [json.loads(line) for line in written.stdout.splitlines()]
    by_url = {line["url"]: line for line in lines}
    assert sorted(by_url) == [shop.url(f"/product/{n}") for n in (1, 2, 3)]
    assert by_url[shop.url("/product/1")]["fields"] == {
        "name": ["Kettle 1"],
        "price": ["19.90"],
        "title": ["Kettle 1"],
    }
    assert by_url[shop.url("/product/3")]["fields"]["price"] == []
    assert all(line["crawl_id"] == "shop" and line["status"] == 200 for line in lines)
    assert "3 items of crawl shop; fields matched: complete: 2, partial: 1, empty: 0" in (
        written.stderr
    )

    output = tmp_path / "items.jsonl"
    every = deployment.cli("items", "shop", "--all", "-o", str(output))
    assert every.returncode == 0, every.stderr
    assert len(output.read_text().splitlines()) >= 3
    assert "no items of crawl other" in deployment.cli("items", "other").stderr
    table = deployment.cli("items", "shop", "--csv")
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header == "url,fetched_at,status,name,price,title,truncated"
    assert sorted(row.split(",")[3] for row in rows) == ["Kettle 1", "Kettle 2", "Kettle 3"]
