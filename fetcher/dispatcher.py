"""The fetcher's asyncio side: per-host read-ahead queues, robots.txt, politeness and HTTP.

The service loop (a Kafka consumer on the main thread) hands each FetchRequest over with a
`Deferred`; the dispatcher runs on its own thread and event loop, releases requests when their
host's politeness allows (DESIGN section 3, step 4), fetches, and finishes the Deferred with what
to produce: a FetchedPage to `pages`, a FetchOutcome to `outcomes`, and for a redirect a REDIRECT
edge to `links`. Only then does the loop commit the request's offset, so a crash re-fetches rather
than loses. A request whose lease deadline has passed is dropped unfetched (the frontier has queued
it again); queued requests of revoked partitions are handed back (abandoned: their new owner
fetches them), while those in flight finish, and the service loop waits a while for them before
it commits the revocation. Every Deferred is finished or abandoned exactly once, after an
unexpected error too (with a retryable outcome), so no partition's watermark waits forever; only
:meth:`Dispatcher.stop` cancels fetches in flight without finishing theirs.

Nothing polls: requests arriving (taken from an inbox in one go, so a poll's worth of them wakes
the loop once), a fetch ending and the timer set for the next host's allowed time each schedule
one pass over the queues (:meth:`Dispatcher._dispatch`), however many of them happen at once.

Read-ahead: :attr:`Dispatcher.buffered` counts requests submitted and not yet started or dropped,
and :attr:`Dispatcher.full` says when it reached ``read_ahead``; both are safe to read from the
service's thread, where `fetcher.handler.FetcherHandler.accepting` pauses the partitions on them
(with :attr:`Dispatcher.can_resume`, at half, to resume). The kernel also bounds each partition:
it pauses one once ``max_uncommitted_per_partition`` of its messages are unfinished or finished
above an unfinished one.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import threading
from dataclasses import dataclass

from fetcher import metrics
from fetcher.host_queues import HostQueues
from fetcher.http import FetchSession, fetch, new_event_loop, open_session
from fetcher.politeness import Grant, Politeness
from fetcher.results import (
    FetchResult,
    FetchTarget,
    SentHook,
    internal_error_outcome,
    robots_denied_outcome,
    robots_unreachable_outcome,
)
from fetcher.robots import RobotsCache, robots_origin
from fetcher.settings import FetcherSettings
from fetcher.wire import outcome_value, page_envelope
from schemas import links, outcomes, pages
from schemas.fetch import FetchRequest
from schemas.links import LinkEdge, PageLinks
from schemas.outcomes import FetchOutcome
from schemas.serde import encode
from streamcrawl.clock import Clock
from streamcrawl.handler import Deferred

log = logging.getLogger(__name__)

IDLE_WAIT_S = 1.0
PRUNE_EVERY_S = 600.0
"""How often idle politeness slots are forgotten (`fetcher.politeness.Politeness.prune`)."""


@dataclass(frozen=True)
class FetchTopics:
    pages: str
    outcomes: str
    links: str


class Job:
    """One request in flight through the dispatcher, with where its results go. The request's
    fields the host queues read (`fetcher.host_queues.Leased`) are copied in once: the queues read
    them several times per request, and a property is a call each time."""

    __slots__ = (
        "crawl_id",
        "deadline",
        "deferred",
        "finished",
        "host",
        "partition",
        "politeness_delay_ms",
        "queued_at",
        "request",
    )

    def __init__(self, request: FetchRequest, deferred: Deferred, partition: int) -> None:
        self.request = request
        self.deferred = deferred
        self.partition = partition
        self.crawl_id = request.crawl_id
        self.host = request.host
        self.deadline = request.deadline
        self.politeness_delay_ms = request.politeness_delay_ms
        self.queued_at = 0.0
        """Monotonic time it entered its host queue (again, after its grant went to robots.txt)."""
        self.finished = False
        """The Deferred was finished (or is being finished) by this dispatcher."""


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
        self._loop = new_event_loop()
        self._stopped: asyncio.Future[None] | None = None
        self._stopping = False
        self._dispatch_due = False
        self._timer: asyncio.Handle | None = None
        """Set while a wake-up is pending; cleared when it fires."""
        self._timer_at = 0.0
        """When it fires, on the loop's clock. Kept here: uvloop's handle for a time already past
        has no ``when()``, and its clock is cached per iteration, so a fired timer cannot be told
        by comparing times."""
        self._tasks: dict[Job, asyncio.Task[None]] = {}
        """Fetches under way; each removes itself when it ends (no done callback: that is one
        more loop callback per fetch)."""
        self._thread = threading.Thread(target=self._run, name="fetch-dispatcher", daemon=True)
        self._started = threading.Event()
        self._session: FetchSession | None = None
        self._robots: RobotsCache | None = None
        self._inbox: list[Job] = []
        self._inbox_lock = threading.Lock()
        self._inbox_due = False
        """An _accept is scheduled and will take what is in the inbox."""
        self._submitted = 0
        """Written under the inbox lock (by the service's thread)."""
        self._left = 0
        """Requests that left the read-ahead (started, dropped, handed back); written by the loop's
        thread only."""
        self.dropped_expired = 0
        self._hosts_by_partition: dict[int, set[str]] = {}
        """Hosts each partition sent requests for: forgotten when it is revoked, so if it comes
        back the first request to each waits a delay (another fetcher may just have fetched)."""
        self._pruned_at = clock.monotonic()

    # ----- called from the service loop's thread ---------------------------------------------

    def start(self) -> None:
        self._thread.start()
        if not self._started.wait(30):
            raise RuntimeError("fetch dispatcher did not start")

    def submit(self, request: FetchRequest, deferred: Deferred, partition: int) -> None:
        """Queue a request; the loop takes everything submitted since it last looked in one go
        (one wake-up for a poll's worth of requests, not one each)."""
        with self._inbox_lock:
            self._submitted += 1
            self._inbox.append(Job(request, deferred, partition))
            if self._inbox_due:
                return
            self._inbox_due = True
        self._loop.call_soon_threadsafe(self._accept)

    @property
    def buffered(self) -> int:
        """Requests submitted and not yet started or dropped (any thread may ask)."""
        left = self._left  # first: it never passes what was submitted before it was read
        return self._submitted - left

    @property
    def full(self) -> bool:
        """The read-ahead reached ``read_ahead``: the service should pause its partitions."""
        return self.buffered >= self._settings.read_ahead

    @property
    def can_resume(self) -> bool:
        """The read-ahead is below half of ``read_ahead``: paused partitions may resume."""
        return self.buffered < self._settings.read_ahead // 2

    def crawl_changed(self, crawl_id: str, active: bool) -> None:
        """A crawl's status changed in `crawls`: active, or not (paused, done, cancelled)."""
        self._loop.call_soon_threadsafe(self._crawl_changed, crawl_id, active)

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
        settings = self._settings
        async with open_session(
            settings.http,
            settings.address_policy(),
            proxy=settings.proxy,
            ssl_context=settings.ssl_context(),
            credentials=settings.credentials,
        ) as session:
            self._session = session
            self._robots = RobotsCache.from_session(
                self._settings.robots, session, self._settings.http, self._clock
            )
            self._stopped = self._loop.create_future()
            self._started.set()
            self._schedule()
            try:
                await self._stopped
            finally:
                if self._timer is not None:
                    self._timer.cancel()
                tasks = list(self._tasks.values())
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await self._robots.close()

    def _accept(self) -> None:
        with self._inbox_lock:
            jobs, self._inbox, self._inbox_due = self._inbox, [], False
        now = self._clock.monotonic()
        hosts_by_partition = self._hosts_by_partition
        for job in jobs:
            job.queued_at = now
            hosts = hosts_by_partition.get(job.partition)
            if hosts is None:
                hosts = hosts_by_partition[job.partition] = set()
            hosts.add(job.host)
            self._queues.push(job)
        self._schedule()

    def _crawl_changed(self, crawl_id: str, active: bool) -> None:
        if active:
            self._politeness.crawl_started(crawl_id)
        else:
            self._politeness.crawl_stopped(crawl_id)
            self._schedule()  # a host may be allowed sooner than the timer says

    def _drop_partitions(self, partitions: set[int]) -> None:
        for job in self._queues.remove_where(lambda queued: queued.partition in partitions):
            self._left += 1
            job.finished = True
            job.deferred.abandon()  # never committed here: the new owner fetches it
        for partition in partitions:
            for host in self._hosts_by_partition.pop(partition, ()):
                self._politeness.forget(host)

    def _prune(self) -> None:
        """Forget idle politeness slots, and the hosts without one from the partitions' sets."""
        self._pruned_at = self._clock.monotonic()
        if self._politeness.prune():
            known = self._politeness.known
            for partition, hosts in self._hosts_by_partition.items():
                self._hosts_by_partition[partition] = {host for host in hosts if known(host)}

    def _abandon_queued(self) -> None:
        for job in self._queues.remove_where(lambda queued: True):
            self._left += 1
            job.finished = True
            job.deferred.abandon()

    def _begin_stop(self) -> None:
        self._stopping = True
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)

    def _schedule(self) -> None:
        """Have :meth:`_dispatch` run soon, once however often this is called before it does."""
        if not self._dispatch_due:
            self._dispatch_due = True
            self._loop.call_soon(self._dispatch)

    def _dispatch(self) -> None:
        """Drop expired requests, start every request politeness allows now, and set the timer
        for the next one."""
        self._dispatch_due = False
        if self._stopping:
            return
        if self._clock.monotonic() - self._pruned_at > PRUNE_EVERY_S:
            self._prune()
        for job in self._queues.drop_expired():
            self._left += 1
            self.dropped_expired += 1
            metrics.LEASES_EXPIRED.inc()
            self._finish_deferred(job)
        now = self._clock.monotonic()
        create_task, observe_wait = self._loop.create_task, metrics.TALLIES.politeness_wait.observe
        while (item := self._queues.pop_ready()) is not None:
            self._left += 1
            observe_wait(max(now - item[0].queued_at, 0.0))
            self._tasks[item[0]] = create_task(self._serve(*item))
        self._set_timer()

    def _set_timer(self) -> None:
        """Wake at the next allowed time, and at least every IDLE_WAIT_S to drop expired leases;
        a timer already set early enough stays (waking early costs one empty pass)."""
        wait_s = IDLE_WAIT_S
        next_at = self._queues.next_ready_at()
        if next_at is not None and not math.isinf(next_at):
            wait_s = min(wait_s, max(0.0, next_at - self._clock.monotonic()))
        wake_at = self._loop.time() + wait_s
        if self._timer is not None:
            if self._timer_at <= wake_at:
                return
            self._timer.cancel()
        self._timer = self._loop.call_at(wake_at, self._on_timer)
        self._timer_at = wake_at

    def _on_timer(self) -> None:
        self._timer = None
        self._schedule()

    async def _serve(self, job: Job, grant: Grant) -> None:
        try:
            await self._serve_job(job, grant)
        except Exception:
            # Routed, not swallowed: logged, the slot given back, a retryable outcome reported.
            log.exception("fetch of %s failed unexpectedly", job.request.url)
            try:
                self._recover(job, grant)
            except Exception:
                log.exception("could not recover from the failure of %s", job.request.url)
        finally:
            del self._tasks[job]
            self._schedule()

    def _recover(self, job: Job, grant: Grant) -> None:
        """After an unexpected error: give the grant back unless that was done, and finish the
        Deferred with a retryable outcome unless it was finished."""
        if self._politeness.is_outstanding(grant):
            self._politeness.release(grant, status=None)
        if job.finished:
            return
        try:
            self._finish(job, internal_error_outcome(job.request))
        except Exception:
            log.exception("could not report the failure of %s", job.request.url)
            self._finish_deferred(job)  # the lease runs out and the frontier retries

    async def _serve_job(self, job: Job, grant: Grant) -> None:
        request = job.request
        if self._robots is None or self._session is None:
            raise RuntimeError("dispatcher not started")
        on_sent = functools.partial(self._politeness.mark_sent, grant)
        sitemaps: list[str] = []
        if request.respect_robots:
            rules = self._robots.cached(request.url)
            if rules is None:
                if robots_origin(request.url) is not None:
                    await self._fetch_robots(self._robots, job, grant, on_sent)
                    return
                # No http(s) origin, so no robots.txt: fetch() reports the URL as unfetchable.
            elif rules.failure is not None:
                self._politeness.cancel(grant)
                metrics.ROBOTS_UNREACHABLE.inc()
                wait_s = rules.expires_at - self._clock.monotonic()
                self._finish(job, robots_unreachable_outcome(request, rules.failure, wait_s))
                return
            elif not rules.allows(request.url):
                self._politeness.cancel(grant)
                metrics.ROBOTS_DENIED.inc()
                self._finish(job, robots_denied_outcome(request, rules.sitemaps))
                return
            else:
                sitemaps = list(rules.sitemaps)
        target = FetchTarget.from_request(request, on_sent)
        metrics.attempt_started()  # not metrics.counted: one coroutine less per fetch
        try:
            result = await fetch(self._session, target, self._settings.http, self._clock)
        finally:
            metrics.attempt_ended()
        metrics.record(result, result.kind)
        if request.use_cookies:
            metrics.TALLIES.cookie_jars = len(self._session.cookies)
        self._politeness.release(
            grant,
            status=result.status,
            retry_after_s=result.retry_after_s,
            answered_at=result.answered_at,
        )
        self._finish_result(job, result, sitemaps)

    async def _fetch_robots(
        self, robots: RobotsCache, job: Job, grant: Grant, on_sent: SentHook
    ) -> None:
        """Spend the grant on the host's robots.txt (its redirect hops a delay apart); the page
        goes back to wait for its turn."""

        async def pace() -> None:
            wait_s = self._politeness.hop_wait_s(grant)
            if wait_s > 0:
                await asyncio.sleep(wait_s)

        rules = await robots.fetch_rules(job.request.url, on_sent, pace)
        self._politeness.release(grant, status=rules.status)
        self._politeness.set_robots_delay(job.host, rules.crawl_delay_s)
        job.queued_at = self._clock.monotonic()
        self._queues.requeue(job)
        self._left -= 1
        self._schedule()

    def _finish_result(self, job: Job, result: FetchResult, sitemaps: list[str]) -> None:
        """Produce a fetch's page (if any), redirect edge (if any) and outcome, written straight
        from their fields (`fetcher.wire`), and finish the Deferred. Every message is encoded
        before the first is produced, so an error on the way leaves the Deferred untouched."""
        request, topics = job.request, self._topics
        page = result.page_fields(request)
        # page_sent promises the frontier a ParseReport; the parser skips revisits.
        outcome = result.outcome_fields(
            request,
            page_sent=page is not None and not page["revisit"],
            sitemaps=sitemaps if request.depth == 0 else (),
        )
        outputs: list[tuple[str, str, bytes]] = []
        if page is not None:
            # The body's bytearray goes in as it is: the envelope is its one copy.
            envelope = page_envelope(page, b"" if page["revisit"] else result.body)
            outputs.append((topics.pages, pages.key(request.url), envelope))
        if result.kind == "redirect" and result.redirect_to:
            edge = _redirect_edge(request, result.redirect_to, result.fetched_at_ms)
            outputs.append((topics.links, links.key(request.url), encode(edge)))
        outputs.append((topics.outcomes, outcomes.key(request.host), outcome_value(outcome)))
        self._produce(job, outputs)

    def _finish(self, job: Job, outcome: FetchOutcome) -> None:
        """Produce an outcome that came without a fetch (robots.txt denied the URL, an internal
        error) and finish the Deferred."""
        request = job.request
        self._produce(job, [(self._topics.outcomes, outcomes.key(request.host), encode(outcome))])

    def _produce(self, job: Job, outputs: list[tuple[str, str, bytes]]) -> None:
        for topic, key, value in outputs:
            job.deferred.produce(topic, key, value)
        self._finish_deferred(job)

    def _finish_deferred(self, job: Job) -> None:
        """Finish the job's Deferred with whatever it was given to produce."""
        job.finished = True
        job.deferred.finish()


def _redirect_edge(request: FetchRequest, redirect_to: str, fetched_at: int) -> PageLinks:
    return PageLinks(
        crawl_id=request.crawl_id,
        from_url=request.url,
        fetched_at=fetched_at,
        edges=[LinkEdge(to_url=redirect_to, link_type="REDIRECT", discovered_at=fetched_at)],
    )
