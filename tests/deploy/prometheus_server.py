"""A real Prometheus server for a test: Debian's binary in the foreground on 127.0.0.1.

It runs on a free port with its data in a temporary directory, writes its log to a file, answers
the HTTP API the dashboards use (instant and range queries, label values, targets, rules), and is
stopped by the test with SIGTERM (SIGKILL after a deadline).
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from streamcrawl.children import stopped_with_this_process
from tests.deploy.tools import binary

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


class PrometheusError(RuntimeError):
    """Prometheus refused a query or did not start."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PrometheusServer:
    def __init__(self, root: Path, config: dict[str, Any]) -> None:
        self.root = root
        self.config_path = root / "prometheus.yml"
        self.log_path = root / "prometheus.log"
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> PrometheusServer:
        for _ in range(3):  # the free port can be taken between the probe and the bind
            port = free_port()
            self.url = f"http://127.0.0.1:{port}"
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    stopped_with_this_process(
                        [
                            binary("prometheus"),
                            f"--config.file={self.config_path}",
                            f"--storage.tsdb.path={self.root / 'data'}",
                            f"--web.listen-address=127.0.0.1:{port}",
                            "--storage.tsdb.retention.time=1h",
                        ]
                    ),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            if self._wait_ready():
                return self
        raise PrometheusError(f"prometheus did not start; log:\n{self.log_tail()}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError):
                pass  # not listening yet
            time.sleep(0.1)
        return False

    def stop(self) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode

    def api(self, path: str, **params: str | float) -> Any:
        """GET /api/v1/PATH; returns `data`, or raises with Prometheus's error."""
        query = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=30) as reply:
                body = json.load(reply)
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            raise PrometheusError(f"{path} {params}: {detail}") from error
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body}")
        return body["data"]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Any]:
        data = self.api("query_range", query=expr, start=start, end=end, step=step)
        result: list[Any] = data["result"]
        return result

    def targets(self) -> list[dict[str, Any]]:
        active: list[dict[str, Any]] = self.api("targets")["activeTargets"]
        return active

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
