"""The fetcher's configuration in one frozen model, nested into the service's settings later.

Environment names follow the kernel's convention (``STREAMCRAWL_FETCHER__HTTP__TOTAL_TIMEOUT_S``)
once the service nests this model under ``fetcher``.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fetcher.addresses import AddressPolicy
from fetcher.http import FetchLimits
from fetcher.politeness import PolitenessSettings
from fetcher.robots import RobotsSettings


class FetcherSettings(BaseModel):
    """HTTP limits, robots.txt, politeness, the address allow-list and the read-ahead bound."""

    model_config = ConfigDict(frozen=True)

    http: FetchLimits = FetchLimits()
    robots: RobotsSettings = RobotsSettings()
    politeness: PolitenessSettings = PolitenessSettings()
    allowed_networks: tuple[str, ...] = ()
    """Networks exempt from the address policy, e.g. ``("127.0.0.0/8",)`` for a local test site."""
    read_ahead: Annotated[int, Field(ge=1)] = 1000
    """Requests buffered across hosts before the service pauses its partitions."""

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

    def address_policy(self) -> AddressPolicy:
        return AddressPolicy.from_strings(self.allowed_networks)
