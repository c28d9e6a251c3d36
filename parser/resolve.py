"""Resolving a page's hrefs to canonical URLs, fast: the same answers as ``canonical_url``.

Canonicalising is the biggest cost of link extraction: several microseconds a link, most of it
spent re-canonicalising hosts and queries the page has already named. :class:`LinkResolver`
serves one page (one base URL) and returns exactly ``canonical_url(href, base)`` for every href,
but:

- remembers each raw href's answer (pages repeat their hrefs a lot);
- short-cuts *simple* hrefs: up to their fragment (which canonicalisation drops), ASCII and made
  only of RFC 3986 path and query characters (unreserved, sub-delims, ``:``, ``@``, ``/``, ``?``),
  hence with no escape, backslash, whitespace or non-ASCII character, and whose resolved path has
  no dot segment and no ``;`` (a path parameter may be a session id, which canonicalisation
  strips). Canonicalisation changes such an href only by resolving it and canonicalising
  its host and its query, so its canonical form is the canonical origin, the resolved path and
  the canonical query. Only the RFC 3986 resolution of these plain forms is done here; hosts and
  queries are canonicalised by ``canonical_url`` itself (on ``scheme://host/`` and
  ``http://x/?query``), each once per page, so no canonicalisation rule is restated.

Simple hrefs are root-relative (``/a?b``), path- or query-relative (``a/b``, ``?b``, without a
``:``), scheme-relative (``//host/a``) or absolute in lowercase (``https://host/a``). Everything
else goes to ``canonical_url`` as is. A differential property test holds the two equal on generated
hrefs and bases, so a rule change in ``schemas.canonical`` that breaks an assumption above fails the
build instead of splitting the URL space.
"""

from __future__ import annotations

import re

from w3lib.url import RFC3986_SUB_DELIMS, RFC3986_UNRESERVED

from schemas.canonical import MAX_URL_LENGTH, canonical_url

_URL_CHARS = re.escape((RFC3986_UNRESERVED + RFC3986_SUB_DELIMS).decode("ascii") + ":@/?")
_SIMPLE_HREF = re.compile(f"[{_URL_CHARS}]+")
_MAX_SIMPLE_HREF = 2048
_QUERY_PROBE = "http://x/"
_NOT_SIMPLE = ""
"""What the short cut returns for an href it does not handle (no canonical URL is empty)."""


class LinkResolver:
    """``canonical_url(href, base)`` for the hrefs of one page, with per-page memory."""

    def __init__(self, base: str) -> None:
        self.base = base
        self._answers: dict[str, str | None] = {}
        self._origins: dict[tuple[str, str], str | None] = {}
        self._queries: dict[str, str | None] = {}
        canonical_base = canonical_url(base, tracking_params=frozenset())
        self._usable = canonical_base is not None
        self._scheme, _, rest = (canonical_base or "").partition("://")
        authority, slash, tail = rest.partition("/")
        self._origin = f"{self._scheme}://{authority}"
        self._path = slash + tail.partition("?")[0]
        self._directory = self._path[: self._path.rfind("/") + 1]

    def resolve(self, href: str) -> str | None:
        """The canonical absolute URL of ``href`` on this page, None when it is not http(s)."""
        if href in self._answers:
            return self._answers[href]
        answer = self._simple(href)
        if answer == _NOT_SIMPLE:
            answer = canonical_url(href, self.base)
        self._answers[href] = answer
        return answer

    def seen(self, href: str) -> bool:
        """Whether ``href`` was resolved before on this page (so resolving it again is free)."""
        return href in self._answers

    def _simple(self, href: str) -> str | None:
        """The answer for a simple href (module docstring), else ``_NOT_SIMPLE``."""
        if not self._usable or len(href) > _MAX_SIMPLE_HREF:
            return _NOT_SIMPLE
        # Everything from the first "#" goes, whatever it holds (canonical_url's first rule).
        unfragmented = href.partition("#")[0]
        if not unfragmented:
            # "#top" means what "" means; "" itself goes to canonical_url, once per page.
            return self.resolve("") if href else _NOT_SIMPLE
        if not _SIMPLE_HREF.fullmatch(unfragmented):
            return _NOT_SIMPLE
        reference, _, query = unfragmented.partition("?")
        origin: str | None
        if reference.startswith("//"):
            origin, path = self._host_and_path(self._scheme, reference[2:])
        elif reference.startswith("/"):
            origin, path = self._origin, reference
        elif reference.startswith("http://"):
            origin, path = self._host_and_path("http", reference[7:])
        elif reference.startswith("https://"):
            origin, path = self._host_and_path("https", reference[8:])
        elif ":" in reference:
            return _NOT_SIMPLE
        else:
            origin, path = self._origin, self._directory + reference if reference else self._path
        if origin is None or origin == _NOT_SIMPLE or "/." in path or ";" in path:
            return origin if origin is None else _NOT_SIMPLE
        canonical_query = self._canonical_query(query) if query else ""
        if canonical_query is None:
            return _NOT_SIMPLE
        url = f"{origin}{path}?{canonical_query}" if canonical_query else origin + path
        return url if len(url) <= MAX_URL_LENGTH else None

    def _host_and_path(self, scheme: str, rest: str) -> tuple[str | None, str]:
        """The canonical origin (None: invalid host) and path of ``host[/path]``."""
        authority, slash, path = rest.partition("/")
        if not authority:
            return _NOT_SIMPLE, ""
        key = (scheme, authority)
        if key not in self._origins:
            origin = canonical_url(f"{scheme}://{authority}/")
            self._origins[key] = origin[:-1] if origin else None
        return self._origins[key], slash + path or "/"

    def _canonical_query(self, query: str) -> str | None:
        """The canonical form of a simple query ("" when nothing is left), None if unknown."""
        if query not in self._queries:
            probe = canonical_url(f"{_QUERY_PROBE}?{query}")
            canonical = None
            if probe is not None and probe.startswith(_QUERY_PROBE):
                canonical = probe[len(_QUERY_PROBE) :].removeprefix("?")
            self._queries[query] = canonical
        return self._queries[query]
