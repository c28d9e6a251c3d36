"""The `archive` fixture: a storage handler over real files and a real RocksDB partition."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.unit.storage.archive import Archive


@pytest.fixture(params=["inline", "parallel"])
def archive(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Archive]:
    """The handler with each blob written inline, and handed to a second thread."""
    with ThreadPoolExecutor(max_workers=1) as executor:
        built = Archive(
            tmp_path / "root",
            tmp_path / "state",
            executor=executor if request.param == "parallel" else None,
        )
        yield built
        built.close()
