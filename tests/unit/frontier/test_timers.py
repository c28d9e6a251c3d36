"""The tick's timer tables: a tick with nothing due scans neither, and nothing due is missed.

The progress interval is set far beyond each test's clock, so the periodic forgetting of the due
bounds (`PartitionMemory.next_due_ms`) cannot stand in for the writers that keep them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from frontier.config import FrontierConfig
from frontier.records import DEADLINES, DELAYED
from frontier.session import NOTHING_DUE
from schemas.fetch import FetchRequest
from schemas.seeds import CrawlRequest
from tests.unit.frontier.simulation import Simulation

A = "https://a.example"
HOUR_MS = 3_600_000


def test_a_lease_taken_after_the_deadlines_were_scanned_still_expires(tmp_path: Path) -> None:
    config = FrontierConfig(lease_timeout_ms=2_000, progress_interval_ms=HOUR_MS)
    sim = Simulation(tmp_path, site={}, config=config, auto_fetch=False)
    sim.start(CrawlRequest(crawl_id="e", seeds=[f"{A}/slow"]))
    sim.run()
    assert len(sim.held_fetches) == 1
    memory = sim.handlers[sim.partition_of("a.example")].memory[sim.partition_of("a.example")]
    deadline = memory.next_due_ms[DEADLINES]
    assert deadline < NOTHING_DUE  # the lease lowered the bound its tick's scan had set
    sim.clock.advance_ms(1_000)
    sim.tick_all()
    assert len(sim.held_fetches) == 1 and sim.total("e", "expired") == 0
    sim.clock.advance_ms(1_500)
    sim.tick_all()
    sim.run()
    assert sim.total("e", "expired") == 1
    assert len(sim.held_fetches) == 2  # queued again and leased again
    sim.close()


def test_a_retry_added_after_the_delayed_table_was_scanned_comes_back_when_due(
    tmp_path: Path,
) -> None:
    def once(request: FetchRequest, attempt: int) -> dict[str, Any] | None:
        if attempt == 1:
            return {"kind": "retryable", "status": 503, "page_sent": False}
        return None

    config = FrontierConfig(retry_base_ms=100, retry_cap_ms=200, progress_interval_ms=HOUR_MS)
    sim = Simulation(tmp_path, site={}, config=config, script=once)
    sim.start(CrawlRequest(crawl_id="r", seeds=[f"{A}/flaky"], politeness_delay_ms=0))
    sim.run()
    assert len(sim.fetches) == 1 and sim.total("r", "delayed") == 1
    memory = sim.handlers[sim.partition_of("a.example")].memory[sim.partition_of("a.example")]
    assert memory.next_due_ms[DELAYED] <= sim.clock.now_ms() + 200
    sim.clock.advance_ms(250)
    sim.tick_all()
    sim.run()
    assert len(sim.fetches) == 2
    assert sim.total("r", "fetched") == 1 and sim.total("r", "delayed") == 0
    assert memory.next_due_ms[DELAYED] == NOTHING_DUE  # scanned to the end: nothing left
    sim.close()
