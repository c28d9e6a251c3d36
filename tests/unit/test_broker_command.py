"""The local broker's java command line (its JVM flags, and the variable that replaces them) and
its request threads."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamcrawl.broker import JVM_FLAGS_ENV, LocalBroker, server_properties


def broker(tmp_path: Path) -> LocalBroker:
    return LocalBroker(tmp_path / "kafka", 9092, 9093, tmp_path / "libs", heap="256m")


def test_default_flags_use_the_serial_collector_with_the_heap_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(JVM_FLAGS_ENV, raising=False)
    command = broker(tmp_path)._java("256m")
    assert command[1:3] == ["-Xms256m", "-Xmx256m"]
    assert "-XX:+UseSerialGC" in command and "-XX:+UseG1GC" not in command
    assert command[-2:] == ["-cp", str((tmp_path / "libs").resolve() / "*")]


def test_kafka_jvm_performance_opts_replaces_the_default_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JVM_FLAGS_ENV, "-server -XX:+UseG1GC -Dname='a b'")
    command = broker(tmp_path)._java("256m")
    assert "-XX:+UseG1GC" in command and "-Dname=a b" in command
    assert "-XX:+UseSerialGC" not in command


@pytest.mark.parametrize(
    ("cores", "io_threads", "network_threads"),
    [(1, "2", "2"), (2, "2", "2"), (4, "4", "2"), (6, "6", "3"), (64, "8", "3")],
)
def test_request_threads_follow_the_cores_up_to_kafkas_defaults(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cores: int,
    io_threads: str,
    network_threads: str,
) -> None:
    monkeypatch.setattr("streamcrawl.broker.os.cpu_count", lambda: cores)
    properties = server_properties(tmp_path, 9092, 9093)
    assert properties["num.io.threads"] == io_threads
    assert properties["num.network.threads"] == network_threads


def test_overrides_replace_the_request_threads(tmp_path: Path) -> None:
    properties = server_properties(tmp_path, 9092, 9093, {"num.io.threads": "16"})
    assert properties["num.io.threads"] == "16"
