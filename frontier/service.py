"""`python -m frontier`: one frontier instance (DESIGN section 3, steps 1 to 3, 7 and 8).

Consumes `seeds`, `budget`, `urls`, `outcomes` and `scores` in one group with range assignment, so
partition p of each lands on the same instance and one state partition holds a host's whole state
and the crawls owned there. Reads `crawls` and `progress` whole as tables (ready before the loop
starts consuming). Produces `crawls`, `urls`, `fetch`, `budget`, `progress` and dead letters.
Frontier tunables come from `STREAMCRAWL_FRONTIER__*` (e.g. `..._LEASE_TIMEOUT_MS`).

Once the tables are loaded it also serves the crawl-control API (`frontier.api`) on its own port,
publishing to `seeds` through its own producer and reading status from the same two tables.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import random
import sys
import threading
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from frontier.api import CrawlTable, TableCrawlView, build_app
from frontier.config import FrontierConfig, FrontierTopics, ProgressView
from frontier.exceptions import ApiPortUnavailableError
from frontier.handler import FrontierHandler
from frontier.lookup import UrlLookup
from frontier.progress import ProgressBook
from schemas import crawls, progress, seeds
from schemas.serde import decode
from streamcrawl.apiserver import ApiServer
from streamcrawl.clock import SystemClock
from streamcrawl.exceptions import FatalKafkaError, TopicMissingError
from streamcrawl.kafka import KafkaProducer, table_consumer_config
from streamcrawl.logs import configure_logging
from streamcrawl.service import run_service, service_spec
from streamcrawl.settings import Settings
from streamcrawl.table import TopicTable
from streamcrawl.topics import partition_counts, topic_name

log = logging.getLogger(__name__)

TABLES_READY_TIMEOUT_S = 120.0
PUBLISH_TIMEOUT_S = 30.0
"""An API request waits this long for the broker to take its record, then answers 503."""


class FrontierOptions(BaseModel):
    model_config = ConfigDict(frozen=True, hide_input_in_errors=True)

    lease_timeout_ms: Annotated[int, Field(ge=1000)] = 600_000
    fetcher_host_concurrency: Annotated[int, Field(ge=1)] = 2
    progress_interval_ms: Annotated[int, Field(ge=100)] = 1_000
    finished_crawl_retention_ms: Annotated[int, Field(ge=0)] = 7 * 24 * 3600 * 1000
    """How long a done or cancelled crawl's state is kept before it is purged."""
    bloom_expected_urls: Annotated[int, Field(ge=1)] = 1_000_000
    """URLs per state partition the visited-set Bloom filter is sized for."""
    recrawl_every: Annotated[int, Field(ge=0)] = 4
    """A busy host leases a due recrawl after this many new pages (0: only when none waits)."""
    api_enabled: bool = True
    api_host: str = "127.0.0.1"
    api_port: Annotated[int, Field(ge=0, le=65535)] = 8080
    """0 picks a free port. When the default port is taken the frontier runs without its API
    (logged as an error), so several instances on one machine still crawl; a port set explicitly
    that cannot be bound stops the frontier."""
    api_token: SecretStr | None = None
    """When set, every API request needs `Authorization: Bearer <token>`."""

    def config(self) -> FrontierConfig:
        return FrontierConfig(
            lease_timeout_ms=self.lease_timeout_ms,
            fetcher_host_concurrency=self.fetcher_host_concurrency,
            progress_interval_ms=self.progress_interval_ms,
            finished_crawl_retention_ms=self.finished_crawl_retention_ms,
            bloom_expected_urls=self.bloom_expected_urls,
            recrawl_every=self.recrawl_every,
        )


class FrontierServiceSettings(Settings):
    frontier: FrontierOptions = FrontierOptions()


def decode_crawl_state(raw: bytes | None) -> crawls.CrawlState:
    state: crawls.CrawlState = decode(crawls.CrawlState, raw)
    return state


