"""Configuration: one frozen pydantic-settings model per concern, read from `STREAMCRAWL_*`.

Nested fields use `__` (e.g. `STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS`). Any librdkafka property
passes through untouched in `kafka.config` (a JSON object in `STREAMCRAWL_KAFKA__CONFIG`):
security.protocol, sasl.*, ssl.* and the rest. Values whose names look secret are held as
`SecretStr` and are never logged; `KafkaSettings.librdkafka()` is the one place they are revealed.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

_SECRET_MARKERS = (
    "password",
    "passphrase",
    "secret",
    "sasl.oauthbearer.config",
    "key.pem",
    "token",
)
"""Substrings of librdkafka property names whose values are credentials or private keys."""


def default_instance_id() -> str:
    """An instance without `STREAMCRAWL_INSTANCE_ID`: host and pid, new at every start."""
    return f"{socket.gethostname()}-{os.getpid()}"


def _is_secret(name: str) -> bool:
    lowered = name.lower()
    return any(marker in lowered for marker in _SECRET_MARKERS)


class KafkaSettings(BaseModel):
    """How to reach the cluster; `config` is passed to librdkafka as given."""

    model_config = ConfigDict(frozen=True, hide_input_in_errors=True)

    bootstrap_servers: str = "127.0.0.1:9092"
    config: dict[str, str | SecretStr] = Field(default_factory=dict)
    topic_prefix: str = "crawl."
    partitions: int = Field(default=6, ge=1, le=10_000)
    replication_factor: int = Field(default=1, ge=1, le=16)

    @field_validator("config", mode="before")
    @classmethod
    def _wrap_secrets(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {
            str(k): SecretStr(str(v))
            if _is_secret(str(k)) and not isinstance(v, SecretStr)
            else str(v)
            if not isinstance(v, SecretStr)
            else v
            for k, v in value.items()
        }

    def librdkafka(self) -> dict[str, str]:
        """The client configuration with secrets revealed: pass it to librdkafka, never log it."""
        rendered = {"bootstrap.servers": self.bootstrap_servers}
        for key, value in self.config.items():
            rendered[key] = value.get_secret_value() if isinstance(value, SecretStr) else value
        return rendered

    def redacted(self) -> dict[str, str]:
        """The client configuration safe to log."""
        rendered = {"bootstrap.servers": self.bootstrap_servers}
        for key, value in self.config.items():
            rendered[key] = "**********" if isinstance(value, SecretStr) else value
        return rendered


class StateSettings(BaseModel):
    """Where per-partition RocksDB stores live and how much memory they may take."""

    model_config = ConfigDict(frozen=True)

    directory: Path = Path(".streamcrawl/state")
    block_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=1024 * 1024)
    write_buffer_bytes: int = Field(default=16 * 1024 * 1024, ge=64 * 1024)
    """One table's memtable: a larger one flushes less often, into fewer level-0 files, so
    compaction rewrites less (`memtable_budget_bytes` bounds them all together)."""
    max_write_buffers: int = Field(default=2, ge=1)
    target_file_bytes: int = Field(default=16 * 1024 * 1024, ge=1024 * 1024)
    """The size a compaction cuts its output into. A compaction holds the filter hashes and
    index of the file it is writing until that file is finished: with RocksDB's 64 MiB default,
    17 MiB of them at the peak of a frontier holding 5 M URLs (heaptrack), growing with the
    store until its files reach that size; with 16 MiB files, a quarter of it."""
    memtable_budget_bytes: int = Field(default=64 * 1024 * 1024, ge=1024 * 1024)
    """All memtables of a process, every table of every store: past it RocksDB flushes the
    table being written, so memory does not grow with the number of partitions or tables."""


class LoopSettings(BaseModel):
    """The service loop's batching, backpressure and shutdown bounds."""

    model_config = ConfigDict(frozen=True)

    batch_size: int = Field(default=500, ge=1, le=100_000)
    poll_timeout_s: float = Field(default=0.2, gt=0, le=10)
    """How long a cycle waits for its first record when nothing else is due."""
    deferred_poll_s: float = Field(default=0.005, gt=0, le=1)
    """The slice of that wait after which a cycle looks for finished deferred work."""
    max_uncommitted_per_partition: int = Field(default=500, ge=1)
    commit_interval_s: float = Field(default=0.1, gt=0)
    """How often a stateless service commits (stateful ones commit every cycle, before state).
    Short, because what a fetcher finished but had not committed is fetched again after a fault."""
    delivery_timeout_s: float = Field(default=60.0, gt=0)
    session_timeout_ms: int = Field(default=45_000, ge=1000)
    heartbeat_interval_ms: int = Field(default=3_000, ge=100)
    shutdown_timeout_s: float = Field(default=30.0, gt=0)
    revoke_wait_s: float = Field(default=5.0, ge=0)
    """On a rebalance, how long a revoked partition's work in flight (the fetcher's requests) may
    finish and be committed before the partition goes: what finishes in time is not done again
    by its next owner. The group's rebalance waits this long at most."""
    rejoin_timeout_s: float = Field(default=90.0, gt=0)
    """How long a consumer that lost its partitions may take to rejoin before the service exits
    (a supervisor restarts it with a fresh client)."""
    static_membership: bool = True
    """`group.instance.id` per instance, so a restart keeps its partitions without a rebalance.
    Only under an instance id that was given (`Settings.static_member`). The price: an instance
    stopped for good (scaled in) leaves its partitions unserved for `session_timeout_ms`, as a
    static member never leaves its group; turn it off where instances come and go (the fetchers
    and parsers of a Kubernetes Deployment)."""


class HttpSettings(BaseModel):
    """The side server with /metrics, /healthz and /readyz."""

    model_config = ConfigDict(frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)


class Settings(BaseSettings):
    """Everything a service needs to start; built once in `__main__` and passed down."""

    # hide_input_in_errors: a malformed `kafka.config` would otherwise echo its passwords.
    model_config = SettingsConfigDict(
        env_prefix="STREAMCRAWL_",
        env_nested_delimiter="__",
        frozen=True,
        extra="ignore",
        hide_input_in_errors=True,
    )

    kafka: KafkaSettings = KafkaSettings()
    state: StateSettings = StateSettings()
    loop: LoopSettings = LoopSettings()
    http: HttpSettings = HttpSettings()
    instance_id: str = Field(default_factory=default_instance_id)
    log_level: str = "INFO"
    crash_at: str | None = None
    """Name of a crash point (`streamcrawl.crashpoints`) at which the process dies; tests only."""

    @property
    def static_member(self) -> bool:
        """Whether the consumers join their groups as static members: with `static_membership`
        and an instance id that was given (STREAMCRAWL_INSTANCE_ID), which a restart keeps. The
        default id (host-pid) is new at every start, so a static member under it would keep
        the partitions of a stopped process unserved for a session timeout and give nothing
        back; without one, a stopping instance leaves its groups and its partitions move at
        once."""
        return self.loop.static_membership and "instance_id" in self.model_fields_set
