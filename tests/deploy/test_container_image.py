"""The Dockerfile, .dockerignore and entrypoint: one slim non-root image with every service in it.

No Docker engine is needed: the files are read, and the entrypoint (a POSIX shell script) is run.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib

from tests.deploy.container import dockerfile_env
from tests.deploy.settings_names import check
from tests.deploy.tools import DEPLOY
from tests.support import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text()
METRICS_PORT = 9400
API_PORT = 8080
ENTRYPOINT = DEPLOY / "docker" / "entrypoint.sh"


def _packages() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    includes: list[str] = project["tool"]["setuptools"]["packages"]["find"]["include"]
    return [pattern.removesuffix("*") for pattern in includes]


def test_the_runtime_stage_is_slim_and_not_root() -> None:
    stages = re.findall(r"^FROM (\S+)", DOCKERFILE, re.MULTILINE)
    assert len(stages) == 2 and all(re.fullmatch(r"python:3\.1[1-9]-slim", s) for s in stages)
    users = re.findall(r"^USER (\S+)", DOCKERFILE, re.MULTILINE)
    assert users == ["10001"]
    assert "--uid 10001" in DOCKERFILE


def test_every_package_is_copied_and_not_ignored() -> None:
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    for package in _packages():
        assert f"COPY {package} ./{package}" in DOCKERFILE, package
        assert f"!{package}/" in ignore, package
        assert (REPO / package / "__init__.py").exists()
    assert "!deploy/docker/entrypoint.sh" in ignore
    rules = [line for line in ignore if line and not line.startswith("#")]
    assert rules[0] == "*", "the build context starts from nothing and lets the sources in"
    assert "!pyproject.toml" in rules


def test_the_environment_names_real_settings_and_the_shared_ports() -> None:
    env = dockerfile_env()
    assert env["STREAMCRAWL_HTTP__PORT"] == str(METRICS_PORT)
    assert env["STREAMCRAWL_FRONTIER__API_PORT"] == str(API_PORT)
    problems = [p for name in env if (p := check(None, name)) and not p.startswith("unchecked")]
    assert not problems
    assert f"EXPOSE {METRICS_PORT} {API_PORT}" in DOCKERFILE


def _entrypoint(env: dict[str, str], *command: str) -> str:
    completed = subprocess.run(
        ["sh", str(ENTRYPOINT), *command],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return completed.stdout


def test_the_entrypoint_binds_a_reachable_address_unless_told() -> None:
    shown = _entrypoint({}, "env")
    hosts = dict(re.findall(r"^(STREAMCRAWL_[A-Z_]+__(?:API_)?HOST)=(.*)$", shown, re.MULTILINE))
    assert set(hosts) == {
        "STREAMCRAWL_HTTP__HOST",
        "STREAMCRAWL_FRONTIER__API_HOST",
        "STREAMCRAWL_LINKGRAPH__API_HOST",
        "STREAMCRAWL_STORAGE__API_HOST",
    }
    assert [name for name in hosts if check(None, name) is not None] == []
    (address,) = set(hosts.values())
    assert not address.startswith("127."), "a loopback address is unreachable from elsewhere"
    told = _entrypoint(
        {"STREAMCRAWL_HTTP__HOST": "10.1.2.3"}, "sh", "-c", "echo $STREAMCRAWL_HTTP__HOST"
    )
    assert told.strip() == "10.1.2.3"
    assert _entrypoint({}, "sh", "-c", "echo $0 $1", "python", "-m").strip() == "python -m"
