"""One URL of a crawl as the frontier knows it (`frontier.lookup`), read from the state a crawl
through the frontier's handlers left, in every state a URL can be in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from frontier.lookup import PartitionNotHeldError, UrlLookup
from schemas.fetch import FetchRequest
from schemas.seeds import CrawlRequest
from streamcrawl.state import PartitionStore
from tests.unit.frontier.simulation import Simulation

A = "https://a.example"
B = "https://b.example"
HOUR_MS = 3_600_000


class Stores:
    """The service loop's `store(partition)`, over the simulation's stores; ``held`` limits
    which partitions this instance holds."""

    def __init__(self, sim: Simulation, held: set[int] | None = None) -> None:
        self.sim = sim
        self.held = held

    def store(self, partition: int) -> PartitionStore | None:
        if self.held is not None and partition not in self.held:
            return None
        return self.sim.stores[partition]


def _lookup(sim: Simulation, held: set[int] | None = None) -> UrlLookup:
    lookup = UrlLookup(sim.partitions, sim.config, sim.directory)
    lookup.attach(Stores(sim, held))
    return lookup


def _site_crawl(tmp_path: Path, **fields: Any) -> Simulation:
    """A crawl of a.example: the seed links /ok, /flaky (503 at first), /gone (404) and /slow
    (its fetch held, so it stays leased), and an off-site page."""

    def answers(request: FetchRequest, attempt: int) -> dict[str, Any] | None:
        if request.url == f"{A}/flaky":
            return {"kind": "retryable", "status": 503, "page_sent": False}
        if request.url == f"{A}/gone":
            return {"kind": "permanent", "status": 404, "page_sent": False}
        if request.url == f"{A}/ok":
            return {"etag": '"v1"', "content_hash": "ab" * 32}
        return None

    site = {f"{A}/": ["/ok", "/flaky", "/gone", "/slow", f"{B}/elsewhere"]}
    sim = Simulation(tmp_path, partitions=3, site=site, script=answers, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id="c", seeds=[f"{A}/"], politeness_delay_ms=0, **fields))
    sim.run()
    while pending := [r for r in sim.held_fetches if r.url not in sim.attempts]:
        for request in pending:
            if request.url != f"{A}/slow":
                sim.fetch(request)
        sim.run()
        if all(r.url == f"{A}/slow" for r in pending):
            break
    return sim


def test_every_state_of_a_url_reads_back(tmp_path: Path) -> None:
    sim = _site_crawl(tmp_path, recrawl_interval_hours=2)
    lookup = _lookup(sim)
    now = sim.clock.now_ms()

    seed = lookup.status("c", f"{A}/")
    assert seed is not None
    assert (seed.admitted, seed.state, seed.depth, seed.attempts) == (True, "waiting", 0, 1)
    assert seed.waiting_for == "recrawl"
    assert seed.recrawl_interval_ms == 2 * HOUR_MS
    assert seed.due_ms is not None and now < seed.due_ms <= now + 2 * HOUR_MS
    assert seed.host == "a.example"
    assert seed.partition == sim.partition_of("a.example")

    ok = lookup.status("c", f"{A}/ok")
    assert ok is not None
    assert (ok.state, ok.last_outcome, ok.etag, ok.content_hash) == (
        "waiting",
        "200",
        '"v1"',
        "ab" * 32,
    )

    flaky = lookup.status("c", f"{A}/flaky")
    assert flaky is not None
    assert (flaky.state, flaky.waiting_for, flaky.last_outcome) == ("waiting", "retry", "503")
    assert flaky.due_ms is not None and flaky.due_ms > now
    assert flaky.recrawl_interval_ms is None

    gone = lookup.status("c", f"{A}/gone")
    assert gone is not None
    assert (gone.state, gone.last_outcome, gone.due_ms) == ("dead", "404", None)

    slow = lookup.status("c", f"{A}/slow")
    assert slow is not None
    [held] = [r for r in sim.held_fetches if r.url == f"{A}/slow"]
    assert (slow.state, slow.lease_id, slow.lease_deadline_ms) == (
        "leased",
        held.lease_id,
        held.deadline,
    )
    sim.close()


def test_a_url_waiting_for_its_retry_is_queued_again_when_due(tmp_path: Path) -> None:
    sim = _site_crawl(tmp_path)
    lookup = _lookup(sim)
    flaky = lookup.status("c", f"{A}/flaky")
    assert flaky is not None and flaky.due_ms is not None
    sim.clock.advance_ms(flaky.due_ms - sim.clock.now_ms())
    sim.tick_all()
    again = lookup.status("c", f"{A}/flaky")
    assert again is not None
    assert (again.state, again.due_ms, again.waiting_for) in {
        ("queued", None, None),
        ("leased", None, None),
    }
    sim.close()


def test_any_spelling_of_the_url_finds_it_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    sim = _site_crawl(tmp_path)
    lookup = _lookup(sim)
    status = lookup.status("c", "HTTPS://A.EXAMPLE:443/ok#top")
    assert status is not None and status.url == f"{A}/ok" and status.admitted
    with pytest.raises(ValueError, match="not a crawlable"):
        lookup.status("c", "ftp://a.example/file")
    assert lookup.status("no-such-crawl", f"{A}/ok") is None
    sim.close()


@pytest.mark.parametrize(
    ("url", "fields", "refused_by"),
    [
        (f"{B}/elsewhere", {}, "domain"),
        (f"{A}/never-linked", {}, None),
        (f"{A}/private/x", {"exclude_pattern": "/private/"}, "exclude"),
        (f"{A}/other", {"include_pattern": "/docs/"}, "include"),
        (f"{A}/" + "a/" * 40, {}, "trap_path_segments"),
    ],
)
def test_a_url_never_admitted_says_which_scope_rule_refuses_it(
    tmp_path: Path, url: str, fields: dict[str, str], refused_by: str | None
) -> None:
    sim = _site_crawl(tmp_path, **fields)
    status = _lookup(sim).status("c", url)
    assert status is not None
    assert (status.admitted, status.state, status.scope) == (False, None, refused_by)
    sim.close()


def test_a_partition_held_elsewhere_is_named(tmp_path: Path) -> None:
    sim = _site_crawl(tmp_path)
    owner = sim.partition_of("a.example")
    others = set(range(sim.partitions)) - {owner}
    with pytest.raises(PartitionNotHeldError) as raised:
        _lookup(sim, held=others).status("c", f"{A}/ok")
    assert raised.value.partition == owner
    unattached = UrlLookup(sim.partitions, sim.config, sim.directory)
    with pytest.raises(PartitionNotHeldError):
        unattached.status("c", f"{A}/ok")
    sim.close()


def test_a_finished_crawl_s_purged_state_is_said_to_be_gone(tmp_path: Path) -> None:
    sim = Simulation(tmp_path, partitions=3, site={f"{A}/": ["/ok"]})
    sim.start(CrawlRequest(crawl_id="old", seeds=[f"{A}/"], politeness_delay_ms=0))
    sim.settle(until=lambda: sim.status("old") == "done")
    lookup = _lookup(sim)
    kept = lookup.status("old", f"{A}/ok")
    assert kept is not None and (kept.state, kept.purged) == ("done", False)
    unseen = lookup.status("old", f"{A}/never-linked")
    assert unseen is not None and (unseen.admitted, unseen.purged) == (False, False)
    sim.clock.advance_ms(sim.config.finished_crawl_retention_ms + sim.config.purge_interval_ms)
    for _ in range(20):
        sim.tick_all()
    gone = lookup.status("old", f"{A}/ok")
    assert gone is not None and (gone.admitted, gone.purged) == (False, True)
    sim.close()
