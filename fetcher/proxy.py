"""Fetching through an HTTP forward proxy, as Heritrix, Nutch, StormCrawler and Scrapy can.

Configured with ``STREAMCRAWL_FETCHER__PROXY__URL`` (``http://proxy.internal:3128``), and
optionally a user name and password (Basic, sent only to the proxy) and hosts to reach directly
(``bypass``: a name also covers its subdomains, a network covers the IP literals in it, as
``NO_PROXY`` does). Every request the fetcher makes, robots.txt included, goes through it: plain
http as an absolute-form request, https through a CONNECT tunnel (the certificate is still checked
against the target's name).

The address guard (DESIGN.md section 5) still applies to the target:

- the proxy itself may be on a private network (it usually is): its own addresses are trusted for
  the connection to it, and for nothing else (`fetcher.resolver`);
- an IP literal target is checked against the address policy before anything is sent;
- a named target is resolved here and refused when none of its addresses is allowed, before the
  proxy ever sees it (``check_targets``, on by default; an allowed answer is kept for the DNS cache
  TTL). The proxy then resolves the name again itself, so a name server that answers public here and
  private there can still pass: the proxy's own rules are the last line, as for every crawler
  behind a proxy. Where only the proxy can resolve outside names, turn ``check_targets`` off.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from typing import Annotated, Any

from aiohttp import encode_basic_auth
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from yarl import URL

from fetcher.addresses import AddressPolicy, IPNetwork, parse_address
from fetcher.exceptions import BlockedAddressError
from fetcher.resolver import SafeResolver

CHECKED_HOSTS_KEPT = 10_000
"""Target hosts whose allowed answer is remembered (the oldest forgotten first)."""


class ProxySettings(BaseModel):
    """The forward proxy every fetch goes through; none when ``url`` is unset."""

    model_config = ConfigDict(frozen=True)

    url: str | None = None
    """``http://host:port`` (``https://`` for a proxy spoken to over TLS); no credentials in it."""
    username: str = ""
    password: SecretStr = SecretStr("")
    """Sent to the proxy only (Proxy-Authorization: Basic), never logged."""
    bypass: tuple[str, ...] = ()
    """Hosts reached directly: ``example.com`` (subdomains too), ``10.0.0.0/8`` (IP literals)."""
    check_targets: bool = True
    """Resolve each target's name here and refuse blocked addresses before the proxy sees it."""
    checked_ttl_s: Annotated[float, Field(ge=0)] = 300.0
    """How long a target's allowed answer is kept before its name is resolved again."""

    def endpoint(self) -> tuple[str, int] | None:
        """The proxy's host and port, or None when there is no proxy."""
        if self.url is None:
            return None
        url = URL(self.url)
        return url.raw_host or "", url.port or 0

    @field_validator("url")
    @classmethod
    def _url_is_a_proxy(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        url = URL(value.strip())
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"proxy url must be http://host:port or https://host:port: {url}")
        if url.user is not None or url.password is not None:
            raise ValueError("proxy url: give the credentials as username and password instead")
        if url.path not in ("", "/") or url.query_string or url.fragment:
            raise ValueError(f"proxy url must name only a scheme, host and port: {url}")
        return str(url.with_path(""))

    @field_validator("bypass")
    @classmethod
    def _bypass_entries_parse(cls, entries: tuple[str, ...]) -> tuple[str, ...]:
        for entry in entries:
            if not _bypass_entry(entry):
                raise ValueError(f"proxy bypass entry is neither a host nor a network: {entry!r}")
        return entries

    @model_validator(mode="after")
    def _parts_fit_together(self) -> ProxySettings:
        if self.password.get_secret_value() and not self.username:
            raise ValueError("proxy password given without a username")
        if self.url is None and (self.username or self.bypass):
            raise ValueError("proxy username or bypass given without a proxy url")
        return self


class Proxy:
    """Which requests go through the proxy, what to send it, and the check of their targets."""

    def __init__(self, settings: ProxySettings, resolver: SafeResolver, policy: AddressPolicy):
        if settings.url is None:
            raise ValueError("no proxy url configured")
        self.url = URL(settings.url)
        self.headers: dict[str, str] = {}
        """Sent to the proxy with each request (and each CONNECT)."""
        if settings.username:
            password = settings.password.get_secret_value()
            self.headers["Proxy-Authorization"] = encode_basic_auth(settings.username, password)
        self._domains = tuple(entry.strip().lower().strip(".") for entry in _names(settings))
        self._networks = tuple(_networks(settings))
        self._check_targets = settings.check_targets
        self._ttl_s = settings.checked_ttl_s
        self._resolver, self._policy = resolver, policy
        self._checked: dict[str, float] = {}
        """Allowed target names and when their answer expires (monotonic), oldest first."""

    @property
    def host(self) -> str:
        return self.url.host or ""

    def routes(self, host: str) -> bool:
        """Whether a request to ``host`` (lowercase, as a URL gives it) goes through the proxy."""
        address = parse_address(host)
        if address is not None:
            return not any(
                address.version == network.version and address in network
                for network in self._networks
            )
        return not any(host == domain or host.endswith(f".{domain}") for domain in self._domains)

    def request_arguments(self, url: URL, headers: dict[str, str]) -> dict[str, Any]:
        """aiohttp's arguments for a request to ``url`` through the proxy. The credentials go
        on the CONNECT of an https request; a plain one is sent to the proxy as it is, so they
        go into its ``headers`` (aiohttp sends ``proxy_headers`` only with a CONNECT)."""
        if url.scheme == "https":
            return {"proxy": self.url, "proxy_headers": self.headers}
        headers.update(self.headers)
        return {"proxy": self.url}

    async def check_target(self, host: str, port: int) -> None:
        """Raise :class:`BlockedAddressError` when the target's address is not allowed (and a
        DNS error when its name does not resolve); see the module docstring."""
        address = parse_address(host)
        if address is not None:
            if not self._policy.is_allowed(address):
                raise BlockedAddressError(host, str(address))
            return
        if not self._check_targets:
            return
        now = time.monotonic()
        expires = self._checked.get(host)
        if expires is not None and expires > now:
            return
        await self._resolver.resolve(host, port, socket.AF_UNSPEC)
        self._checked.pop(host, None)
        self._checked[host] = now + self._ttl_s
        if len(self._checked) > CHECKED_HOSTS_KEPT:
            del self._checked[next(iter(self._checked))]


def _bypass_entry(entry: str) -> bool:
    text = entry.strip().strip(".")
    if _is_network(text):
        return True
    labels = text.split(".")
    return bool(text) and all(label and label.replace("-", "").isalnum() for label in labels)


def _names(settings: ProxySettings) -> list[str]:
    return [entry for entry in settings.bypass if not _is_network(entry)]


def _networks(settings: ProxySettings) -> list[IPNetwork]:
    return [
        ipaddress.ip_network(entry.strip(), strict=False)
        for entry in settings.bypass
        if _is_network(entry)
    ]


def _is_network(entry: str) -> bool:
    try:
        ipaddress.ip_network(entry.strip(), strict=False)
    except ValueError:
        return False
    return True
