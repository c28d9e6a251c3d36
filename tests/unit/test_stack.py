"""What `streamcrawl up` hands each service process: ids, the private-network switch, scale."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from fetcher.service import FetcherServiceSettings
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.stack import PRIVATE_NETWORKS, ROLES, Stack
from streamcrawl.up_cli import _parse_scale


def fetcher_allows_loopback(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> bool:
    """What the fetcher's own settings make of `env`: may it connect to 127.0.0.1?"""
    for name, value in env.items():
        if name.startswith("STREAMCRAWL_"):
            monkeypatch.setenv(name, value)
    policy = FetcherServiceSettings().fetcher.address_policy()
    return policy.is_allowed(ipaddress.ip_address("127.0.0.1"))


def test_private_networks_reach_the_fetchers_only_when_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STREAMCRAWL_FETCHER__ALLOWED_NETWORKS", raising=False)
    stack = Stack({"STREAMCRAWL_KAFKA__TOPIC_PREFIX": "x."}, tmp_path)
    stack.allow_private_networks(False)
    assert not fetcher_allows_loopback(stack.instance_env("fetcher", 0, {}), monkeypatch)
    stack.allow_private_networks(True)
    env = stack.instance_env("fetcher", 1, {})
    assert json.loads(env["STREAMCRAWL_FETCHER__ALLOWED_NETWORKS"]) == json.loads(PRIVATE_NETWORKS)
    assert fetcher_allows_loopback(env, monkeypatch)
    assert "STREAMCRAWL_FETCHER__ALLOWED_NETWORKS" not in stack.instance_env("parser", 0, {})


def test_instances_keep_stable_ids_and_one_frontier_keeps_the_api_port(tmp_path: Path) -> None:
    stack = Stack({}, tmp_path)
    assert stack.instance_env("fetcher", 2, {})["STREAMCRAWL_INSTANCE_ID"] == "fetcher-2"
    assert "STREAMCRAWL_FRONTIER__API_PORT" not in stack.instance_env("frontier", 0, {})
    assert stack.instance_env("frontier", 1, {})["STREAMCRAWL_FRONTIER__API_PORT"] == "0"
    assert (
        stack.instance_env("parser", 0, {"STREAMCRAWL_CRASH_AT": "x"})["STREAMCRAWL_CRASH_AT"]
        == "x"
    )


def test_a_restart_runs_with_the_environment_the_instance_last_had(tmp_path: Path) -> None:
    """A supervisor's restart brings back the process that exited: a crash point cleared by an
    earlier restart stays cleared. The processes are real, a stand-in `parser` module that exits
    with an error at once."""
    stand_in = tmp_path / "parser"
    stand_in.mkdir()
    (stand_in / "__init__.py").write_text("")  # a regular package: found in the cwd first
    (stand_in / "__main__.py").write_text("print('stand-in', flush=True)\nraise SystemExit(1)\n")
    stack = Stack(
        {}, tmp_path / "logs", role_env={"parser": {"STREAMCRAWL_CRASH_AT": "x:1"}}, cwd=tmp_path
    )
    stack.start({role: 0 for role in ROLES} | {"parser": 1}, allow_private_networks=False)
    try:
        assert stack.instance("parser-0").process.wait(30) == 1
        stack.restart("parser-0", {"STREAMCRAWL_CRASH_AT": "", "EXTRA": "1"})
        assert stack.instance("parser-0").process.wait(30) == 1
        assert stack.restart_failed() == ["parser-0"]
        env = stack.instance("parser-0").env
        assert (env["STREAMCRAWL_CRASH_AT"], env["EXTRA"]) == ("", "1")
        assert env["STREAMCRAWL_INSTANCE_ID"] == "parser-0"
        assert len(stack.instances) == 3
        assert stack.instance("parser-0").process.wait(30) == 1
        assert stack.instance("parser-0").log_tail().count("stand-in") == 3  # not the real one
    finally:
        stack.stop(10)


def test_scale_takes_role_equals_count() -> None:
    assert _parse_scale("fetcher=3") == ("fetcher", 3)
    for bad in ("fetcher", "crawler=2", "parser=0", "parser=two"):
        with pytest.raises(StreamcrawlError):
            _parse_scale(bad)
