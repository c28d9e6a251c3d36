"""The local broker's java command line: Kafka's JVM flags, and the variable that replaces them."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamcrawl.broker import JVM_FLAGS_ENV, LocalBroker


def broker(tmp_path: Path) -> LocalBroker:
    return LocalBroker(tmp_path / "kafka", 9092, 9093, tmp_path / "libs", heap="256m")


def test_default_flags_are_kafkas_with_the_heap_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(JVM_FLAGS_ENV, raising=False)
    command = broker(tmp_path)._java("256m")
    assert command[1:3] == ["-Xms256m", "-Xmx256m"]
    assert "-XX:+UseG1GC" in command and "-XX:MaxGCPauseMillis=20" in command
    assert command[-2:] == ["-cp", str((tmp_path / "libs").resolve() / "*")]


def test_kafka_jvm_performance_opts_replaces_the_default_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JVM_FLAGS_ENV, "-server -XX:+UseSerialGC -Dname='a b'")
    command = broker(tmp_path)._java("256m")
    assert "-XX:+UseSerialGC" in command and "-Dname=a b" in command
    assert "-XX:+UseG1GC" not in command and "-XX:MaxGCPauseMillis=20" not in command
