"""The fetcher's asyncio side: per-host read-ahead queues, robots.txt, politeness and HTTP.

The service loop (a Kafka consumer on the main thread) hands each FetchRequest over with a
`Deferred`; the dispatcher runs on its own thread and event loop, releases requests when their
host's politeness allows (DESIGN section 3, step 4), fetches, and finishes the Deferred with what
to produce: a FetchedPage to `pages`, a FetchOutcome to `outcomes`, and for a redirect a REDIRECT
edge to `links`. Only then does the loop commit the request's offset, so a crash re-fetches rather
than loses. A request whose lease deadline has passed is dropped unfetched (the frontier has queued
it again); requests of revoked partitions are dropped too (their new owner gets them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
from dataclasses import dataclass

import aiohttp

from fetcher.clock import Clock
from fetcher.host_queues import HostQueues
from fetcher.http import fetch, open_session
from fetcher.politeness import Grant, Politeness
from fetcher.results import FetchResult, FetchTarget
from fetcher.robots import RobotsCache
from fetcher.settings import FetcherSettings
from schemas import links, outcomes, pages
from schemas.base import now_millis
from schemas.fetch import FetchRequest
from schemas.links import LinkEdge, PageLinks
from schemas.outcomes import FetchOutcome
from schemas.serde import encode, encode_page
from streamcrawl.handler import Deferred

log = logging.getLogger(__name__)

IDLE_WAIT_S = 1.0


@dataclass(frozen=True)
class FetchTopics:
    pages: str
    outcomes: str
    links: str


@dataclass(frozen=True)
class Job:
    """One request in flight through the dispatcher, with where its results go."""

    request: FetchRequest
    deferred: Deferred
    partition: int

    @property
    def crawl_id(self) -> str:
        return self.request.crawl_id

    @property
    def host(self) -> str:
        return self.request.host

    @property
    def deadline(self) -> int:
        return self.request.deadline

    @property
    def politeness_delay_ms(self) -> int:
        return self.request.politeness_delay_ms


class Dispatcher:
    """Owns the event loop thread, the HTTP session, the host queues and the politeness slots."""

    def __init__(self, settings: FetcherSettings, topics: FetchTopics, clock: Clock) -> None:
        self._settings = settings
        self._topics = topics
        self._clock = clock
        self._politeness = Politeness(settings.politeness, clock)
        self._queues: HostQueues[Job] = HostQueues(
            self._politeness, clock, capacity=settings.read_ahead
        )
        self._loop = asyncio.new_event_loop()
        self._wake = asyncio.Event()
        self._stopping = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._run, name="fetch-dispatcher", daemon=True)
        self._started = threading.Event()
        self._session: aiohttp.ClientSession | None = None
        self._robots: RobotsCache | None = None
        self.dropped_expired = 0

    # ----- called from the service loop's thread ---------------------------------------------

    def start(self) -> None:
        self._thread.start()
        if not self._started.wait(30):
            raise RuntimeError("fetch dispatcher did not start")

    def submit(self, request: FetchRequest, deferred: Deferred, partition: int) -> None:
        self._loop.call_soon_threadsafe(self._accept, Job(request, deferred, partition))

    def revoke(self, partitions: set[int]) -> None:
        self._loop.call_soon_threadsafe(self._drop_partitions, partitions)

    def hand_back(self) -> None:
        """Shutdown: give every queued (not yet started) request back to Kafka; in-flight ones
        finish normally."""
        self._loop.call_soon_threadsafe(self._abandon_queued)

    def stop(self, timeout_s: float = 30.0) -> None:
        if not self._thread.is_alive():
            return
        self._loop.call_soon_threadsafe(self._begin_stop)
        self._thread.join(timeout_s)

    # ----- the event loop thread -------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        async with open_session(self._settings.http, self._settings.address_policy()) as session:
            self._session = session
            self._robots = RobotsCache.from_session(
                self._settings.robots, session, self._settings.http, self._clock
            )
            self._started.set()
            try:
                await self._pump()
            finally:
                for task in self._tasks:
                    task.cancel()
                await asyncio.gather(*self._tasks, return_exceptions=True)
                await self._robots.close()

    def _accept(self, job: Job) -> None:
        self._politeness.note_request(
            job.host, job.crawl_id, job.request.politeness_delay_ms / 1000
        )
        self._queues.push(job)
        self._wake.set()

    def _drop_partitions(self, partitions: set[int]) -> None:
        for job in self._queues.remove_where(lambda queued: queued.partition in partitions):
            job.deferred.finish()  # nothing produced; the new owner fetches it
            self._politeness.forget(job.host)

    def _abandon_queued(self) -> None:
        for job in self._queues.remove_where(lambda queued: True):
            job.deferred.abandon()

    def _begin_stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def _pump(self) -> None:
        while not self._stopping:
            for job in self._queues.drop_expired():
                self.dropped_expired += 1
                job.deferred.finish()
            while (item := self._queues.pop_ready()) is not None:
                task = asyncio.ensure_future(self._serve(*item))
                self._tasks.add(task)
                task.add_done_callback(self._task_done)
            await self._sleep_until_next()

    async def _sleep_until_next(self) -> None:
        next_at = self._queues.next_ready_at()
        wait_s = IDLE_WAIT_S
        if next_at is not None and not math.isinf(next_at):
            wait_s = min(IDLE_WAIT_S, max(0.0, next_at - self._clock.monotonic()))
        self._wake.clear()
        with contextlib.suppress(TimeoutError):  # a delay ran out: look at the queues again
            await asyncio.wait_for(self._wake.wait(), timeout=wait_s)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._wake.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("fetch task failed", exc_info=task.exception())

    async def _serve(self, job: Job, grant: Grant) -> None:
        try:
            await self._serve_job(job, grant)
        except Exception:
            # Routed, not swallowed: release the slot, report a retryable outcome, log it.
            log.exception("fetch of %s failed unexpectedly", job.request.url)
            self._politeness.release(grant, status=None)
            self._finish(job, _internal_error(job.request), None, b"")

    async def _serve_job(self, job: Job, grant: Grant) -> None:
        request = job.request
        if self._robots is None or self._session is None:
            raise RuntimeError("dispatcher not started")
        sitemaps: list[str] = []
        if request.respect_robots:
            rules = self._robots.cached(request.url)
            if rules is None:
                rules = await self._robots.fetch_rules(request.url)
                self._politeness.release(grant, status=rules.status)
                self._politeness.set_robots_delay(request.host, rules.crawl_delay_s)
                self._queues.requeue(job)  # robots.txt spent this grant; the page waits its turn
                self._wake.set()
                return
            if not rules.allows(request.url):
                self._politeness.cancel(grant)
                outcome = _robots_denied(request, rules.sitemaps)
                self._finish(job, outcome, None, b"")
                return
            sitemaps = list(rules.sitemaps)
        result = await fetch(
            self._session, FetchTarget.from_request(request), self._settings.http, self._clock
        )
        self._politeness.release(grant, status=result.status, retry_after_s=result.retry_after_s)
        self._finish_result(job, result, sitemaps)

    def _finish_result(self, job: Job, result: FetchResult, sitemaps: list[str]) -> None:
        page = result.page(job.request)
        outcome = result.outcome(job.request, page_sent=page is not None)
        if sitemaps and job.request.depth == 0:
            outcome = outcome.model_copy(update={"sitemaps": sitemaps})
        self._finish(job, outcome, page, result.body)

    def _finish(
        self, job: Job, outcome: FetchOutcome, page: pages.FetchedPage | None, body: bytes
    ) -> None:
        deferred, request = job.deferred, job.request
        if page is not None:
            deferred.produce(self._topics.pages, pages.key(request.url), encode_page(page, body))
        if outcome.kind == "redirect" and outcome.redirect_to:
            deferred.produce(
                self._topics.links, links.key(request.url), encode(_redirect_edge(outcome))
            )
        deferred.produce(self._topics.outcomes, outcomes.key(request.host), encode(outcome))
        deferred.finish()


def _redirect_edge(outcome: FetchOutcome) -> PageLinks:
    return PageLinks(
        crawl_id=outcome.crawl_id,
        from_url=outcome.url,
        fetched_at=outcome.fetched_at,
        edges=[
            LinkEdge(
                to_url=outcome.redirect_to or "",
                link_type="REDIRECT",
                discovered_at=outcome.fetched_at,
            )
        ],
    )


def _robots_denied(request: FetchRequest, sitemaps: tuple[str, ...] | list[str]) -> FetchOutcome:
    return FetchOutcome(
        crawl_id=request.crawl_id,
        url=request.url,
        host=request.host,
        lease_id=request.lease_id,
        depth=request.depth,
        kind="robots_denied",
        reason="robots_denied",
        sitemaps=list(sitemaps) if request.depth == 0 else [],
        fetched_at=now_millis(),
    )


def _internal_error(request: FetchRequest) -> FetchOutcome:
    return FetchOutcome(
        crawl_id=request.crawl_id,
        url=request.url,
        host=request.host,
        lease_id=request.lease_id,
        depth=request.depth,
        kind="retryable",
        reason="internal_error",
        error="the fetcher failed unexpectedly; see its log",
        fetched_at=now_millis(),
    )
