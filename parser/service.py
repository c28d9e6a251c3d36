"""`python -m parser`: one parser instance (DESIGN section 3, step 6).

Consumes `pages` (keyed by URL, so a giant host's pages spread over every parser) and produces each
page's PageLinks to `links`, its item to `items` when its crawl names fields, its DiscoveredUrls to
`urls` (keyed by target host) and its ParseReport to `urls` (keyed by the page's host), all
delivered before the page's offset is committed. A page
with no http(s) URL cannot be keyed and is dead-lettered; every other page, even one that fails to
parse, is reported, so the frontier can still finish its crawl. Parser tunables come from
`STREAMCRAWL_PARSER__*` (e.g. `..._MAX_LINKS`).
"""

from __future__ import annotations

import logging

from prometheus_client import Counter, Histogram

from parser.handler import PageParser, ParseResult
from parser.settings import ParserSettings
from schemas import items, links, pages, urls
from schemas.serde import decode_page
from schemas.urls import DiscoveredUrls
from streamcrawl.handler import BaseHandler, Context, Record
from streamcrawl.service import run_service, service_spec
from streamcrawl.settings import Settings
from streamcrawl.spec import Input
from streamcrawl.topics import topic_name

log = logging.getLogger(__name__)

PAGES = Counter("streamcrawl_parser_pages_total", "Pages parsed, by result", ["status"])
LINKS = Counter("streamcrawl_parser_links_total", "Link edges extracted", ["link_type", "position"])
DROPPED = Counter("streamcrawl_parser_links_dropped_total", "Links dropped, by reason", ["reason"])
ITEMS = Counter(
    "streamcrawl_parser_items_total",
    "Items extracted with a crawl's selectors, by how many fields matched (complete, partial, "
    "empty: a rising share of empty items means the selectors no longer fit the pages)",
    ["fields"],
)
REQUISITES = Counter(
    "streamcrawl_parser_requisites_total",
    "Page requisites sent (stylesheets, scripts, images, fonts, media, frames: crawls with "
    "fetch_page_requisites)",
)
PARSE_SECONDS = Histogram(
    "streamcrawl_parser_parse_seconds",
    "Time to parse one page",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5),
)


class ParserServiceSettings(Settings):
    parser: ParserSettings = ParserSettings()


class ParserLoopHandler(BaseHandler):
    """Adapts the pure PageParser to the kernel: page in, encoded messages out."""

    def __init__(self, page_parser: PageParser, topic_names: dict[str, str]) -> None:
        self._parser = page_parser
        self._topics = topic_names

    def handle(self, record: Record, ctx: Context) -> None:
        page, body = record.value
        with PARSE_SECONDS.time():
            result = self._parser.parse(page, body)
        self._count(result)
        if result.status == "invalid_page":
            ctx.dead_letter(result.error or "page without an http(s) URL")
            return
        if result.failure is not None:
            log.error("parsing %s failed", page.url, exc_info=result.failure)
        for message in result.messages:
            ctx.produce(self._topics[message.topic], message.key, message.encoded)

    @staticmethod
    def _count(result: ParseResult) -> None:
        PAGES.labels(result.status).inc()
        requisites = sum(
            len(message.value.urls)
            for message in result.messages
            if isinstance(message.value, DiscoveredUrls) and message.value.requisites
        )
        if requisites:
            REQUISITES.inc(requisites)
        if result.extract is None:
            return
        if result.extract.item is not None:
            ITEMS.labels(result.extract.item.completeness).inc()
        for edge in result.extract.edges:
            LINKS.labels(edge.link_type, edge.position).inc()
        dropped = result.extract.dropped
        for reason, count in (
            ("invalid_url", dropped.invalid_url),
            ("scheme", dropped.scheme),
            ("cap", dropped.cap),
        ):
            if count:
                DROPPED.labels(reason).inc(count)


def main() -> int:
    settings = ParserServiceSettings()
    topic_names = {
        links.TOPIC.suffix: topic_name(settings, links.TOPIC),
        items.TOPIC.suffix: topic_name(settings, items.TOPIC),
        urls.TOPIC.suffix: topic_name(settings, urls.TOPIC),
    }
    handler = ParserLoopHandler(PageParser(settings.parser), topic_names)
    spec = service_spec(
        settings, "parser", (Input(topic_name(settings, pages.TOPIC), decode_page),)
    )
    return run_service(spec, handler, settings)
