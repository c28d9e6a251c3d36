"""Running the whole stack on one machine: one process per service instance, stopped together.

`streamcrawl up`, the demo and the end-to-end tests use it. Each instance is `python -m ROLE` in
its own process group with a stable instance id (`fetcher-0`, `fetcher-1`: static membership and
the state directory, so a stack stopped and started again resumes where it stood) and its output
in a log file. A stop sends SIGTERM (the services drain and exit 0) and SIGKILLs what is left
after the deadline. A role whose service is not built yet exits at once with `NOT_BUILT_EXIT`,
which the stack reports as such rather than as a failure. Tests kill and restart single
instances (`kill`, `restart`), with crash points in their environment. The kernel imports no
service: it only starts processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from streamcrawl.children import stopped_with_this_process
from streamcrawl.exceptions import StreamcrawlError

ROLES = ("frontier", "fetcher", "parser", "linkgraph", "storage")
NOT_BUILT_EXIT = 3
"""Exit status of a service package that is still only a room (see its `service.py`)."""
PRIVATE_NETWORKS = '["127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "::1/128"]'
"""What `--allow-private-networks` lets the fetchers reach (loopback and RFC 1918)."""


@dataclass
class Instance:
    role: str
    number: int
    process: subprocess.Popen[bytes]
    log_path: Path
    env: dict[str, str]

    @property
    def instance_id(self) -> str:
        return f"{self.role}-{self.number}"

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Stack:
    """The processes of one local deployment."""

    env: dict[str, str]
    log_dir: Path
    instances: list[Instance] = field(default_factory=list)
    role_env: dict[str, dict[str, str]] = field(default_factory=dict)
    """Extra environment per role, on top of `env` (tests: crash points, short timers)."""
    cwd: Path | None = None

    def start(self, scale: Mapping[str, int], allow_private_networks: bool) -> None:
        """Start every role `scale[role]` times (default 1)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.allow_private_networks(allow_private_networks)
        for role in ROLES:
            for number in range(scale.get(role, 1)):
                self.instances.append(self._spawn(role, number, {}))

    def allow_private_networks(self, allowed: bool) -> None:
        """Let the fetchers reach loopback and private addresses, or (default) refuse them."""
        fetcher = self.role_env.setdefault("fetcher", {})
        if allowed:
            fetcher.setdefault("STREAMCRAWL_FETCHER__ALLOWED_NETWORKS", PRIVATE_NETWORKS)
        elif self.env.get("STREAMCRAWL_FETCHER__ALLOWED_NETWORKS") is None:
            fetcher.pop("STREAMCRAWL_FETCHER__ALLOWED_NETWORKS", None)

    def instance(self, instance_id: str) -> Instance:
        """The latest process started under `instance_id`."""
        for instance in reversed(self.instances):
            if instance.instance_id == instance_id:
                return instance
        raise StreamcrawlError(f"no instance {instance_id} in this stack")

    def live(self, role: str | None = None) -> list[Instance]:
        """The latest process of every instance id (of one role), running or not."""
        latest: dict[str, Instance] = {}
        for instance in self.instances:
            if role is None or instance.role == role:
                latest[instance.instance_id] = instance
        return list(latest.values())

    def not_built(self) -> list[str]:
        """Roles whose instances exited saying their service is not built yet."""
        return sorted({i.role for i in self.live() if i.process.poll() == NOT_BUILT_EXIT})

    def failed(self) -> list[Instance]:
        return [i for i in self.live() if i.process.poll() not in (None, 0, NOT_BUILT_EXIT)]

    def kill(self, instance_id: str) -> int | None:
        """SIGKILL one instance (a crash) and wait for it; returns its exit status."""
        instance = self.instance(instance_id)
        _signal(instance.process, signal.SIGKILL)
        return instance.process.wait(30)

    def restart(self, instance_id: str, extra_env: Mapping[str, str] | None = None) -> Instance:
        """Start `instance_id` again (it must have exited): same id, same state directory, and
        the environment it last ran with, updated by `extra_env`. So a supervisor's restart
        brings back the process that exited, and a setting a test changed once (a crash point
        cleared) stays changed."""
        old = self.instance(instance_id)
        if old.running:
            raise StreamcrawlError(f"{instance_id} is still running")
        instance = self._launch(old.role, old.number, {**old.env, **(extra_env or {})})
        self.instances.append(instance)
        return instance

    def restart_failed(self) -> list[str]:
        """Start again every instance that exited with an error (a supervisor's one step)."""
        restarted = []
        for instance in self.failed():
            self.restart(instance.instance_id)
            restarted.append(instance.instance_id)
        return restarted

    def instance_env(self, role: str, number: int, extra_env: Mapping[str, str]) -> dict[str, str]:
        """The environment instance `number` of `role` runs with."""
        env = {**self.env, **self.role_env.get(role, {}), **extra_env}
        env["STREAMCRAWL_INSTANCE_ID"] = f"{role}-{number}"
        if role == "frontier" and number > 0:
            env["STREAMCRAWL_FRONTIER__API_PORT"] = "0"  # the first frontier keeps the default
        return env

    def _spawn(self, role: str, number: int, extra_env: dict[str, str]) -> Instance:
        return self._launch(role, number, self.instance_env(role, number, extra_env))

    def _launch(self, role: str, number: int, env: dict[str, str]) -> Instance:
        log_path = self.log_dir / f"{role}-{number}.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                stopped_with_this_process([sys.executable, "-m", role]),
                env=env,
                cwd=self.cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return Instance(role, number, process, log_path, env)

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
        return {i.instance_id: i.process.returncode for i in self.live()}


def _signal(process: subprocess.Popen[bytes], signum: int) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return  # it exited between the poll and the signal


def stack_env(overrides: dict[str, str]) -> dict[str, str]:
    """This process's environment (settings included) plus overrides, for the children."""
    return {**os.environ, **overrides}
