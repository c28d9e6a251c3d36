"""HTTP Basic credentials per origin (`fetcher.credentials`): sent there, and nowhere else."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from pydantic import ValidationError

from fetcher.credentials import SiteCredentials
from fetcher.errors import Reason
from fetcher.http import fetch
from fetcher.results import FetchResult, FetchTarget
from fetcher.service import FetcherServiceSettings
from fetcher.settings import FetcherSettings
from streamcrawl.clock import FakeClock
from tests.unit.fetcher.conftest import FAST_LIMITS, LOOPBACK, Sessions
from tests.unit.fetcher.servers import AppServer, app_server

EXPECTED = "Basic " + base64.b64encode(b"crawler:s3cret").decode()


def _protected(seen: list[str | None]) -> web.Application:
    async def page(request: web.Request) -> web.Response:
        authorization = request.headers.get("Authorization")
        seen.append(authorization)
        if authorization != EXPECTED:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="wiki"'})
        return web.Response(body=b"<html>members only</html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    return app


@pytest.fixture
async def protected() -> AsyncIterator[tuple[AppServer, list[str | None]]]:
    seen: list[str | None] = []
    async with app_server(_protected(seen)) as server:
        yield server, seen


def _credentials(origin: str) -> dict[str, SiteCredentials]:
    settings = FetcherSettings.model_validate(
        {"credentials": {origin: {"username": "crawler", "password": "s3cret"}}}
    )
    return settings.credentials


async def _fetch(sessions: Sessions, url: str, origin: str) -> FetchResult:
    session = await sessions.open(FAST_LIMITS, LOOPBACK, credentials=_credentials(origin))
    return await fetch(session, FetchTarget(url=url), FAST_LIMITS, FakeClock())


async def test_credentials_are_sent_to_their_origin(
    sessions: Sessions, protected: tuple[AppServer, list[str | None]]
) -> None:
    server, seen = protected
    result = await _fetch(sessions, server.url("/wiki/Home"), f"http://127.0.0.1:{server.port}")
    assert (result.kind, result.status) == ("done", 200)
    assert seen == [EXPECTED]


async def test_no_other_origin_gets_them_not_even_the_same_host_on_another_port(
    sessions: Sessions, protected: tuple[AppServer, list[str | None]]
) -> None:
    server, seen = protected
    elsewhere = f"http://127.0.0.1:{server.port + 1 if server.port < 65535 else 1}"
    result = await _fetch(sessions, server.url("/wiki/Home"), elsewhere)
    assert result.failure is not None
    assert (result.kind, result.failure.reason, result.status) == (
        "permanent",
        Reason.HTTP_STATUS,
        401,
    )
    assert seen == [None]


def test_a_credentials_key_must_be_an_origin_and_the_password_stays_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in (
        "https://wiki.example/path",
        "ftp://wiki.example",
        "wiki.example",
        "https://u@w.ex",
    ):
        with pytest.raises(ValidationError, match="must be an origin"):
            _credentials(key)
    assert list(_credentials("HTTPS://Wiki.Example:443/")) == ["https://wiki.example"]
    monkeypatch.setenv(
        "STREAMCRAWL_FETCHER__CREDENTIALS",
        '{"https://wiki.example": {"username": "crawler", "password": "hunter2"}}',
    )
    fetcher = FetcherServiceSettings().fetcher
    assert fetcher.credentials["https://wiki.example"].password.get_secret_value() == "hunter2"
    assert "hunter2" not in repr(fetcher) and "hunter2" not in str(fetcher)
