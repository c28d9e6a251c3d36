"""Storage tunables, read from `STREAMCRAWL_STORAGE__*` (e.g. `STREAMCRAWL_STORAGE__ROOT`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from streamcrawl.settings import Settings

MIB = 1024 * 1024


class StorageSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    root: Path = Path(".streamcrawl/storage")
    """Shared by every storage instance (a shared volume); everything recorded is relative to it."""
    warc_max_bytes: Annotated[int, Field(ge=4096)] = 1000 * MIB
    """A WARC file is closed and a new one begun before it would grow past this size."""
    warc_gzip_level: Annotated[int, Field(ge=0, le=3)] = 1
    """ISA-L deflate level of each WARC record's gzip member (0 fastest, 3 smallest)."""
    blob_zstd_level: Annotated[int, Field(ge=1, le=22)] = 3
    fsync: bool = False
    """fsync blobs before their rename and WARC files after each record. Off by default: a killed
    process loses nothing either way (the page cache survives it); this guards a power loss."""
    parallel_compression: bool = True
    """Compress and write each new body's blob on a second thread while this one goes on with the
    WARC records of the cycle's pages; the cycle's blobs are on disk before it commits."""
    history_limit: Annotated[int, Field(ge=1)] = 64
    """Distinct versions kept per URL in the index; the oldest entries go first."""
    max_open_warcs: Annotated[int, Field(ge=1)] = 16
    """WARC files (one per active crawl) this instance keeps open at once."""
    api_enabled: bool = True
    api_host: str = "127.0.0.1"
    api_port: Annotated[int, Field(ge=0, le=65535)] = 0
    """0 picks any free port; the address is published in `members` as `api_address`."""


class StorageServiceSettings(Settings):
    storage: StorageSettings = StorageSettings()
