"""JSON Feed (jsonfeed.org, versions 1 and 1.1), read as the XML feeds are (`parser.sitemaps`).

An item's page is its ``url`` (its permalink), else its ``external_url``; its time is
``date_modified``, else ``date_published`` (RFC 3339), so a recrawling crawl fetches again at once
an article the feed says was updated. URLs resolve against the feed's URL and are canonicalised;
items without one, with an invalid one, past ``max_urls`` or repeated are counted as a sitemap's
are. A body that is not a JSON object with a jsonfeed.org ``version`` and an ``items`` list is
reported as not a feed.
"""

from __future__ import annotations

import json
from typing import Any

from parser.sitemaps import MAX_URLS, Sitemap, SitemapEntry, lastmod_ms
from schemas.canonical import canonical_url

JSON_FEED_VERSION = "https://jsonfeed.org/version/"


def looks_like_json_feed(head: bytes) -> bool:
    """Whether the first bytes of a body name the JSON Feed version (it comes first by custom)."""
    return head.lstrip()[:1] == b"{" and JSON_FEED_VERSION.encode() in head


def parse_json_feed(body: bytes, feed_url: str, *, max_urls: int = MAX_URLS) -> Sitemap:
    """The feed's items as sitemap entries; never raises on bad input."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as error:
        return Sitemap("unknown", [], error=f"not JSON: {error}")
    version = document.get("version") if isinstance(document, dict) else None
    items = document.get("items") if isinstance(document, dict) else None
    if not isinstance(version, str) or not version.startswith(JSON_FEED_VERSION):
        return Sitemap("unknown", [], error="not a JSON Feed: no jsonfeed.org version")
    if not isinstance(items, list):
        return Sitemap("unknown", [], error="not a JSON Feed: no items list")
    entries: list[SitemapEntry] = []
    seen: set[str] = set()
    invalid = duplicates = over_cap = 0
    for item in items:
        url = _item_url(item, feed_url)
        if url is None:
            invalid += 1
        elif url in seen:
            duplicates += 1
        elif len(entries) >= max_urls:
            over_cap += 1
        else:
            seen.add(url)
            entries.append(SitemapEntry(url, None, False, _item_time(item)))
    return Sitemap("jsonfeed", entries, invalid, duplicates, over_cap)


def _item_url(item: Any, feed_url: str) -> str | None:
    if not isinstance(item, dict):
        return None
    for name in ("url", "external_url"):
        value = item.get(name)
        if isinstance(value, str) and value.strip():
            return canonical_url(value.strip(), feed_url)
    return None


def _item_time(item: dict[str, Any]) -> int | None:
    for name in ("date_modified", "date_published"):
        value = item.get(name)
        if isinstance(value, str) and (moment := lastmod_ms(value)) is not None:
            return moment
    return None
