"""The address policy, the checking resolver and socket factory, and SSRF spellings end to end."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from fetcher.addresses import AddressPolicy, embedded_ipv4, parse_address
from fetcher.errors import Reason
from fetcher.exceptions import BlockedAddressError
from fetcher.http import fetch
from fetcher.resolver import SafeResolver, guarded_socket_factory
from fetcher.results import FetchTarget
from streamcrawl.clock import FakeClock
from tests.unit.fetcher.conftest import FAST_LIMITS, LOOPBACK, STRICT, Sessions
from tests.unit.fetcher.servers import raw_server, response_head

BLOCKED = [
    "0.0.0.0",
    "10.1.2.3",
    "100.64.0.1",
    "100.127.255.254",
    "127.0.0.1",
    "127.255.255.254",
    "169.254.0.1",
    "169.254.169.254",
    "172.16.0.1",
    "172.31.255.255",
    "192.0.0.8",
    "192.0.2.1",
    "192.168.1.1",
    "198.18.0.1",
    "224.0.0.1",
    "240.0.0.1",
    "255.255.255.255",
    "::",
    "::1",
    "::127.0.0.1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:0:7f00:1",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b:1::1",
    "2002:7f00:1::",
    "2002:a9fe:a9fe::1",
    "2001::1",
    "2001:db8::1",
    "fc00::1",
    "fd00:ec2::254",
    "fe80::1",
    "fec0::1",
    "ff02::1",
    "168.63.129.16",
    "100.100.100.200",
]

ALLOWED = [
    "93.184.215.14",
    "8.8.8.8",
    "1.1.1.1",
    "172.32.0.1",
    "100.128.0.1",
    "2606:4700:4700::1111",
    "2a00:1450:4001:80b::200e",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
]


@pytest.mark.parametrize("text", BLOCKED)
def test_private_and_special_addresses_are_refused(text: str) -> None:
    assert not STRICT.is_allowed(ipaddress.ip_address(text))


@pytest.mark.parametrize("text", ALLOWED)
def test_public_addresses_are_allowed(text: str) -> None:
    assert STRICT.is_allowed(ipaddress.ip_address(text))


def test_allow_list_opens_only_its_networks() -> None:
    policy = AddressPolicy.from_strings(["127.0.0.0/8", "10.0.0.0/24"])
    assert policy.is_allowed(ipaddress.ip_address("127.0.0.1"))
    assert policy.is_allowed(ipaddress.ip_address("::ffff:127.0.0.1"))
    assert policy.is_allowed(ipaddress.ip_address("10.0.0.9"))
    assert not policy.is_allowed(ipaddress.ip_address("10.0.1.9"))
    assert not policy.is_allowed(ipaddress.ip_address("::1"))
    assert not policy.is_allowed(ipaddress.ip_address("192.168.0.1"))


def test_metadata_needs_an_exact_allow_entry() -> None:
    link_local = AddressPolicy.from_strings(["169.254.0.0/16", "fd00::/8"])
    assert link_local.is_allowed(ipaddress.ip_address("169.254.1.1"))
    assert not link_local.is_allowed(ipaddress.ip_address("169.254.169.254"))
    assert not link_local.is_allowed(ipaddress.ip_address("::ffff:169.254.169.254"))
    assert not link_local.is_allowed(ipaddress.ip_address("fd00:ec2::254"))
    exact = AddressPolicy.from_strings(["169.254.169.254/32"])
    assert exact.is_allowed(ipaddress.ip_address("169.254.169.254"))


def test_embedded_ipv4_forms() -> None:
    assert embedded_ipv4(ipaddress.IPv6Address("::ffff:1.2.3.4")) == ipaddress.IPv4Address(
        "1.2.3.4"
    )
    assert embedded_ipv4(ipaddress.IPv6Address("64:ff9b::102:304")) == ipaddress.IPv4Address(
        "1.2.3.4"
    )
    assert embedded_ipv4(ipaddress.IPv6Address("2002:102:304::")) == ipaddress.IPv4Address(
        "1.2.3.4"
    )
    assert embedded_ipv4(ipaddress.IPv6Address("2606:4700::1")) is None


def test_parse_address_only_takes_standard_forms() -> None:
    assert parse_address("[::1]") == ipaddress.IPv6Address("::1")
    assert parse_address("fe80::1%eth0") == ipaddress.IPv6Address("fe80::1")
    assert parse_address("127.1") is None
    assert parse_address("example.com") is None


class ScriptedDns(AbstractResolver):
    """A resolver answering from a script, one answer per lookup: a rebinding name server."""

    def __init__(self, answers: list[list[str]]) -> None:
        self.answers = answers
        self.lookups = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answer = self.answers[min(self.lookups, len(self.answers) - 1)]
        self.lookups += 1
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=0,
            )
            for address in answer
        ]

    async def close(self) -> None:
        return None


async def test_resolver_drops_refused_addresses_and_fails_when_none_is_left() -> None:
    dns = ScriptedDns([["93.184.215.14", "10.0.0.1"], ["10.0.0.1", "169.254.169.254"]])
    resolver = SafeResolver(STRICT, dns)
    first = await resolver.resolve("rebind.example", 80)
    assert [result["host"] for result in first] == ["93.184.215.14"]
    with pytest.raises(BlockedAddressError):
        await resolver.resolve("rebind.example", 80)


def test_socket_factory_refuses_before_creating_a_socket() -> None:
    create = guarded_socket_factory(STRICT)
    with pytest.raises(BlockedAddressError):
        create((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80)))
    with pytest.raises(BlockedAddressError):
        create((socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::ffff:127.0.0.1", 80, 0, 0)))


SSRF_SPELLINGS = [
    "http://127.1:{port}/",
    "http://2130706433:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",
    "http://0x7f.1:{port}/",
    "http://localhost:{port}/",
    "http://127.0.0.1:{port}/",
    "http://0177.0.0.1:{port}/",
]


async def _ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(response_head(headers={"Content-Length": "2"}) + b"ok")
    await writer.drain()


@pytest.mark.parametrize("spelling", SSRF_SPELLINGS)
async def test_ssrf_spellings_are_refused_without_connecting(
    spelling: str, sessions: Sessions, clock: FakeClock
) -> None:
    session = await sessions.open(policy=STRICT)
    async with raw_server(_ok) as server:
        result = await fetch(
            session, FetchTarget(spelling.format(port=server.port)), FAST_LIMITS, clock
        )
    assert result.kind == "permanent"
    assert result.failure is not None
    assert result.failure.reason is Reason.BLOCKED_ADDRESS
    assert server.connections == 0


async def test_metadata_address_is_refused(sessions: Sessions, clock: FakeClock) -> None:
    session = await sessions.open(policy=AddressPolicy.from_strings(["169.254.0.0/16"]))
    result = await fetch(session, FetchTarget("http://169.254.169.254/latest/"), FAST_LIMITS, clock)
    assert result.failure is not None
    assert result.failure.reason is Reason.BLOCKED_ADDRESS


@pytest.mark.parametrize("spelling", SSRF_SPELLINGS)
async def test_loopback_spellings_reach_the_server_when_allowed(
    spelling: str, sessions: Sessions, clock: FakeClock
) -> None:
    session = await sessions.open(policy=LOOPBACK)
    async with raw_server(_ok) as server:
        result = await fetch(
            session, FetchTarget(spelling.format(port=server.port)), FAST_LIMITS, clock
        )
    assert result.kind == "done"
    assert result.body == b"ok"
    assert server.connections == 1


async def test_rebinding_name_is_checked_at_connect_time(
    sessions: Sessions, clock: FakeClock
) -> None:
    dns = ScriptedDns([["127.0.0.1"]])
    session = await sessions.open(policy=STRICT, dns=dns)
    async with raw_server(_ok) as server:
        result = await fetch(
            session, FetchTarget(f"http://rebind.example:{server.port}/"), FAST_LIMITS, clock
        )
    assert result.failure is not None
    assert result.failure.reason is Reason.BLOCKED_ADDRESS
    assert dns.lookups == 1
    assert server.connections == 0
