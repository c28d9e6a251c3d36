"""The crawl registry and the budget protocol (DESIGN.md section 3, step 1; section 4).

Owner side (the partition a crawl id's `seeds` and `budget` records land on):

- A CrawlRequest is accepted once: the owner stores its CrawlState (status active) in `owned`,
  writes it to `crawls`, creates the crawl's BudgetLedger when max_links is finite, and emits the
  seeds to `urls` at depth 0 as DiscoveredUrls grouped by host (first-seen host order, parts under
  the topic's size limit), keyed by host so each lands where its host lives; with ``use_sitemaps``
  each seed host's conventional ``/sitemap.xml`` joins its seeds (sitemaps named by robots.txt come
  later, through fetch outcomes). The messages count as announced, so the crawl cannot look done
  while they travel. A request whose crawl id the owner
  already holds (a redelivery, or a reused id) changes nothing.
- Commands change the stored status and rewrite `crawls`: pause (active to paused), resume (paused
  to active), cancel (anything but cancelled to cancelled; terminal). A command that changes nothing
  is ignored; one for a crawl the owner does not hold is dead-lettered.
- A BudgetRequest is answered by the ledger (`frontier.budget.BudgetLedger`) with a BudgetGrant sent
  to the requesting partition explicitly, or held until its depth opens; the periodic tick sends a
  BudgetRecheck to this partition when the progress view opens a deeper depth. The owner's
  ``budget_granted`` counter is the ledger's total, so done detection can tell a spent budget.
- On tick the owner flips an active crawl to done when its progress view says so
  (`frontier.progress.crawl_done`).

Partition side: each partition holding URLs of a finite-budget crawl keeps a BudgetAccount in its
crawl record, asks for budget when it has uncharged URLs waiting at its lowest unfinished depth and
is below low water (the request names that depth), applies
grants, and resends an unanswered request on tick.
"""

from __future__ import annotations

import logging

from frontier.budget import (
    BudgetAccount,
    BudgetLedger,
    blocking_depth,
    depth_counter,
    depth_ordered,
)
from frontier.progress import crawl_done
from frontier.records import LEDGER, OWNED
from frontier.session import PartitionSession
from schemas.budget import BudgetGrant, BudgetRecheck, BudgetRequest
from schemas.canonical import canonical_url, host_key
from schemas.crawls import CrawlState, CrawlStatus, StoredCrawlRequest
from schemas.seeds import CrawlCommand, CrawlRequest
from schemas.serde import split_into_parts
from schemas.urls import DiscoveredUrl, DiscoveredUrls

log = logging.getLogger(__name__)

SITEMAP_PATH = "/sitemap.xml"
SEEDS_ORIGIN = "seeds"
"""The ``origin`` of a crawl's seed messages (`schemas.urls.DiscoveredUrls`)."""

_COMMAND_STATUS: dict[str, CrawlStatus] = {
    "pause": "paused",
    "resume": "active",
    "cancel": "cancelled",
}
_COMMAND_FROM: dict[str, tuple[CrawlStatus, ...]] = {
    "pause": ("active",),
    "resume": ("paused",),
    "cancel": ("active", "paused", "done"),
}


def handle_seed_message(session: PartitionSession, message: CrawlRequest | CrawlCommand) -> None:
    if isinstance(message, CrawlRequest):
        start_crawl(session, message)
    else:
        apply_command(session, message)


def owned_state(session: PartitionSession, crawl_id: str) -> CrawlState | None:
    raw = session.table(OWNED).get(crawl_id.encode())
    return None if raw is None else CrawlState.model_validate_json(raw)


def publish_state(session: PartitionSession, state: CrawlState) -> None:
    """Store the owner's CrawlState and write it to `crawls`."""
    session.table(OWNED).put(state.crawl_id.encode(), state.model_dump_json().encode())
    session.produce(session.topics.crawls, state.crawl_id, state)
    session.wake_all()


