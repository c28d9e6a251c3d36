"""The README's crawl command (`streamcrawl demo`, run by `make crawl`) end to end on the session
broker: it starts every built service, crawls the generated demo site until done, prints the
summary and stops them. The summary's URLs by last outcome must be the site's ground truth."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from frontier.traps import check_traps
from streamcrawl.demo import DEMO_HOSTS, demo_site
from streamcrawl.testsite import BoundSite, reference_crawl
from tests.support import Deployment

pytestmark = pytest.mark.kafka


def expected_by_status() -> str:
    """The demo's URLs by last outcome as the summary prints them (ports change no count)."""
    site = BoundSite(demo_site(), list(range(8001, 8001 + DEMO_HOSTS)))
    crawl = reference_crawl(site, 3, max_retries=3, refuse=lambda url: check_traps(url) is not None)
    counts = Counter(str(status) for status in crawl.statuses.values())
    counts["robots_denied"] = len(crawl.robots_denied)
    return ", ".join(f"{label}={count}" for label, count in sorted(counts.items()))


def test_demo_crawls_the_local_site_until_done(kafka_bootstrap: str, tmp_path: Path) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    env = deployment.env("cli", STREAMCRAWL_FRONTIER__RETRY_BASE_MS="100")
    env.pop("STREAMCRAWL_INSTANCE_ID")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamcrawl.cli",
            "demo",
            "--delay-ms",
            "0",
            "--timeout-s",
            "150",
            "--data-dir",
            str(tmp_path / "kafka"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    out = completed.stdout
    assert completed.returncode == 0, out + completed.stderr[-3000:]
    # librdkafka's informational lines stay off the user's terminal (`cli.CLIENT_LOG_LEVEL`).
    assert "%6|" not in completed.stderr and "%6|" not in out, completed.stderr[-3000:]
    assert f"using the broker at {kafka_bootstrap}" in out
    assert "status: done" in out
    assert f"URLs by last outcome: {expected_by_status()}\n" in out, out
    assert "metrics http://127.0.0.1:" in out and "api http://" in out, "ports are printed"
    assert "link graph not running" in out or "top pages by PageRank" in out
    assert "storage not running" in out or "WARC files:" in out
