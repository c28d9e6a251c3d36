"""Finding and asking the services' HTTP APIs: addresses from `members`, answers as JSON.

Every service publishes its side-server address and, when it serves one, its API address in the
compacted `members` topic (`schemas.members`). :class:`ServiceDirectory` reads that table whole
and names a live instance's API per role; :func:`get_json` asks it. The CLI's crawl summary uses
them for the link graph (top pages, orphans) and storage (WARC files), and reports a role that
publishes no API as not running instead of failing.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from schemas import members
from schemas.serde import decode
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.kafka import table_consumer_config
from streamcrawl.membership import is_live
from streamcrawl.settings import Settings
from streamcrawl.table import TopicTable
from streamcrawl.topics import topic_name


class ApiError(StreamcrawlError):
    """An API could not be reached or answered with an error (``status``: its HTTP status, and
    ``document`` its JSON body, when it answered)."""

    def __init__(self, message: str, status: int | None = None, document: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.document = document


class ServiceDirectory:
    """The live members of a deployment, read from `members`; use as a context manager."""

    def __init__(self, settings: Settings, ready_timeout_s: float = 10.0) -> None:
        self._table: TopicTable[members.Member] = TopicTable(
            table_consumer_config(settings),
            topic_name(settings, members.TOPIC),
            lambda raw: decode(members.Member, raw),
        )
        self._ready_timeout_s = ready_timeout_s

    def __enter__(self) -> ServiceDirectory:
        self._table.start()
        if not self._table.wait_ready(self._ready_timeout_s):
            self._table.stop()
            raise StreamcrawlError(f"could not read members within {self._ready_timeout_s}s")
        return self

    def __exit__(self, *exc: object) -> None:
        self._table.stop()

    def live(self, role: str | None = None) -> list[members.Member]:
        found = [m for m in self._table.snapshot().values() if is_live(m)]
        return sorted(
            (m for m in found if role is None or m.role == role), key=lambda m: m.instance
        )

    def api_address(self, role: str) -> str | None:
        """The API of a live, ready instance of `role` (any: each answers for the whole role)."""
        for member in self.live(role):
            if member.api_address and member.ready:
                return member.api_address
        return None


def get_json(address: str, path: str, timeout_s: float = 10.0, **query: str | int) -> Any:
    """GET `http://address/path?query` and decode the JSON answer; ApiError on any failure."""
    return _request(address, path, "GET", timeout_s, query)


def post_json(address: str, path: str, timeout_s: float = 30.0, **query: str | int) -> Any:
    """POST (no body) to `http://address/path?query` and decode the JSON answer."""
    return _request(address, path, "POST", timeout_s, query)


def _request(
    address: str, path: str, method: str, timeout_s: float, query: dict[str, str | int]
) -> Any:
    url = f"http://{address}{path}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        body = error.read()
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        detail = body[:300].decode(errors="replace")
        raise ApiError(f"{url}: {error.code} {detail}", error.code, document) from error
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as error:
        raise ApiError(f"{url}: {error}") from error
