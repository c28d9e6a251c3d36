"""Fetching through a forward proxy, and TLS with certificates of one's own (`fetcher.proxy`).

The proxy here (`tests.forward_proxy`) reaches every target on 127.0.0.1, while the fetcher's own
DNS gives the targets public or private addresses as each test needs: the guard is judged on
what the fetcher would resolve, the connection is the proxy's.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trustme
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from pydantic import ValidationError

from fetcher.addresses import AddressPolicy
from fetcher.errors import Reason
from fetcher.http import fetch
from fetcher.proxy import ProxySettings
from fetcher.results import FetchResult, FetchTarget
from fetcher.service import FetcherServiceSettings
from fetcher.settings import FetcherSettings
from streamcrawl.clock import FakeClock
from tests.forward_proxy import ForwardProxy, forward_proxy
from tests.unit.fetcher.conftest import FAST_LIMITS, LOOPBACK, STRICT, Sessions
from tests.unit.fetcher.servers import AppServer, app_server

PUBLIC = "93.184.215.14"
BODY = b"<html>through</html>"


class NameTable(AbstractResolver):
    """DNS from a table; a name not in it does not exist."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table
        self.lookups: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        address = self.table[host]
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET,
                proto=0,
                flags=0,
            )
        ]

    async def close(self) -> None:
        return None


