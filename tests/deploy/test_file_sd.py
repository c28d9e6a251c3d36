"""deploy/prometheus/file_sd.py's pure parts; test_observed_crawl runs the tool on a real stack."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from schemas.members import Member
from tests.deploy.tools import PROMETHEUS_DIR


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("file_sd", PROMETHEUS_DIR / "file_sd.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _member(role: str, instance: str, address: str, ready: bool = True) -> Member:
    return Member(
        role=role,
        instance=instance,
        http_address=address,
        partitions=[],
        ready=ready,
        updated_at=0,
        heartbeat_ms=5000,
    )


def test_one_group_per_stage_instance_with_the_alerts_job_names() -> None:
    groups = _tool().target_groups(
        [
            _member("parser", "parser-1", "127.0.0.1:4002"),
            _member("fetcher", "fetcher-0", "127.0.0.1:4001", ready=False),
            _member("ranker", "linkgraph-0", "127.0.0.1:5000"),  # an API, not a side server
            _member("parser", "parser-0", "127.0.0.1:4003"),
        ]
    )
    assert groups == [
        {
            "targets": ["127.0.0.1:4001"],
            "labels": {"job": "streamcrawl-fetcher", "instance": "fetcher-0"},
        },
        {
            "targets": ["127.0.0.1:4003"],
            "labels": {"job": "streamcrawl-parser", "instance": "parser-0"},
        },
        {
            "targets": ["127.0.0.1:4002"],
            "labels": {"job": "streamcrawl-parser", "instance": "parser-1"},
        },
    ]


def test_the_file_is_replaced_only_on_change(tmp_path: Path) -> None:
    tool, path = _tool(), tmp_path / "targets.json"
    groups = tool.target_groups([_member("storage", "storage-0", "10.0.0.5:9400")])
    assert tool.write_if_changed(path, groups) is True
    assert json.loads(path.read_text()) == groups
    assert tool.write_if_changed(path, groups) is False
    assert tool.write_if_changed(path, []) is True
    assert json.loads(path.read_text()) == []
    assert [p.name for p in tmp_path.iterdir()] == ["targets.json"]
