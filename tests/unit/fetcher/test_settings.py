"""The fetcher's settings model: defaults, the allow-list, the robots token check."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from fetcher.http import FetchLimits
from fetcher.robots import RobotsSettings
from fetcher.settings import FetcherSettings
from schemas.pages import MAX_BODY_BYTES


def test_defaults_are_safe() -> None:
    settings = FetcherSettings()
    assert settings.http.max_body_bytes == MAX_BODY_BYTES
    assert settings.robots.max_bytes == 500 * 1024
    assert not settings.address_policy().is_allowed(ipaddress.ip_address("127.0.0.1"))


def test_allow_list_is_parsed() -> None:
    settings = FetcherSettings(allowed_networks=("127.0.0.0/8",))
    assert settings.address_policy().is_allowed(ipaddress.ip_address("127.0.0.1"))
    with pytest.raises(ValidationError):
        FetcherSettings(allowed_networks=("not a network",))


def test_robots_token_must_be_in_the_user_agent() -> None:
    with pytest.raises(ValidationError, match="user_agent_token"):
        FetcherSettings(robots=RobotsSettings(user_agent_token="otherbot"))
    FetcherSettings(
        http=FetchLimits(user_agent="otherbot/2 (+https://example.org/bot)"),
        robots=RobotsSettings(user_agent_token="otherbot"),
    )


def test_body_cap_cannot_exceed_the_topic_limit() -> None:
    with pytest.raises(ValidationError):
        FetchLimits(max_body_bytes=MAX_BODY_BYTES + 1)
