"""The fetcher's configuration in one frozen model, nested into the service's settings later.

Environment names follow the kernel's convention (``STREAMCRAWL_FETCHER__HTTP__TOTAL_TIMEOUT_S``)
once the service nests this model under ``fetcher``.
"""

from __future__ import annotations

import ipaddress
import ssl
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, FilePath, field_validator, model_validator

from fetcher.addresses import AddressPolicy
from fetcher.credentials import SiteCredentials, check_origins
from fetcher.http import FetchLimits
from fetcher.politeness import PolitenessSettings
from fetcher.proxy import ProxySettings
from fetcher.robots import RobotsSettings


class FetcherSettings(BaseModel):
    """HTTP limits, robots.txt, politeness, the address allow-list, the proxy, site credentials,
    the certificates trusted and the read-ahead bound."""

    model_config = ConfigDict(frozen=True)

    http: FetchLimits = FetchLimits()
    robots: RobotsSettings = RobotsSettings()
    politeness: PolitenessSettings = PolitenessSettings()
    allowed_networks: tuple[str, ...] = ()
    """Networks exempt from the address policy, e.g. ``("127.0.0.0/8",)`` for a local test site."""
    read_ahead: Annotated[int, Field(ge=1)] = 1000
    """Requests buffered across hosts before the service pauses its partitions."""
    proxy: ProxySettings = ProxySettings()
    """The forward proxy every request goes through (`fetcher.proxy`); none by default."""
    credentials: dict[str, SiteCredentials] = {}
    """HTTP Basic credentials by origin, sent to that origin only (`fetcher.credentials`)."""
    ca_file: FilePath | None = None
    """PEM certificates trusted besides the system's: a TLS-inspecting proxy's CA, an internal
    CA. A file that does not load fails the start, not every fetch."""

    @field_validator("allowed_networks")
    @classmethod
    def _networks_parse(cls, networks: tuple[str, ...]) -> tuple[str, ...]:
        for network in networks:
            ipaddress.ip_network(network.strip())
        return networks

    @model_validator(mode="after")
    def _token_in_user_agent(self) -> FetcherSettings:
        if self.robots.user_agent_token.lower() not in self.http.user_agent.lower():
            raise ValueError("robots.user_agent_token must appear in http.user_agent")
        return self

    @field_validator("credentials")
    @classmethod
    def _keyed_by_origin(
        cls, credentials: dict[str, SiteCredentials]
    ) -> dict[str, SiteCredentials]:
        return check_origins(credentials)

    @field_validator("ca_file")
    @classmethod
    def _ca_file_loads(cls, path: FilePath | None) -> FilePath | None:
        if path is not None:
            try:
                ssl.create_default_context().load_verify_locations(cafile=path)
            except (ssl.SSLError, OSError) as error:
                raise ValueError(f"ca_file {path} does not load: {error}") from error
        return path

    def address_policy(self) -> AddressPolicy:
        return AddressPolicy.from_strings(self.allowed_networks)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The system's certificates and ``ca_file``'s; None (aiohttp's default) without one."""
        if self.ca_file is None:
            return None
        context = ssl.create_default_context()
        context.load_verify_locations(cafile=self.ca_file)
        return context
