"""The Prometheus binaries the deploy tests run: Debian's `prometheus` package (see .ci/run)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support import REPO

DEPLOY = REPO / "deploy"
PROMETHEUS_DIR = DEPLOY / "prometheus"
GRAFANA_DIR = DEPLOY / "grafana"


def binary(name: str) -> str:
    """The path of `name`; a missing binary fails the test (CI installs it), never skips it."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: install Debian's `prometheus` package (.ci/run does)")
    return path


def promtool(*args: str | Path, cwd: Path = PROMETHEUS_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary("promtool"), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def load_yaml(path: Path) -> object:
    with path.open() as stream:
        return yaml.safe_load(stream)


def load_yaml_documents(path: Path) -> list[object]:
    with path.open() as stream:
        return [document for document in yaml.safe_load_all(stream) if document is not None]
