"""`streamcrawl up` as a user runs it: ports printed, `status --json`, Ctrl-C mid-crawl, and `up`
again resuming the crawl where it stood, with the same pages in the end as the ground truth; then
`streamcrawl crawl` seeds and follows a second crawl on the same stack to its summary; a second
`up` is refused, and `up` killed outright leaves no service running.

`up` runs against the session broker (a configured bootstrap address that answers, so it starts
no broker of its own) and serves the generated site's loopback hosts with
`--allow-private-networks`. The stop is a SIGINT to `up`, as Ctrl-C sends; the services drain on
the SIGTERM `up` sends them, so nothing is fetched twice but what was in flight.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier.traps import check_traps
from streamcrawl.testsite import SiteServer, generate_site, reference_crawl
from streamcrawl.watch import CrawlWatcher
from tests.e2e.harness import FAST_TIMERS
from tests.support import Deployment, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(400)]

MAX_DEPTH = 3
DELAY_MS = 150


class UpProcess:
    """`streamcrawl up` in its own process group, its output in a file."""

    def __init__(self, env: dict[str, str], cwd: Path, log: Path, *args: str) -> None:
        self.log = log
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "streamcrawl.cli", "up", *args],
                env=env,
                cwd=cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_running(self, timeout_s: float = 150) -> None:
        wait_for(
            lambda: "running; Ctrl-C" in self.output() or self.process.poll() is not None,
            timeout_s,
            "streamcrawl up running",
        )
        assert self.process.poll() is None, self.output()

    def interrupt(self, timeout_s: float = 90) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout_s)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


@pytest.fixture
def ups() -> Iterator[list[UpProcess]]:
    started: list[UpProcess] = []
    yield started
    for up in started:
        if up.process.poll() is None:
            up.interrupt()  # an orderly stop (a SIGKILL would stop them too, without draining)


def refuses_a_second_stack_and_stops_with_a_killed_up(
    env: dict[str, str], cwd: Path, up: UpProcess
) -> None:
    """A second stack on the same broker would fence `up`'s services: refused. Then `up` killed
    outright (no Ctrl-C, no SIGTERM to pass on): its services stop by themselves."""
    data_dir = str(cwd / "kafka")
    code, out, errors = cli(env, cwd, "up", "--allow-private-networks", "--data-dir", data_dir)
    assert code == 2 and "another stack runs on" in errors, out + errors
    assert up.process.poll() is None and "restarting" not in up.output()

    ports = [int(port) for port in re.findall(r"metrics http://127\.0\.0\.1:(\d+)/", up.output())]
    assert len(ports) == 5, up.output()  # fetcher, frontier, linkgraph, parser, storage
    up.kill()
    wait_for(lambda: not any(_listening(port) for port in ports), 60, "the services' stop")


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def cli(env: dict[str, str], cwd: Path, *args: str, timeout_s: float = 120) -> tuple[int, str, str]:
    completed = subprocess.run(
        [sys.executable, "-m", "streamcrawl.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    return completed.returncode, completed.stdout, completed.stderr


def test_up_stops_on_ctrl_c_mid_crawl_and_resumes_it(
    kafka_bootstrap: str, tmp_path: Path, ups: list[UpProcess]
) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    env = {**deployment.env("cli"), **FAST_TIMERS}
    env.pop("STREAMCRAWL_INSTANCE_ID")
    graph = generate_site(120, hosts=2, levels=4, seed=3)
    with SiteServer(graph) as server:
        reference = reference_crawl(
            server.site, MAX_DEPTH, refuse=lambda url: check_traps(url) is not None
        )
        up = UpProcess(
            env,
            tmp_path,
            tmp_path / "up-1.log",
            "--allow-private-networks",
            "--scale",
            "parser=2",
            "--data-dir",
            str(tmp_path / "kafka"),
        )
        ups.append(up)
        up.wait_running()
        out = up.output()
        assert f"using the broker at {kafka_bootstrap}" in out
        for instance in ("frontier-0", "fetcher-0", "parser-0", "parser-1"):
            assert f" {instance} " in out and "metrics http://127.0.0.1:" in out, out
        assert "api http://127.0.0.1:" in out, "the frontier's crawl API address is printed"

        code, status_out, errors = cli(env, tmp_path, "status", "--json")
        status = json.loads(status_out)
        assert code == 0 and status["ok"], status_out + errors
        assert status["roles"]["parser"]["ready_instances"] == 2

        code, seeded, errors = cli(
            env,
            tmp_path,
            "seed",
            server.site.seed_url,
            "--max-depth",
            str(MAX_DEPTH),
            "--delay-ms",
            str(DELAY_MS),
            "--max-retries",
            "1",
            "--same-domain",
            "registered_domain",
        )
        assert code == 0, seeded + errors
        crawl_id = seeded.strip().splitlines()[-1]

        third = len(reference.fetched) // 3
        wait_for(lambda: len(server.page_requests()) >= third, 120, "a third of the crawl")
        assert up.interrupt() == 0
        out = up.output()
        assert "stopped: " in out and "frontier-0=0" in out and "fetcher-0=0" in out, out
        served_before = len(server.page_requests())

        with CrawlWatcher(deployment.settings("test-watch")) as watcher:
            wait_for(lambda: watcher.view(crawl_id).status is not None, 30, "crawl state read")
            assert watcher.view(crawl_id).status == "active", "stopped mid-crawl"
            assert served_before < len(reference.fetched)

            again = UpProcess(
                env,
                tmp_path,
                tmp_path / "up-2.log",
                "--allow-private-networks",
                "--data-dir",
                str(tmp_path / "kafka"),
            )
            ups.append(again)
            again.wait_running()
            deadline = time.monotonic() + 180
            while watcher.view(crawl_id).status != "done":
                assert time.monotonic() < deadline, watcher.view(crawl_id)
                time.sleep(0.2)
        served = [url for url, _ in server.page_requests()]

        # `crawl` against the running stack: seed, follow until done, summary, exit 0.
        code, crawled, errors = cli(
            env,
            tmp_path,
            "crawl",
            server.site.seed_url,
            "--max-depth",
            "1",
            "--delay-ms",
            str(DELAY_MS),
            "--same-domain",
            "registered_domain",
            timeout_s=180,
        )
        assert code == 0, crawled + errors
        assert "status: done" in crawled and "pages fetched: " in crawled, crawled
        assert len(server.page_requests()) > len(served), "the second crawl fetched its pages"

        refuses_a_second_stack_and_stops_with_a_killed_up(env, tmp_path, again)

    assert set(served) == reference.fetched
    repeats = Counter(served) - Counter(reference.attempts)
    # Only what was in flight when the services drained may be fetched again: at most the lease
    # window (2 per host) of each host.
    assert sum(repeats.values()) <= 2 * graph.hosts, repeats.most_common(5)
