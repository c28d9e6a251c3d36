"""The parser service's counters (`parser.service`) count what a parse result holds."""

from __future__ import annotations

from prometheus_client import REGISTRY

from parser.handler import PageParser
from parser.service import ParserLoopHandler
from tests.unit.parser.pages import fetched_page

PAGE = b"""<html><head><link rel="stylesheet" href="/site.css"></head>
<body><img src="/a.png"><img src="https://cdn.example.net/b.png">
<a href="/next">next</a></body></html>"""


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_requisites_sent_are_counted_and_pages_by_status() -> None:
    before = sample("streamcrawl_parser_requisites_total")
    html_before = sample("streamcrawl_parser_pages_total", status="html")
    for requisites in (True, False):
        page = fetched_page("https://www.example.com/", PAGE, find_requisites=requisites)
        ParserLoopHandler._count(PageParser().parse(page, PAGE))
    assert sample("streamcrawl_parser_requisites_total") - before == 3
    assert sample("streamcrawl_parser_pages_total", status="html") - html_before == 2
