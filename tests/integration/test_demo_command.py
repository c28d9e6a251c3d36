"""The README's crawl command (`streamcrawl demo`, run by `make crawl`) end to end on the session
broker: it starts every built service, crawls the local demo site until done, and stops them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import Deployment

pytestmark = pytest.mark.kafka


def test_demo_crawls_the_local_site_until_done(kafka_bootstrap: str, tmp_path: Path) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    env = deployment.env("cli")
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
    assert f"using the broker at {kafka_bootstrap}" in out
    assert "status: done" in out
    fetched = int(out.split("pages fetched: ")[1].split()[0])
    assert fetched == 36  # the demo site's pages reachable within depth 3, robots.txt obeyed
    assert "redirects: 1" in out
