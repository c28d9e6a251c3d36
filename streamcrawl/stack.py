"""Running the whole stack on one machine: one process per service instance, stopped together.

`streamcrawl up` and the demo use it. Each instance is `python -m ROLE` in its own process group
with its own instance id (static membership, state directory) and its output in a log file; a
stop sends SIGTERM (the services drain and exit 0) and SIGKILLs what is left after the deadline.
A role whose service is not built yet exits at once with `NOT_BUILT_EXIT`, which the stack reports
as such rather than as a failure. The kernel imports no service: it only starts processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROLES = ("frontier", "fetcher", "parser", "linkgraph", "storage")
NOT_BUILT_EXIT = 3
"""Exit status of a service package that is still only a room (see its `service.py`)."""


@dataclass
class Instance:
    role: str
    instance_id: str
    process: subprocess.Popen[bytes]
    log_path: Path


@dataclass
class Stack:
    """The processes of one local deployment."""

    env: dict[str, str]
    log_dir: Path
    instances: list[Instance] = field(default_factory=list)

    def start(self, scale: dict[str, int], allow_private_networks: bool) -> None:
        """Start every role `scale[role]` times (default 1)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for role in ROLES:
            for number in range(scale.get(role, 1)):
                self.instances.append(self._spawn(role, number, allow_private_networks))

    def not_built(self) -> list[str]:
        """Roles whose instances exited saying their service is not built yet."""
        return sorted({i.role for i in self.instances if i.process.poll() == NOT_BUILT_EXIT})

    def _spawn(self, role: str, number: int, allow_private_networks: bool) -> Instance:
        instance_id = f"{role}-{number}"
        env = {**self.env, "STREAMCRAWL_INSTANCE_ID": instance_id}
        if role == "frontier" and number > 0:
            env["STREAMCRAWL_FRONTIER__API_PORT"] = "0"  # the first frontier keeps the default
        if allow_private_networks and role == "fetcher":
            env["STREAMCRAWL_FETCHER__ALLOWED_NETWORKS"] = (
                '["127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "::1/128"]'
            )
        log_path = self.log_dir / f"{instance_id}.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", role],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return Instance(role, instance_id, process, log_path)

    def failed(self) -> list[Instance]:
        return [i for i in self.instances if i.process.poll() not in (None, 0, NOT_BUILT_EXIT)]

    def stop(self, timeout_s: float = 40.0) -> dict[str, int | None]:
        """SIGTERM every instance, wait for the drains, SIGKILL stragglers; exit codes by id."""
        for instance in self.instances:
            _signal(instance.process, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for instance in self.instances:
            try:
                instance.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal(instance.process, signal.SIGKILL)
                instance.process.wait(10)
        return {i.instance_id: i.process.returncode for i in self.instances}


def _signal(process: subprocess.Popen[bytes], signum: int) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return  # it exited between the poll and the signal


def stack_env(overrides: dict[str, str]) -> dict[str, str]:
    """This process's environment (settings included) plus overrides, for the children."""
    return {**os.environ, **overrides}
