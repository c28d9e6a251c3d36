"""HTTP Basic credentials for sites that ask for them, as Heritrix's credential store, Nutch's
``http.auth.file`` and StormCrawler's ``http.basicauth.*`` give them.

Configured per origin (``STREAMCRAWL_FETCHER__CREDENTIALS='{"https://wiki.intranet.example":
{"username": "crawler", "password": "..."}}'``) and sent, pre-emptively, with every request to
that origin and to no other: the origin is the URL's ``scheme://host[:port]`` in canonical form
(`fetcher.urls.origin`), so ``http://`` and ``https://`` of one host are two origins, and a
redirect elsewhere (the fetcher never follows one; the frontier queues its target as a URL of its
own) never carries them. robots.txt of the origin is asked for with them too. Passwords are
pydantic secrets: never in a log or a repr. Credentials for a plain ``http://`` origin cross the
network readable; the fetcher says so when it starts.
"""

from __future__ import annotations

from aiohttp import encode_basic_auth
from pydantic import BaseModel, ConfigDict, SecretStr
from yarl import URL

from fetcher.urls import origin


class SiteCredentials(BaseModel):
    """One origin's user name and password."""

    model_config = ConfigDict(frozen=True)

    username: str
    password: SecretStr


def check_origins(credentials: dict[str, SiteCredentials]) -> dict[str, SiteCredentials]:
    """The credentials keyed by canonical origin; ValueError naming a key that is no origin."""
    by_origin: dict[str, SiteCredentials] = {}
    for key, site in credentials.items():
        url = URL(key.strip())
        canonical = origin(key.strip())
        bare = url.path in ("", "/") and not (url.query_string or url.fragment or url.user)
        if canonical is None or not bare:
            raise ValueError(
                f"credentials key {key[:100]!r} must be an origin: http(s)://host[:port], "
                "nothing after it"
            )
        if not site.username:
            raise ValueError(f"credentials for {canonical}: the username is empty")
        by_origin[canonical] = site
    return by_origin


class Authorizations:
    """The Authorization header each configured origin gets."""

    def __init__(self, credentials: dict[str, SiteCredentials]) -> None:
        self._headers = {
            site_origin: encode_basic_auth(site.username, site.password.get_secret_value())
            for site_origin, site in credentials.items()
        }

    def __bool__(self) -> bool:
        return bool(self._headers)

    def header_for(self, url: str) -> str | None:
        """The Authorization value for ``url`` (a canonical URL), or None when its origin has
        no credentials."""
        url_origin = origin(url)
        return None if url_origin is None else self._headers.get(url_origin)
