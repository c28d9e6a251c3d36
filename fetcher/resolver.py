"""Address checks wired into aiohttp at the two places a connection gets its address.

1. :class:`SafeResolver` wraps the default resolver and drops every resolved address the
   :class:`~fetcher.addresses.AddressPolicy` refuses; when none is left the lookup fails with
   :class:`~fetcher.exceptions.BlockedAddressError`. aiohttp's DNS cache stores what this returns,
   so a cached answer has been checked too.
2. :func:`guarded_socket_factory` checks the address of every socket just before it connects.
   aiohttp never calls the resolver for IP literals, so this is what stops
   ``http://[::ffff:127.0.0.1]/``, and it is the last line if a future aiohttp routes a lookup
   around the resolver.

Both check the address that will actually be connected to, which is why DNS rebinding (a name that
answers public first and private later) cannot pass. Proxies are not supported: with a proxy the
checked address would be the proxy's, not the target's.
"""

from __future__ import annotations

import socket

from aiohappyeyeballs import AddrInfoType, SocketFactoryType
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from fetcher.addresses import AddressPolicy, parse_address
from fetcher.exceptions import BlockedAddressError


class SafeResolver(AbstractResolver):
    """A resolver that returns only addresses the policy allows."""

    def __init__(self, policy: AddressPolicy, inner: AbstractResolver | None = None) -> None:
        self._policy = policy
        self._inner = inner if inner is not None else DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Resolve with the wrapped resolver, then keep only allowed addresses."""
        results = await self._inner.resolve(host, port, family)
        allowed: list[ResolveResult] = []
        refused = ""
        for result in results:
            address = parse_address(result["host"])
            if address is not None and self._policy.is_allowed(address):
                allowed.append(result)
            else:
                refused = result["host"]
        if not allowed:
            raise BlockedAddressError(host, refused or "(none)")
        return allowed

    async def close(self) -> None:
        await self._inner.close()


def guarded_socket_factory(policy: AddressPolicy) -> SocketFactoryType:
    """A socket factory for aiohttp's connector that refuses sockets to disallowed addresses."""

    def create(addr_info: AddrInfoType) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        host = str(sockaddr[0])
        address = parse_address(host)
        if address is None or not policy.is_allowed(address):
            raise BlockedAddressError(host, host)
        return socket.socket(family=family, type=type_, proto=proto)

    return create
