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
answers public first and private later) cannot pass. A configured proxy (`fetcher.proxy`) is the
one exception: its name's addresses at its port, and only those, are trusted for the connection to
it, where it usually sits on a private network; its targets are checked by `fetcher.proxy` instead.
"""

from __future__ import annotations

import socket
from collections.abc import Container

from aiohappyeyeballs import AddrInfoType, SocketFactoryType
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from fetcher.addresses import AddressPolicy, parse_address
from fetcher.exceptions import BlockedAddressError


class SafeResolver(AbstractResolver):
    """A resolver that returns only addresses the policy allows, except for the trusted host and
    port (the proxy's), whose addresses it returns all and remembers in ``trusted_addresses``."""

    def __init__(
        self,
        policy: AddressPolicy,
        inner: AbstractResolver | None = None,
        trusted: tuple[str, int] | None = None,
    ) -> None:
        self._policy = policy
        self._inner = inner if inner is not None else DefaultResolver()
        self._trusted = trusted
        self.trusted_addresses: set[tuple[str, int]] = set()
        """Addresses and port the trusted host resolved to (or is, when an IP literal): the
        socket factory lets connections to them through."""
        if trusted is not None:
            literal = parse_address(trusted[0])
            if literal is not None:
                self.trusted_addresses.add((str(literal), trusted[1]))

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Resolve with the wrapped resolver, then keep only allowed addresses."""
        results = await self._inner.resolve(host, port, family)
        if (host, port) == self._trusted:
            for result in results:
                self.trusted_addresses.add((str(parse_address(result["host"])), port))
            return results
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


def guarded_socket_factory(
    policy: AddressPolicy, trusted: Container[tuple[str, int]] = ()
) -> SocketFactoryType:
    """A socket factory for aiohttp's connector that refuses sockets to disallowed addresses
    (``trusted`` addresses and ports, the proxy's, excepted)."""

    def create(addr_info: AddrInfoType) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        host = str(sockaddr[0])
        address = parse_address(host)
        if address is None or not (
            policy.is_allowed(address) or (str(address), sockaddr[1]) in trusted
        ):
            raise BlockedAddressError(host, host)
        return socket.socket(family=family, type=type_, proto=proto)

    return create