def start_crawl(session: PartitionSession, request: CrawlRequest) -> None:
    crawl_id = request.crawl_id
    if owned_state(session, crawl_id) is not None:
        log.info("crawl %s already exists; its request was not accepted again", crawl_id)
        return
    now = session.now_ms
    state = CrawlState(
        crawl_id=crawl_id,
        request=StoredCrawlRequest(**request.model_dump()),
        status="active",
        created_at=now,
        updated_at=now,
        owner_partition=session.partition,
    )
    publish_state(session, state)
    if request.max_links != -1:
        ledger = BudgetLedger(crawl_id, request.max_links)
        session.table(LEDGER).put(crawl_id.encode(), ledger.to_bytes())
    messages = seed_messages(request, now, session.config.urls_max_message_bytes)
    for message in messages:
        session.produce(session.topics.urls, message.host, message)
    session.count(crawl_id, "seeds", len(request.seeds))
    session.count(crawl_id, "discovered_messages_announced", len(messages))
    if depth_ordered(request):
        session.count(crawl_id, depth_counter("announced", 0), len(messages))


def seed_messages(request: CrawlRequest, now_ms: int, max_bytes: int) -> list[DiscoveredUrls]:
    """The seeds as depth-0 DiscoveredUrls, one host per message, in parts when large."""
    by_host: dict[str, list[DiscoveredUrl]] = {}
    for seed in request.seeds:
        canonical = canonical_url(seed)
        if canonical is not None:
            by_host.setdefault(host_key(canonical), []).append(DiscoveredUrl(url=canonical))
    if request.use_sitemaps:
        for host, items in by_host.items():
            sitemap = canonical_url(SITEMAP_PATH, items[0].url)
            if sitemap is not None:
                by_host[host] = [*items, DiscoveredUrl(url=sitemap)]
    messages: list[DiscoveredUrls] = []
    for host, items in by_host.items():

        def build(
            chunk: list[DiscoveredUrl], part: int, parts: int, host: str = host
        ) -> DiscoveredUrls:
            return DiscoveredUrls(
                crawl_id=request.crawl_id,
                host=host,
                depth=0,
                discovered_at=now_ms,
                urls=chunk,
                part=part,
                parts=parts,
                origin=SEEDS_ORIGIN,
            )

        messages.extend(split_into_parts(items, build, max_bytes))
    return messages


def apply_command(session: PartitionSession, command: CrawlCommand) -> None:
    state = owned_state(session, command.crawl_id)
    if state is None:
        session.ctx.dead_letter(f"{command.action} for unknown crawl {command.crawl_id!r}")
        return
    if state.status not in _COMMAND_FROM[command.action]:
        return
    status = _COMMAND_STATUS[command.action]
    publish_state(
        session, state.model_copy(update={"status": status, "updated_at": session.now_ms})
    )


def handle_budget_message(
    session: PartitionSession, message: BudgetRequest | BudgetGrant | BudgetRecheck
) -> None:
    if isinstance(message, BudgetRequest):
        grant_budget(session, message)
    elif isinstance(message, BudgetRecheck):
        open_depth(session, message)
    else:
        apply_grant(session, message)


def grant_budget(session: PartitionSession, request: BudgetRequest) -> None:
    """Owner: answer a partition's request from the ledger, to that partition, or hold it until
    its depth opens (`frontier.budget`)."""
    ledger = _ledger(session, request.crawl_id)
    if ledger is None:
        session.ctx.dead_letter(f"budget request for a crawl without ledger {request.crawl_id!r}")
        return
    _send_grants(session, ledger, ledger.receive(request))


def open_depth(session: PartitionSession, recheck: BudgetRecheck) -> None:
    """Owner: every depth below the recheck's is finished everywhere; answer what it opens."""
    ledger = _ledger(session, recheck.crawl_id)
    if ledger is not None:
        _send_grants(session, ledger, ledger.open(recheck.open_depth))


def _ledger(session: PartitionSession, crawl_id: str) -> BudgetLedger | None:
    raw = session.table(LEDGER).get(crawl_id.encode())
    return None if raw is None else BudgetLedger.from_bytes(raw)