def _site(seen: list[dict[str, str]]) -> web.Application:
    async def page(request: web.Request) -> web.Response:
        seen.append({"path": request.path_qs, **request.headers})
        return web.Response(body=BODY, content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    return app


@pytest.fixture
async def origin() -> AsyncIterator[tuple[AppServer, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    async with app_server(_site(seen)) as server:
        yield server, seen


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def tls_origin(ca: trustme.CA) -> AsyncIterator[tuple[int, list[dict[str, str]]]]:
    """The same site over TLS, its certificate for site.example and 127.0.0.1, issued by ``ca``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("site.example", "127.0.0.1").configure_cert(context)
    seen: list[dict[str, str]] = []
    runner = web.AppRunner(_site(seen), shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    try:
        yield runner.addresses[0][1], seen
    finally:
        await runner.cleanup()


def _trusting(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def _proxy(proxy: ForwardProxy, **settings: object) -> ProxySettings:
    return ProxySettings.model_validate({"url": f"http://127.0.0.1:{proxy.port}", **settings})


async def _fetch(
    sessions: Sessions,
    url: str,
    *,
    policy: AddressPolicy = STRICT,
    dns: AbstractResolver | None = None,
    proxy: ProxySettings | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> FetchResult:
    session = await sessions.open(FAST_LIMITS, policy, dns, proxy=proxy, ssl_context=ssl_context)
    return await fetch(session, FetchTarget(url=url), FAST_LIMITS, FakeClock())


# ----- settings ------------------------------------------------------------------------------


def test_proxy_settings_refuse_what_is_not_a_proxy() -> None:
    refused = {
        "ftp://proxy:21": "must be http://host:port",
        "http://user:secret@proxy:3128": "give the credentials as username and password",
        "http://proxy:3128/path": "only a scheme, host and port",
    }
    for url, message in refused.items():
        with pytest.raises(ValidationError, match=message):
            ProxySettings(url=url)
    with pytest.raises(ValidationError, match="password given without a username"):
        ProxySettings(url="http://proxy:3128", password="secret")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="without a proxy url"):
        ProxySettings(bypass=("example.com",))
    with pytest.raises(ValidationError, match="neither a host nor a network"):
        ProxySettings(url="http://proxy:3128", bypass=("exa mple.com",))


def test_proxy_settings_read_from_the_environment_and_hide_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMCRAWL_FETCHER__PROXY__URL", "http://proxy.internal:3128/")
    monkeypatch.setenv("STREAMCRAWL_FETCHER__PROXY__USERNAME", "crawler")
    monkeypatch.setenv("STREAMCRAWL_FETCHER__PROXY__PASSWORD", "hunter2")
    monkeypatch.setenv("STREAMCRAWL_FETCHER__PROXY__BYPASS", '["intranet.example", "10.0.0.0/8"]')
    fetcher = FetcherServiceSettings().fetcher
    proxy = fetcher.proxy
    assert proxy.url == "http://proxy.internal:3128"
    assert proxy.password.get_secret_value() == "hunter2"
    assert "hunter2" not in repr(fetcher) and "hunter2" not in str(fetcher)
    assert proxy.bypass == ("intranet.example", "10.0.0.0/8")
    assert ProxySettings(url="").url is None


def test_a_ca_file_that_does_not_load_fails_the_settings(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ValidationError, match="does not load"):
        FetcherSettings(ca_file=bad)
    assert FetcherSettings().ssl_context() is None


# ----- routing -------------------------------------------------------------------------------


async def test_bypass_covers_a_name_its_subdomains_and_networks(sessions: Sessions) -> None:
    settings = ProxySettings(
        url="http://127.0.0.1:9", bypass=("intranet.example", ".corp.example", "10.0.0.0/8")
    )
    session = await sessions.open(FAST_LIMITS, STRICT, proxy=settings)
    proxy = session.proxy
    assert proxy is not None
    direct = ["intranet.example", "wiki.intranet.example", "a.corp.example", "10.1.2.3"]
    routed = ["example.com", "notintranet.example", "corp.example.org", "11.1.2.3", "::1"]
    assert [host for host in direct if proxy.routes(host)] == []
    assert [host for host in routed if not proxy.routes(host)] == []


# ----- fetching through the proxy ------------------------------------------------------------


async def test_a_page_is_fetched_through_the_proxy_which_alone_connects_to_it(
    sessions: Sessions, origin: tuple[AppServer, list[dict[str, str]]]
) -> None:
    server, seen = origin
    url = f"http://site.example:{server.port}/page?q=1"
    async with forward_proxy({"site.example": "127.0.0.1"}) as proxy:
        # STRICT: the fetcher itself may not connect to 127.0.0.1, only the proxy does.
        result = await _fetch(
            sessions, url, dns=NameTable({"site.example": PUBLIC}), proxy=_proxy(proxy)
        )
    assert (result.kind, result.status, bytes(result.body or b"")) == ("done", 200, BODY)
    assert proxy.seen == [f"GET {url}"]
    assert seen[0]["path"] == "/page?q=1"
    assert seen[0]["Host"] == f"site.example:{server.port}"


async def test_proxy_credentials_go_to_the_proxy_only_and_a_407_is_retryable(
    sessions: Sessions, origin: tuple[AppServer, list[dict[str, str]]]
) -> None:
    server, seen = origin
    url = f"http://site.example:{server.port}/"
    dns = NameTable({"site.example": PUBLIC})
    async with forward_proxy({"site.example": "127.0.0.1"}, ("crawler", "s3cret")) as proxy:
        right = _proxy(proxy, username="crawler", password="s3cret")
        wrong = _proxy(proxy, username="crawler", password="guess")
        accepted = await _fetch(sessions, url, dns=dns, proxy=right)
        refused = await _fetch(sessions, url, dns=dns, proxy=wrong)
        anonymous = await _fetch(sessions, url, dns=dns, proxy=_proxy(proxy))
    assert (accepted.kind, accepted.status) == ("done", 200)
    assert len(seen) == 1 and "Proxy-Authorization" not in seen[0]
    for result in (refused, anonymous):
        assert result.failure is not None
        assert (result.kind, result.failure.reason) == ("retryable", Reason.PROXY_ERROR)
        assert "407" in result.failure.detail


async def test_a_target_resolving_to_a_private_address_never_reaches_the_proxy(
    sessions: Sessions,
) -> None:
    dns = NameTable({"internal.example": "10.0.0.7", "metadata.example": "169.254.169.254"})
    async with forward_proxy() as proxy:
        settings = _proxy(proxy)
        results = [
            await _fetch(sessions, url, dns=dns, proxy=settings)
            for url in (
                "http://internal.example/",
                "https://metadata.example/latest/",
                "http://127.0.0.1:8080/",
                "http://[::1]/",
                "http://169.254.169.254/latest/meta-data/",
            )
        ]
    assert [(result.kind, result.failure and result.failure.reason) for result in results] == [
        ("permanent", Reason.BLOCKED_ADDRESS)
    ] * 5
    assert proxy.seen == []


async def test_a_name_that_does_not_resolve_fails_unless_only_the_proxy_resolves_names(
    sessions: Sessions, origin: tuple[AppServer, list[dict[str, str]]]
) -> None:
    server, _ = origin
    url = f"http://site.example:{server.port}/"
    no_names = NameTable({})
    async with forward_proxy({"site.example": "127.0.0.1"}) as proxy:
        checked = await _fetch(sessions, url, dns=no_names, proxy=_proxy(proxy))
        unchecked = await _fetch(
            sessions, url, dns=no_names, proxy=_proxy(proxy, check_targets=False)
        )
    assert checked.failure is not None
    assert (checked.kind, checked.failure.reason) == ("permanent", Reason.DNS_NOT_FOUND)
    assert (unchecked.kind, unchecked.status) == ("done", 200)
    assert proxy.seen == [f"GET {url}"]


async def test_an_allowed_answer_is_kept_so_a_target_is_resolved_once(
    sessions: Sessions, origin: tuple[AppServer, list[dict[str, str]]]
) -> None:
    server, _ = origin
    dns = NameTable({"site.example": PUBLIC})
    async with forward_proxy({"site.example": "127.0.0.1"}) as proxy:
        session = await sessions.open(FAST_LIMITS, STRICT, dns, proxy=_proxy(proxy))
        for path in ("/a", "/b", "/c"):
            target = FetchTarget(url=f"http://site.example:{server.port}{path}")
            assert (await fetch(session, target, FAST_LIMITS, FakeClock())).status == 200
    assert dns.lookups == ["site.example"]
    assert len(proxy.seen) == 3


async def test_a_proxy_that_cannot_be_reached_is_a_retryable_proxy_error(
    sessions: Sessions,
) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed_port = unused.getsockname()[1]
    settings = ProxySettings(url=f"http://127.0.0.1:{closed_port}")
    dns = NameTable({"site.example": PUBLIC})
    refused = await _fetch(sessions, "http://site.example/", dns=dns, proxy=settings)
    unknown = ProxySettings(url="http://no-such-proxy.example:3128")
    unresolved = await _fetch(sessions, "http://site.example/", dns=dns, proxy=unknown)
    for result in (refused, unresolved):
        assert result.failure is not None
        assert (result.kind, result.failure.reason) == ("retryable", Reason.PROXY_ERROR)


async def test_a_bypassed_host_is_fetched_directly_under_the_address_guard(
    sessions: Sessions, origin: tuple[AppServer, list[dict[str, str]]]
) -> None:
    server, seen = origin
    async with forward_proxy() as proxy:
        bypassing = _proxy(proxy, bypass=("127.0.0.0/8",))
        allowed = await _fetch(sessions, server.url("/direct"), policy=LOOPBACK, proxy=bypassing)
        # The proxy's own address is trusted for the proxy's port only, not for a direct fetch.
        refused = await _fetch(sessions, server.url("/direct"), policy=STRICT, proxy=bypassing)
    assert (allowed.kind, allowed.status) == ("done", 200)
    assert refused.failure is not None and refused.failure.reason is Reason.BLOCKED_ADDRESS
    assert proxy.seen == []
    assert [request["path"] for request in seen] == ["/direct"]


# ----- TLS, through the proxy and directly ----------------------------------------------------


async def test_https_goes_through_a_connect_tunnel_and_the_certificate_is_the_targets(
    sessions: Sessions, ca: trustme.CA, tls_origin: tuple[int, list[dict[str, str]]]
) -> None:
    port, seen = tls_origin
    url = f"https://site.example:{port}/secure"
    dns = NameTable({"site.example": PUBLIC})
    async with forward_proxy({"site.example": "127.0.0.1"}) as proxy:
        trusted = await _fetch(
            sessions, url, dns=dns, proxy=_proxy(proxy), ssl_context=_trusting(ca)
        )
        untrusted = await _fetch(sessions, url, dns=dns, proxy=_proxy(proxy))
    assert (trusted.kind, trusted.status, bytes(trusted.body or b"")) == ("done", 200, BODY)
    assert proxy.seen == [f"CONNECT site.example:{port}"] * 2
    assert [request["path"] for request in seen] == ["/secure"]
    assert untrusted.failure is not None
    assert (untrusted.kind, untrusted.failure.reason) == ("permanent", Reason.TLS_CERTIFICATE)


async def test_a_ca_file_makes_a_private_ca_trusted_without_a_proxy(
    sessions: Sessions,
    ca: trustme.CA,
    tls_origin: tuple[int, list[dict[str, str]]],
    tmp_path: Path,
) -> None:
    port, _ = tls_origin
    url = f"https://127.0.0.1:{port}/direct"
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    settings = FetcherSettings(ca_file=ca_file)
    trusted = await _fetch(sessions, url, policy=LOOPBACK, ssl_context=settings.ssl_context())
    untrusted = await _fetch(sessions, url, policy=LOOPBACK)
    assert (trusted.kind, trusted.status) == ("done", 200)
    assert untrusted.failure is not None
    assert (untrusted.kind, untrusted.failure.reason) == ("permanent", Reason.TLS_CERTIFICATE)


async def test_site_credentials_travel_inside_the_tunnel_to_the_target_only(
    sessions: Sessions, ca: trustme.CA, tls_origin: tuple[int, list[dict[str, str]]]
) -> None:
    port, seen = tls_origin
    credentials = FetcherSettings.model_validate(
        {"credentials": {f"https://site.example:{port}": {"username": "u", "password": "p"}}}
    ).credentials
    async with forward_proxy({"site.example": "127.0.0.1"}) as proxy:
        session = await sessions.open(
            FAST_LIMITS,
            STRICT,
            NameTable({"site.example": PUBLIC}),
            proxy=_proxy(proxy),
            ssl_context=_trusting(ca),
            credentials=credentials,
        )
        target = FetchTarget(url=f"https://site.example:{port}/members")
        result = await fetch(session, target, FAST_LIMITS, FakeClock())
    assert (result.kind, result.status) == ("done", 200)
    assert seen[0]["Authorization"] == "Basic dTpw"
    assert proxy.seen == [f"CONNECT site.example:{port}"]
