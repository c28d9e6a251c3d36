"""Golden files: each ``golden/<case>.json`` names a body file, the page it came from and the
expected result of the handler (edges, page facts, sitemap entries, discovered URLs by host).

After a deliberate change, rewrite the expectations and review the diff like code:

    STREAMCRAWL_UPDATE_GOLDEN=1 python -m pytest tests/unit/parser/test_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from parser.handler import PageParser, ParseResult
from schemas.urls import DiscoveredUrls
from tests.unit.parser.pages import fetched_page

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(path.stem for path in GOLDEN.glob("*.json"))
UPDATE = os.environ.get("STREAMCRAWL_UPDATE_GOLDEN") == "1"


def observed(result: ParseResult) -> dict[str, Any]:
    """The parts of a result the golden files pin down, as plain JSON data."""
    view: dict[str, Any] = {"status": result.status, "error": result.error}
    if result.encoding is not None:
        view["encoding"] = result.encoding
    if result.extract is not None:
        extract = result.extract
        view["page"] = {
            "page_url": extract.page_url,
            "base_url": extract.base_url,
            "canonical": extract.canonical,
            "title": extract.title,
            "language": extract.language,
            "noindex": extract.robots.noindex,
            "nofollow": extract.robots.nofollow,
            "visible_text_length": extract.visible_text_length,
            "dropped": {
                "invalid_url": extract.dropped.invalid_url,
                "scheme": extract.dropped.scheme,
                "cap": extract.dropped.cap,
            },
            "duplicates": extract.duplicates,
        }
        view["edges"] = [
            {
                **link.edge.model_dump(exclude={"v", "discovered_at"}),
                "occurrences": link.occurrences,
            }
            for link in extract.links
        ]
    if result.sitemap is not None:
        sitemap = result.sitemap
        view["sitemap"] = {
            "kind": sitemap.kind,
            "entries": [[e.url, e.priority, e.is_sitemap] for e in sitemap.entries],
            "invalid_urls": sitemap.invalid_urls,
            "duplicates": sitemap.duplicates,
            "over_cap": sitemap.over_cap,
            "truncated": sitemap.truncated,
        }
    discovered: dict[str, list[Any]] = {}
    for message in result.messages:
        if isinstance(message.value, DiscoveredUrls):
            discovered.setdefault(message.key, []).extend(
                url.url if url.priority is None else [url.url, url.priority]
                for url in message.value.urls
            )
    view["discovered"] = discovered
    return view


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    spec_path = GOLDEN / f"{case}.json"
    spec = json.loads(spec_path.read_text("utf-8"))
    body = (GOLDEN / spec["body"]).read_bytes()
    page_fields = dict(spec["page"])
    page = fetched_page(page_fields.pop("url"), body, **page_fields)
    result = observed(PageParser().parse(page, body))
    if UPDATE:
        spec["expected"] = result
        spec_path.write_text(json.dumps(spec, ensure_ascii=False, indent=2) + "\n", "utf-8")
    assert spec["expected"] is not None, "no expectation yet: run with STREAMCRAWL_UPDATE_GOLDEN=1"
    assert result == spec["expected"]
