"""`python -m frontier`: one frontier instance (DESIGN section 3, steps 1 to 3, 7 and 8).

Consumes `seeds`, `budget`, `urls`, `outcomes` and `scores` in one group with range assignment, so
partition p of each lands on the same instance and one state partition holds a host's whole state
and the crawls owned there. Reads `crawls` and `progress` whole as tables (ready before the loop
starts consuming). Produces `crawls`, `urls`, `fetch`, `budget`, `progress` and dead letters.
Frontier tunables come from `STREAMCRAWL_FRONTIER__*` (e.g. `..._LEASE_TIMEOUT_MS`).
"""

from __future__ import annotations

import logging
import random
import sys
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from frontier.clock import SystemClock
from frontier.config import FrontierConfig, FrontierTopics
from frontier.handler import FrontierHandler
from frontier.progress import ProgressBook
from schemas import crawls, progress
from schemas.serde import decode
from streamcrawl.kafka import table_consumer_config
from streamcrawl.service import run_service, service_spec
from streamcrawl.settings import Settings
from streamcrawl.table import TopicTable
from streamcrawl.topics import topic_name

log = logging.getLogger(__name__)

TABLES_READY_TIMEOUT_S = 120.0


class FrontierOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    lease_timeout_ms: Annotated[int, Field(ge=1000)] = 600_000
    fetcher_host_concurrency: Annotated[int, Field(ge=1)] = 2
    progress_interval_ms: Annotated[int, Field(ge=100)] = 1_000

    def config(self) -> FrontierConfig:
        return FrontierConfig(
            lease_timeout_ms=self.lease_timeout_ms,
            fetcher_host_concurrency=self.fetcher_host_concurrency,
            progress_interval_ms=self.progress_interval_ms,
        )


class FrontierServiceSettings(Settings):
    frontier: FrontierOptions = FrontierOptions()


def decode_crawl_state(raw: bytes | None) -> crawls.CrawlState:
    state: crawls.CrawlState = decode(crawls.CrawlState, raw)
    return state


def decode_progress(raw: bytes | None) -> progress.PartitionProgress:
    snapshot: progress.PartitionProgress = decode(progress.PartitionProgress, raw)
    return snapshot


def main() -> int:
    settings = FrontierServiceSettings()
    topics = FrontierTopics.from_prefix(settings.kafka.topic_prefix)
    book = ProgressBook()
    handler: FrontierHandler | None = None

    def crawl_changed(crawl_id: str, state: crawls.CrawlState | None) -> None:
        if handler is not None:
            handler.crawl_changed(crawl_id)

    def progress_changed(key: str, snapshot: progress.PartitionProgress | None) -> None:
        if snapshot is not None:
            book.record(snapshot)

    crawl_table = TopicTable(
        table_consumer_config(settings),
        topic_name(settings, crawls.TOPIC),
        decode_crawl_state,
        on_change=crawl_changed,
    )
    progress_table = TopicTable(
        table_consumer_config(settings),
        topic_name(settings, progress.TOPIC),
        decode_progress,
        on_change=progress_changed,
    )
    handler = FrontierHandler(
        settings.frontier.config(), topics, crawl_table, book, SystemClock(), random.Random()
    )
    crawl_table.start()
    progress_table.start()
    try:
        for table in (crawl_table, progress_table):
            if not table.wait_ready(TABLES_READY_TIMEOUT_S):
                sys.stderr.write(f"streamcrawl: a frontier table did not load: {table.error}\n")
                return 2
        spec = service_spec(
            settings,
            "frontier",
            handler.inputs(),
            tables=handler.tables(),
            co_partitioned=True,
        )
        return run_service(spec, handler, settings)
    finally:
        crawl_table.stop()
        progress_table.stop()
