"""The parser's own settings: a frozen model the service reads once and hands to the handler."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from parser.extract import DEFAULT_MAX_LINKS, DEFAULT_MAX_REFRESH_DELAY_S
from parser.sitemaps import MAX_DECOMPRESSED_BYTES, MAX_URLS


class ParserSettings(BaseModel):
    """Limits and policies of link extraction; the defaults suit a general web crawl."""

    model_config = ConfigDict(frozen=True)

    max_links: Annotated[int, Field(ge=0, le=10_000_000)] = DEFAULT_MAX_LINKS
    """Distinct link targets kept per page; the rest are counted as dropped."""
    robots_names: frozenset[str] = frozenset({"robots"})
    """Robots meta names and X-Robots-Tag user agents that address this crawler."""
    parse_error_pages: bool = False
    """Extract links from non-2xx responses too (a 404 page's navigation, say)."""
    max_refresh_delay_s: Annotated[int, Field(ge=0)] = DEFAULT_MAX_REFRESH_DELAY_S
    """A page refreshing to another URL within this delay redirects there (`parser.refresh`)."""
    max_sitemap_bytes: Annotated[int, Field(ge=1)] = MAX_DECOMPRESSED_BYTES
    max_sitemap_urls: Annotated[int, Field(ge=0)] = MAX_URLS

    @field_validator("robots_names")
    @classmethod
    def _lowercase(cls, names: frozenset[str]) -> frozenset[str]:
        return frozenset(name.strip().lower() for name in names if name.strip())
