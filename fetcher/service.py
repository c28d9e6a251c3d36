"""`python -m fetcher`: one fetcher instance (DESIGN section 3, steps 4 and 5).

Consumes `fetch` (keyed by host, so this instance is the only rate owner of its partitions'
hosts), produces `pages`, `outcomes` and REDIRECT edges on `links`. Follows `crawls` as a table
of statuses: a crawl paused, done or cancelled stops counting for politeness at once
(`fetcher.politeness.Politeness.crawl_stopped`). Settings are the kernel's plus
`STREAMCRAWL_FETCHER__*` (e.g. `STREAMCRAWL_FETCHER__ALLOWED_NETWORKS='["127.0.0.0/8"]'` for a
local site: private and loopback addresses are refused otherwise).
"""

from __future__ import annotations

import logging

from fetcher.dispatcher import Dispatcher, FetchTopics
from fetcher.handler import FetcherHandler
from fetcher.settings import FetcherSettings
from schemas import crawls, fetch, links, outcomes, pages
from schemas.serde import decode
from streamcrawl.clock import SystemClock
from streamcrawl.kafka import table_consumer_config
from streamcrawl.logs import configure_logging
from streamcrawl.service import run_service, service_spec
from streamcrawl.settings import Settings
from streamcrawl.spec import Input
from streamcrawl.table import TopicTable
from streamcrawl.topics import topic_name

log = logging.getLogger(__name__)


class FetcherServiceSettings(Settings):
    fetcher: FetcherSettings = FetcherSettings()


def decode_request(raw: bytes | None) -> fetch.FetchRequest:
    request: fetch.FetchRequest = decode(fetch.FetchRequest, raw)
    return request


def crawl_status(raw: bytes | None) -> crawls.CrawlStatus:
    """Only the status of a CrawlState: the table keeps one word per crawl, not its seeds."""
    state: crawls.CrawlState = decode(crawls.CrawlState, raw)
    return state.status


def main() -> int:
    settings = FetcherServiceSettings()
    topics = FetchTopics(
        pages=topic_name(settings, pages.TOPIC),
        outcomes=topic_name(settings, outcomes.TOPIC),
        links=topic_name(settings, links.TOPIC),
    )
    configure_logging("fetcher", settings.instance_id, settings.log_level)  # before the dispatcher
    proxy = settings.fetcher.proxy
    if proxy.url is not None:
        log.info(
            "fetching through the proxy %s%s (bypass: %s; targets checked here: %s)",
            proxy.url,
            " as " + proxy.username if proxy.username else "",
            ", ".join(proxy.bypass) or "none",
            "yes" if proxy.check_targets else "no, the proxy resolves names",
        )
    for site in settings.fetcher.credentials:
        log.info("sending HTTP Basic credentials to %s", site)
        if site.startswith("http://"):
            log.warning("credentials for %s cross the network readable: it is not https", site)
    dispatcher = Dispatcher(settings.fetcher, topics, SystemClock())
    dispatcher.start()
    statuses: TopicTable[crawls.CrawlStatus] = TopicTable(
        table_consumer_config(settings),
        topic_name(settings, crawls.TOPIC),
        crawl_status,
        on_change=lambda crawl_id, status: dispatcher.crawl_changed(crawl_id, status == "active"),
    )
    statuses.start()
    spec = service_spec(
        settings, "fetcher", (Input(topic_name(settings, fetch.TOPIC), decode_request),)
    )
    try:
        return run_service(spec, FetcherHandler(dispatcher), settings)
    finally:
        statuses.stop()
        dispatcher.stop()
