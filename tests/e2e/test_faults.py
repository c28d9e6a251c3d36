"""Faults mid-crawl: every service killed at a crash point and restarted, in sequence, then the
broker restarted. The crawl still ends done with the ground truth's pages and edges, and the pages
fetched twice stay within what the faults can explain.

Crashes come from crash points (`STREAMCRAWL_CRASH_AT`), not timers: the frontier starts with
one; each later service is stopped cleanly (SIGTERM drains it), started again with its crash
point, dies there (`os._exit`, as `kill -9` would), and is started clean once the previous one
is ready again. The module runs its own broker (a `LocalBroker` on free ports) because it
restarts it, which it cannot do to the session's.

A duplicate fetch can only come from a lease in flight at a fault: the frontier's open leases (at
most the lease window, 2 per host) or the fetcher's finished but uncommitted requests (it commits
every `commit_interval_s`, 0.1 s, less than one politeness delay: at most one per host). So each
fault that touches fetching (the frontier, the fetcher, the broker) may cost the lease window
plus one per host; the test prints the count it saw. A crawl that serves nothing for
`STALL_S` after the broker's restart fails the test rather than waiting out its deadline.

The broker restart comes last in the same crawl, once every service has crashed and come back.
Right after a restart librdkafka may fence the static members of the groups ("Static consumer
fenced by other consumer with same group.instance.id", a `_FATAL` consumer error): a fenced
service exits and the harness restarts it as `streamcrawl up` does (`supervise=True`), with the
environment it last had (so the frontier's crash point, cleared once, stays cleared). A member
whose session timed out while the broker was down can also go silent and never rejoin (seen here:
the group coordinator reloads the group and expires the member, and no JoinGroup ever comes;
confluentinc/librdkafka#3437): the loop's rejoin watchdog (`rejoin_timeout_s`, 20 s in tests)
then exits the service for a restart with a fresh client.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier.traps import check_traps
from streamcrawl.broker import LocalBroker, default_libs_dir, free_ports
from streamcrawl.crashpoints import CRASH_EXIT_CODE
from streamcrawl.testsite import ReferenceCrawl, reference_crawl
from tests.e2e.harness import EndToEnd
from tests.support import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(480)]

MAX_DEPTH = 5
DELAY_MS = 350
"""Long enough that the crawl (about 130 pages on its largest host) outlasts five faults."""
LEASE_WINDOW = 2
UNCOMMITTED_PER_HOST = 1
"""The fetcher's uncommitted window per host: one commit interval is under one delay."""
CRASHES = {
    "fetcher": "after_delivery:3",
    "parser": "after_offset_store:3",
    "linkgraph": "after_delivery:3",
    "storage": "after_state_write:3",
}
"""The crash point each service dies at after its clean restart; the frontier's is set at start."""
FRONTIER_CRASH = "after_produce:6"
STALL_S = 60.0
"""No page served for this long after the broker restart: the crawl is stuck (retries wait ~1 s)."""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    port, controller_port = free_ports(2)
    data_dir = tmp_path_factory.mktemp("faults-kafka")
    local = LocalBroker(data_dir, port, controller_port, default_libs_dir())
    local.start()
    try:
        yield local
    finally:
        local.stop()


class Stall:
    """Gives up on a crawl that served nothing new for a while.

    Not on a "fenced" line in the logs: a fenced service now exits and is restarted, and its log
    (appended to by the restarted process) keeps the line, so that check gave up on crawls that
    were recovering."""

    def __init__(self, e2e: EndToEnd, quiet_s: float = STALL_S) -> None:
        self.e2e = e2e
        self.quiet_s = quiet_s
        self.checked = 0.0
        self.served = -1
        self.changed = time.monotonic()

    def stalled(self) -> bool:
        now = time.monotonic()
        if now - self.checked < 2:
            return False
        self.checked = now
        served = len(self.e2e.server.page_requests())
        if served != self.served:
            self.served, self.changed = served, now
        return now - self.changed > self.quiet_s


def trap_guard(url: str) -> bool:
    return check_traps(url) is not None


def seed(e2e: EndToEnd) -> str:
    request = e2e.seed(
        max_depth=MAX_DEPTH,
        same_domain="registered_domain",
        politeness_delay_ms=DELAY_MS,
        max_retries=1,
    )
    return request.crawl_id


def assert_matches_reference(
    e2e: EndToEnd, crawl_id: str, reference: ReferenceCrawl, fetching_faults: int
) -> None:
    served = [url for url, _ in e2e.server.page_requests()]
    assert set(served) == reference.fetched
    expected = {
        source: {
            (e.to_url, e.anchor_text, e.context_window, e.link_type, e.rel, e.position)
            for e in edges
        }
        for source, edges in reference.edges.items()
    }
    assert e2e.link_edges(crawl_id) == expected
    repeats = Counter(served) - Counter(reference.attempts)
    bound = fetching_faults * (LEASE_WINDOW + UNCOMMITTED_PER_HOST) * e2e.graph.hosts
    print(f"duplicate fetches: {sum(repeats.values())} (bound {bound}): {dict(repeats)}")
    assert sum(repeats.values()) <= bound, repeats


def test_every_service_killed_then_the_broker_restarted_in_one_crawl(
    broker: LocalBroker, tmp_path: Path
) -> None:
    e2e = EndToEnd(
        broker.bootstrap,
        tmp_path,
        (400, 3, 6, 21),
        partitions=2,
        role_env={"frontier": {"STREAMCRAWL_CRASH_AT": FRONTIER_CRASH}},
    )
    e2e.start()
    try:
        reference = reference_crawl(e2e.server.site, MAX_DEPTH, max_retries=1, refuse=trap_guard)
        crawl_id = seed(e2e)
        faults: list[str] = []

        def crash_and_restart(instance_id: str) -> None:
            instance = e2e.stack.instance(instance_id)
            try:
                wait_for(lambda: not instance.running, 120, f"{instance_id} at its crash point")
            except TimeoutError:
                e2e.dump_logs()
                raise
            assert instance.process.returncode == CRASH_EXIT_CODE, instance.log_tail()
            restarted_at = int(time.time() * 1000)
            e2e.stack.restart(instance_id, {"STREAMCRAWL_CRASH_AT": ""})
            e2e.wait_ready(instance_id, restarted_at)
            served = len(e2e.server.page_requests())
            faults.append(f"{instance_id} at {instance.env['STREAMCRAWL_CRASH_AT']} ({served})")

        crash_and_restart("frontier-0")
        for role, point in CRASHES.items():
            if not e2e.built(role):
                faults.append(f"{role} skipped: not built")
                continue
            instance_id = f"{role}-0"
            e2e.stack.instance(instance_id).process.send_signal(15)
            assert e2e.stack.instance(instance_id).process.wait(60) == 0
            e2e.stack.restart(instance_id, {"STREAMCRAWL_CRASH_AT": point})
            crash_and_restart(instance_id)

        broker.stop()
        broker.start()
        served = len({url for url, _ in e2e.server.page_requests()})
        faults.append(f"broker restarted ({served})")
        assert served < len(reference.fetched), f"every fault landed mid-crawl: {faults}"

        watch = Stall(e2e)
        e2e.wait_done(crawl_id, 300, supervise=True, give_up=watch.stalled)
        print(f"faults: {faults}; restarted by the harness after them: {e2e.restarted}")
        # The frontier, the fetcher and the broker touch fetching, and so does every service the
        # harness restarted after the broker's restart (a fenced or silent member exits).
        assert_matches_reference(e2e, crawl_id, reference, fetching_faults=3 + len(e2e.restarted))
    finally:
        e2e.stop()
