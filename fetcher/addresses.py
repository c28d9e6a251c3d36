"""Which IP addresses the fetcher may connect to (DESIGN.md section 5, Safety).

A crawler follows links that anyone can write, so a link to ``http://169.254.169.254/`` or to an
intranet host must not reach it (server-side request forgery). Every address is checked after
resolution, at connect time (`fetcher.resolver`), so neither a DNS answer that changes between two
lookups (rebinding) nor an odd spelling of an address (``127.1``, ``2130706433``, ``0x7f.1``,
``[::ffff:127.0.0.1]``) gets past it.

Refused, unless an allowed network of the configuration contains the address:

- IPv4: this network and unspecified (0/8), private (10/8, 172.16/12, 192.168/16), CGNAT
  (100.64/10), loopback (127/8), link-local (169.254/16), IETF protocol assignments (192.0.0/24),
  documentation (192.0.2/24, 198.51.100/24, 203.0.113/24), the deprecated 6to4 relay
  (192.88.99/24), benchmarking (198.18/15), multicast (224/4), reserved and broadcast (240/4).
- IPv6: the reserved ::/8 block (unspecified, loopback, IPv4-compatible), discard (100::/64), IETF
  protocol assignments with Teredo (2001::/23), documentation (2001:db8::/32, 3fff::/20), local
  NAT64 (64:ff9b:1::/48), unique local (fc00::/7), link-local (fe80::/10), site-local
  (fec0::/10), multicast (ff00::/8).
- IPv6 addresses that carry an IPv4 address (mapped ::ffff:0:0/96, translated ::ffff:0:0:0/96,
  NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by the IPv4 address they carry.
- Cloud metadata endpoints (:data:`METADATA_ADDRESSES`) are refused even inside an allowed
  network, unless an allowed network is exactly that one address: allowing 169.254.0.0/16 for a
  link-local test rig must not open the instance's credentials.

Python's ``ipaddress.is_private`` and friends are not used: their lists changed between patch
releases, and this policy must not change under a dependency upgrade.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Final

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_BLOCKED_V4: Final = tuple(
    ipaddress.IPv4Network(network)
    for network in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
)

_BLOCKED_V6: Final = tuple(
    ipaddress.IPv6Network(network)
    for network in (
        "::/8",
        "100::/64",
        "2001::/23",
        "2001:db8::/32",
        "3fff::/20",
        "64:ff9b:1::/48",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    )
)

_MAPPED: Final = ipaddress.IPv6Network("::ffff:0:0/96")
_TRANSLATED: Final = ipaddress.IPv6Network("::ffff:0:0:0/96")
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR: Final = ipaddress.IPv6Network("2002::/16")

METADATA_ADDRESSES: Final[frozenset[IPAddress]] = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean instance metadata
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure WireServer: a public address that only the VM host answers
    )
)


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, translated, NAT64, 6to4), if any."""
    if address in _MAPPED or address in _TRANSLATED or address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return ipaddress.IPv4Address((int(address) >> 80) & 0xFFFFFFFF)
    return None


def parse_address(text: str) -> IPAddress | None:
    """A strictly written IP address (brackets and an IPv6 zone stripped), or None for a name.

    Only the standard dotted-quad IPv4 form is an address here; legacy forms such as ``127.1``
    are names to this function, because canonical URLs have already rewritten them and the
    socket layer only ever reports the standard form.
    """
    text = text.removeprefix("[").removesuffix("]").partition("%")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


class AddressPolicy:
    """Decides whether the fetcher may connect to an address; immutable once built."""

    def __init__(self, allowed_networks: Iterable[IPNetwork] = ()) -> None:
        self.allowed_networks: tuple[IPNetwork, ...] = tuple(allowed_networks)

    @classmethod
    def from_strings(cls, networks: Iterable[str]) -> AddressPolicy:
        """Build from configuration text such as ``["127.0.0.0/8", "::1/128"]``."""
        return cls(ipaddress.ip_network(network.strip()) for network in networks)

    def is_allowed(self, address: IPAddress) -> bool:
        """True when the fetcher may connect to ``address``; see the module docstring."""
        if address in METADATA_ADDRESSES:
            return self._names_exactly(address)
        if self._in_allowed(address):
            return True
        if isinstance(address, ipaddress.IPv6Address):
            carried = embedded_ipv4(address)
            if carried is not None:
                return self.is_allowed(carried)
            return not any(address in network for network in _BLOCKED_V6)
        return not any(address in network for network in _BLOCKED_V4)

    def _in_allowed(self, address: IPAddress) -> bool:
        return any(
            address.version == network.version and address in network
            for network in self.allowed_networks
        )

    def _names_exactly(self, address: IPAddress) -> bool:
        return any(
            network.num_addresses == 1 and network.network_address == address
            for network in self.allowed_networks
        )
