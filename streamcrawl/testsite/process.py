"""A generated site served by a child process (`python -m streamcrawl.testsite`), read back here.

Same interface as the in-process :class:`~streamcrawl.testsite.server.SiteServer`: the bound site
(URLs, expected edges), every request the child recorded, the smallest gap per host. The graph is
generated here too from the same arguments, so the ground truth never crosses the process line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

from streamcrawl.children import stopped_with_this_process
from streamcrawl.testsite.graph import generate_site
from streamcrawl.testsite.pages import BoundSite
from streamcrawl.testsite.server import RequestRecord, ServedRequest, parse_request_line

START_TIMEOUT_S = 60.0


class SiteProcess(RequestRecord):
    """The site in a child process of its own; use as a context manager."""

    def __init__(
        self,
        pages: int,
        hosts: int,
        levels: int,
        seed: int,
        work_dir: Path,
        env: dict[str, str],
        nice: int = -10,
        prerender: bool = False,
    ) -> None:
        self.graph = generate_site(pages, hosts=hosts, levels=levels, seed=seed)
        self._arguments = [str(x) for x in ("--pages", pages, "--hosts", hosts)] + [
            str(x) for x in ("--levels", levels, "--seed", seed, "--nice", nice)
        ]
        if prerender:
            self._arguments.append("--prerender")
        self._work_dir = work_dir
        self._env = env
        self.log_path = work_dir / "site-requests.log"
        self._process: subprocess.Popen[str] | None = None
        self._site: BoundSite | None = None

    @property
    def site(self) -> BoundSite:
        if self._site is None:
            raise RuntimeError("the site process is not started")
        return self._site

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("the site process is not started")
        return self._process.pid

    def start(self) -> SiteProcess:
        self._work_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.write_text("")
        command = [sys.executable, "-m", "streamcrawl.testsite", *self._arguments]
        self._process = subprocess.Popen(
            stopped_with_this_process([*command, "--log", str(self.log_path)]),
            env=self._env,
            stdout=subprocess.PIPE,
            stderr=(self._work_dir / "site.err").open("ab"),
            text=True,
            start_new_session=True,
        )
        stdout: IO[str] | None = self._process.stdout
        line = stdout.readline() if stdout is not None else ""  # blocks until it serves
        if not line:
            self.stop()
            raise RuntimeError(f"the site process printed no ports; see {self._work_dir}")
        self._site = BoundSite(self.graph, [int(port) for port in json.loads(line)["ports"]])
        return self

    def __enter__(self) -> SiteProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def snapshot(self) -> list[ServedRequest]:
        text = self.log_path.read_text()
        return [parse_request_line(line) for line in text.splitlines() if line.count(" ") >= 3]

    def stop(self) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        except ProcessLookupError:
            return  # it exited between the poll and the signal
