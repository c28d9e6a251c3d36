"""What a service is to the kernel: its role, inputs (topic and decoder), state tables, changelog
and how its partitions are assigned. Built by `streamcrawl.service.service_spec` from settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Decoder = Callable[[bytes | None], Any]
KeyedDecoder = Callable[[bytes | None, bytes | None], Any]
"""A decoder of the value and the key (`Input.keyed`)."""


@dataclass(frozen=True)
class Input:
    topic: str
    decode: Decoder | KeyedDecoder
    keyed: bool = False
    """`decode` is a `KeyedDecoder`: the value leaves to the key what the key holds already (an
    in-link's ends), so it is decoded with it."""


@dataclass(frozen=True)
class ServiceSpec:
    """What a service consumes and keeps; validated so misuse fails at start, not mid-crawl."""

    role: str
    group_id: str
    inputs: tuple[Input, ...]
    dead_letter_topic: str
    tables: tuple[str, ...] = ()
    changelog_topic: str | None = None
    co_partitioned: bool = False
    assignor_override: str | None = None
    """A librdkafka `partition.assignment.strategy`; by default range when co-partitioned (so
    every input's partition p goes to the same member), cooperative-sticky otherwise."""

    def __post_init__(self) -> None:
        if not self.inputs:
            raise ValueError("a service needs at least one input topic")
        if self.tables and self.changelog_topic is None:
            raise ValueError("a service with state tables needs a changelog topic")
        if self.tables and len(self.inputs) > 1 and not self.co_partitioned:
            raise ValueError("state over several inputs requires co-partitioned inputs")
        if self.co_partitioned and self.assignor_override not in (None, "range"):
            raise ValueError("co-partitioned inputs need the range assignor")

    @property
    def stateful(self) -> bool:
        return bool(self.tables)

    @property
    def assignor(self) -> str:
        if self.assignor_override is not None:
            return self.assignor_override
        return "range" if self.co_partitioned else "cooperative-sticky"
