"""Base models: strict for what users send, lenient for what services send each other.

Inbound user messages (crawl requests, commands) reject unknown fields so a typo is an error, not a
silently ignored option. Internal messages ignore unknown fields so that during a rolling upgrade an
old consumer reads a newer producer's records instead of dead-lettering them. Every value carries
`v`, its schema version; a consumer refuses versions newer than it knows only when the change is
breaking, which we mark by bumping the major number here.
"""

from __future__ import annotations

import time
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1

EpochMillis = Annotated[int, Field(ge=0, le=2**53)]
"""Wall-clock time in milliseconds since the epoch (UTC): compact, exact and easy to compare."""


def now_millis() -> int:
    return time.time_ns() // 1_000_000


class InboundModel(BaseModel):
    """A message a user (CLI, API, a script) writes: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_max_length=1_000_000)

    v: Annotated[int, Field(ge=1, le=SCHEMA_VERSION)] = SCHEMA_VERSION


class InternalModel(BaseModel):
    """A message one service writes for another: unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    v: Annotated[int, Field(ge=1)] = SCHEMA_VERSION
