"""Host keys and registered domains of canonical URLs, cached per origin (hosts repeat a lot)."""

from __future__ import annotations

import functools

from schemas.canonical import host_key, registered_domain


def origin_of(url: str) -> str:
    """``scheme://authority`` of a canonical URL (the part its host key is made of)."""
    start = url.find("://") + 3
    if start < 3:
        return f"{url}://"
    end = url.find("/", start)
    if end < 0:
        end = len(url)
    query = url.find("?", start, end)
    return url[: end if query < 0 else query]


@functools.lru_cache(maxsize=1 << 14)
def host_and_domain(origin: str) -> tuple[str, str]:
    host = host_key(origin + "/")
    return host, registered_domain(host) if host else ""
