"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import ServiceProcess


@pytest.fixture
def started() -> Iterator[list[ServiceProcess]]:
    """The service processes a test starts (it appends them); each killed at the end."""
    processes: list[ServiceProcess] = []
    yield processes
    for process in processes:
        process.kill()
