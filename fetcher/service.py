"""`python -m fetcher`: one fetcher instance (DESIGN section 3, steps 4 and 5).

Consumes `fetch` (keyed by host, so this instance is the only rate owner of its partitions'
hosts), produces `pages`, `outcomes` and REDIRECT edges on `links`. Settings are the kernel's plus
`STREAMCRAWL_FETCHER__*` (e.g. `STREAMCRAWL_FETCHER__ALLOWED_NETWORKS='["127.0.0.0/8"]'` for a
local site: private and loopback addresses are refused otherwise).
"""

from __future__ import annotations

import gc

from fetcher.dispatcher import Dispatcher, FetchTopics
from fetcher.handler import FetcherHandler
from fetcher.settings import FetcherSettings
from schemas import fetch, links, outcomes, pages
from schemas.serde import decode
from streamcrawl.clock import SystemClock
from streamcrawl.service import run_service, service_spec
from streamcrawl.settings import Settings
from streamcrawl.spec import Input
from streamcrawl.topics import topic_name

GC_THRESHOLDS = (20_000, 20, 20)
"""Young-generation collections every 20,000 net allocations instead of 700. One fetch allocates
thousands of short-lived containers (aiohttp's request and response objects, pydantic's output),
almost all freed by reference counting, yet at the defaults the collector ran every few pages and,
with thousands of read-ahead requests alive, took about a fifth of the dispatcher's CPU
(tests/bench/bench_fetcher.py: 540 against 417 us per page, under load). Cycles are still
collected, in larger batches."""


def settle_heap() -> None:
    """After start-up: move everything alive now (modules, schemas, the session) out of the
    collector's sight for good (``gc.freeze``) and collect in larger batches (GC_THRESHOLDS)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class FetcherServiceSettings(Settings):
    fetcher: FetcherSettings = FetcherSettings()


def decode_request(raw: bytes | None) -> fetch.FetchRequest:
    request: fetch.FetchRequest = decode(fetch.FetchRequest, raw)
    return request


def main() -> int:
    settings = FetcherServiceSettings()
    topics = FetchTopics(
        pages=topic_name(settings, pages.TOPIC),
        outcomes=topic_name(settings, outcomes.TOPIC),
        links=topic_name(settings, links.TOPIC),
    )
    dispatcher = Dispatcher(settings.fetcher, topics, SystemClock())
    dispatcher.start()
    settle_heap()
    spec = service_spec(
        settings, "fetcher", (Input(topic_name(settings, fetch.TOPIC), decode_request),)
    )
    try:
        return run_service(spec, FetcherHandler(dispatcher), settings)
    finally:
        dispatcher.stop()
