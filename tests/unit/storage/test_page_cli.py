"""`streamcrawl page`'s client: a member that died moments ago is skipped, errors are told apart."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.page_cli import PageApi, PageNotFoundError
from tests.support import LocalSite


@pytest.fixture
def site() -> Iterator[LocalSite]:
    served = LocalSite(
        {
            "/v1/page?url=a": (200, {"Content-Type": "application/json"}, b'{"url": "a"}'),
            "/v1/page?url=b": (404, {}, b'{"error": "no page stored for b"}'),
            "/v1/page?url=c": (503, {}, b'{"error": "pages partition 1 is moving"}'),
        }
    ).start()
    yield served
    served.stop()


def refused_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"  # closed on exit: nothing listens there


def test_a_dead_member_is_skipped_for_the_next(site: LocalSite) -> None:
    api = PageApi([refused_address(), site.host])
    assert api.get("/v1/page", url="a") == b'{"url": "a"}'
    assert api.get("/v1/page", url="a") == b'{"url": "a"}'  # the dead one is not tried again


def test_not_found_and_server_errors_are_told_apart(site: LocalSite) -> None:
    api = PageApi([site.host])
    with pytest.raises(PageNotFoundError, match="no page stored for b"):
        api.get("/v1/page", url="b")
    with pytest.raises(StreamcrawlError, match="503: pages partition 1 is moving"):
        api.get("/v1/page", url="c")


def test_no_member_answering_is_an_error() -> None:
    with pytest.raises(StreamcrawlError, match="did not answer"):
        PageApi([refused_address()]).get("/v1/page", url="a")