def decode_progress(raw: bytes | None) -> progress.PartitionProgress:
    snapshot: progress.PartitionProgress = decode(progress.PartitionProgress, raw)
    return snapshot


class SeedPublisher:
    """The API's `publish`: produce to `seeds`, then await delivery on the caller's event loop.

    A thread serves the producer's delivery callbacks (librdkafka calls them only from poll), which
    resolve the futures `KafkaProducer.produce` returns; `asyncio.wrap_future` carries each result
    back to the loop that awaits it.
    """

    def __init__(
        self, producer: KafkaProducer, topic: str, timeout_s: float = PUBLISH_TIMEOUT_S
    ) -> None:
        self._producer = producer
        self._topic = topic
        self._timeout_s = timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="api-deliveries")

    def start(self) -> SeedPublisher:
        self._thread.start()
        return self

    async def __call__(self, key: str, value: bytes) -> None:
        delivery = self._producer.produce(self._topic, key, value)
        # Shielded: a timeout must not cancel the delivery future, which librdkafka resolves later.
        await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(delivery)), self._timeout_s)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                self._producer.poll(0.1)
            except FatalKafkaError:
                # `produce` raises it from now on, so every API request answers 503.
                log.exception("the crawl API's producer failed")
                return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._producer.close()


def start_api(
    settings: FrontierServiceSettings,
    table: CrawlTable,
    progress_view: ProgressView,
    stack: contextlib.ExitStack,
    urls: UrlLookup | None = None,
) -> str | None:
    """Serve the crawl-control API until `stack` closes and return its address.

    None when the default port is taken (the frontier runs on without the API); a configured port
    that cannot be had raises `ApiPortUnavailableError`."""
    options = settings.frontier
    publisher = SeedPublisher(
        KafkaProducer.from_settings(settings), topic_name(settings, seeds.TOPIC)
    ).start()
    view = TableCrawlView(table, progress_view)
    app = build_app(publisher, view, urls=urls, token=options.api_token)
    server = ApiServer(app, options.api_host, options.api_port)
    try:
        address = server.start()
    except OSError as error:
        server.stop()
        publisher.close()
        if "api_port" in options.model_fields_set:
            raise ApiPortUnavailableError(
                f"crawl API cannot listen on {options.api_host}:{options.api_port}: {error}"
            ) from error
        log.error("crawl API not served: default port %d: %s", options.api_port, error)
        return None
    stack.callback(publisher.close)
    stack.callback(server.stop)  # first: no request publishes after the producer closed
    log.info("frontier %s serving the crawl API on http://%s", settings.instance_id, address)
    if options.api_token is None and not _loopback(options.api_host):
        log.warning("the crawl API listens on %s without a token", options.api_host)
    return address


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def main() -> int:
    settings = FrontierServiceSettings()
    configure_logging("frontier", settings.instance_id, settings.log_level)
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
    with contextlib.ExitStack() as stack:
        for table in (crawl_table, progress_table):
            table.start()
            stack.callback(table.stop)
        for table in (crawl_table, progress_table):
            if not table.wait_ready(TABLES_READY_TIMEOUT_S):
                sys.stderr.write(f"streamcrawl: a frontier table did not load: {table.error}\n")
                return 2
        api_address, lookup = None, None
        if settings.frontier.api_enabled:
            try:
                partitions = partition_counts(settings, [topics.urls])[topics.urls]
                lookup = UrlLookup(partitions, settings.frontier.config(), crawl_table)
                api_address = start_api(settings, crawl_table, book, stack, lookup)
            except (ApiPortUnavailableError, TopicMissingError) as error:
                log.error("%s", error)
                return 2
        spec = service_spec(
            settings,
            "frontier",
            handler.inputs(),
            tables=handler.tables(),
            co_partitioned=True,
        )
        on_ready = None if lookup is None else lookup.attach
        return run_service(spec, handler, settings, on_ready=on_ready, api_address=api_address)
