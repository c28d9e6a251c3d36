"""Fetched pages for parser tests: a FetchedPage around a body, with the fields a test sets."""

from __future__ import annotations

import hashlib
from typing import Any

from schemas.pages import FetchedPage

FETCHED_AT = 1_795_990_000_000


def fetched_page(url: str, body: bytes, **fields: Any) -> FetchedPage:
    """A 200 response for ``url`` at depth 1 (crawl ``c1``, lease ``lease-1``); fields override."""
    values: dict[str, Any] = {
        "crawl_id": "c1",
        "url": url,
        "final_url": url,
        "lease_id": "lease-1",
        "depth": 1,
        "status": 200,
        "headers": {"Content-Type": "text/html; charset=utf-8"},
        "body_size": len(body),
        "sha256": hashlib.sha256(body).hexdigest(),
        "fetched_at": FETCHED_AT,
    }
    values.update(fields)
    return FetchedPage(**values)