def _send_grants(
    session: PartitionSession, ledger: BudgetLedger, grants: list[BudgetGrant]
) -> None:
    crawl_id = ledger.crawl_id
    session.table(LEDGER).put(crawl_id.encode(), ledger.to_bytes())
    record = session.record(crawl_id)
    record.counters["budget_granted"] = ledger.granted_total
    session.changed(crawl_id)
    for grant in grants:
        session.produce(session.topics.budget, crawl_id, grant, partition=grant.partition)


def recheck_held_budget(session: PartitionSession) -> None:
    """Owner tick: for each ledger holding requests, open what the progress view allows, by a
    BudgetRecheck to this partition (an input, so its grants are redelivery-safe)."""
    for _, raw in list(session.table(LEDGER).scan()):
        ledger = BudgetLedger.from_bytes(raw)
        if not ledger.held:
            continue
        state = session.crawl_state(ledger.crawl_id)
        if state is None or state.status in ("done", "cancelled"):
            continue  # nothing more is leased: the held requests need no answer
        snapshots = session.services.progress.snapshots(ledger.crawl_id)
        blocking = blocking_depth(history[-1].counters for history in snapshots.values() if history)
        depth = max(h.depth for h in ledger.held) if blocking is None else blocking
        if depth > ledger.open_depth:
            recheck = BudgetRecheck(crawl_id=ledger.crawl_id, open_depth=depth)
            session.produce(
                session.topics.budget, ledger.crawl_id, recheck, partition=session.partition
            )


def apply_grant(session: PartitionSession, grant: BudgetGrant) -> None:
    """Partition: add a grant for the outstanding request; ask again after a partial one."""
    if grant.partition != session.partition:
        return
    record = session.record(grant.crawl_id)
    if record.account is None:
        record.account = BudgetAccount(grant.crawl_id, session.partition)
    if record.account.apply(grant) > 0 or record.account.exhausted:
        session.wake_all()
    session.changed(grant.crawl_id)
    crawl = session.crawl_state(grant.crawl_id)
    if crawl is not None:
        request_budget(session, crawl)


def request_budget(session: PartitionSession, crawl: CrawlState) -> None:
    """Ask the owner for budget when this partition's uncharged URLs need it."""
    if crawl.status == "cancelled":
        return
    account = session.account(crawl)
    if account is None:
        return
    config = session.config
    record = session.record(crawl.crawl_id)
    depth = record.lowest_unfinished()
    if depth is None:
        return
    request = account.request(
        record.waiting_at(depth),
        session.now_ms,
        depth=depth,
        low_water=config.budget_low_water,
        chunk=config.budget_chunk,
    )
    if request is not None:
        session.changed(crawl.crawl_id)
        session.produce(session.topics.budget, crawl.crawl_id, request)


def resend_budget(session: PartitionSession, crawl_id: str) -> None:
    """Tick: the outstanding request again (same id) when unanswered for a while."""
    account = session.record(crawl_id).account
    if account is None:
        return
    request = account.resend(session.now_ms, after_ms=session.config.budget_resend_after_ms)
    if request is not None:
        session.changed(crawl_id, progress=False)
        session.produce(session.topics.budget, crawl_id, request)


def flip_done_crawls(session: PartitionSession) -> None:
    """Owner tick: mark active crawls done when every partition's progress says so, or when
    their max_duration_ms has passed since they started (their queued URLs are then dropped)."""
    for _, raw in list(session.table(OWNED).scan()):
        state = CrawlState.model_validate_json(raw)
        if state.status != "active":
            continue
        limit = state.request.max_duration_ms
        if limit > 0 and session.now_ms - state.created_at >= limit:
            log.info("crawl %s reached its max_duration_ms of %d", state.crawl_id, limit)
            ended = {"status": "done", "updated_at": session.now_ms, "ended_by": "max_duration"}
            publish_state(session, state.model_copy(update=ended))
            continue
        snapshots = session.services.progress.snapshots(state.crawl_id)
        if crawl_done(
            snapshots, max_links=state.request.max_links, owner_partition=session.partition
        ):
            publish_state(
                session, state.model_copy(update={"status": "done", "updated_at": session.now_ms})
            )
