"""Fixtures for fetcher tests: a manual clock, address policies and safe sessions."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator

import pytest
from aiohttp.abc import AbstractResolver

from fetcher.addresses import AddressPolicy
from fetcher.credentials import SiteCredentials
from fetcher.http import FetchLimits, FetchSession, open_session
from fetcher.proxy import ProxySettings
from streamcrawl.clock import FakeClock

LOOPBACK = AddressPolicy.from_strings(["127.0.0.0/8"])
STRICT = AddressPolicy()

FAST_LIMITS = FetchLimits(connect_timeout_s=2.0, read_timeout_s=2.0, total_timeout_s=3.0)
"""Short deadlines, so that a test that goes wrong fails in seconds, not minutes."""


class Sessions:
    """Opens safe sessions for one test; all are closed when it ends."""

    def __init__(self, stack: contextlib.AsyncExitStack) -> None:
        self._stack = stack

    async def open(
        self,
        limits: FetchLimits = FAST_LIMITS,
        policy: AddressPolicy = LOOPBACK,
        dns: AbstractResolver | None = None,
        proxy: ProxySettings | None = None,
        ssl_context: ssl.SSLContext | None = None,
        credentials: dict[str, SiteCredentials] | None = None,
    ) -> FetchSession:
        return await self._stack.enter_async_context(
            open_session(
                limits, policy, dns, proxy=proxy, ssl_context=ssl_context, credentials=credentials
            )
        )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def sessions() -> AsyncIterator[Sessions]:
    async with contextlib.AsyncExitStack() as stack:
        yield Sessions(stack)
