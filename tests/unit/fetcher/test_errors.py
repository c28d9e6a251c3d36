"""Retry-After parsing and the status and exception classification."""

from __future__ import annotations

import email.utils

import aiohttp
import pytest

from fetcher.errors import Reason, classify_exception, classify_status, parse_retry_after
from fetcher.exceptions import BlockedAddressError

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 0 ", 0.0),
        ("99999", 3600.0),
        (email.utils.formatdate(NOW + 90, usegmt=True), 90.0),
        (email.utils.formatdate(NOW - 90, usegmt=True), 0.0),
        (email.utils.formatdate(NOW + 86400, usegmt=True), 3600.0),
        ("Sunday, 06-Nov-94 08:49:37 GMT", 0.0),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (200, None),
        (304, None),
        (400, "permanent"),
        (404, "permanent"),
        (408, "retryable"),
        (429, "retryable"),
        (500, "retryable"),
        (503, "retryable"),
        (600, "permanent"),
    ],
)
def test_classify_status(status: int, kind: str | None) -> None:
    failure = classify_status(status, "7", NOW)
    assert (failure.kind if failure else None) == kind
    if status in (429, 503):
        assert failure is not None and failure.retry_after_s == 7.0
    elif failure is not None:
        assert failure.retry_after_s is None


def test_blocked_address_is_found_inside_aiohttp_wrappers() -> None:
    cause = BlockedAddressError("internal.example", "10.0.0.1")
    wrapped = aiohttp.ClientConnectorError(
        aiohttp.client_reqrep.ConnectionKey("internal.example", 80, False, True, None, None, None),
        cause,
    )
    failure = classify_exception(wrapped)
    assert (failure.kind, failure.reason) == ("permanent", Reason.BLOCKED_ADDRESS)
    assert failure.message() == "blocked_address: 10.0.0.1 for internal.example"


def test_timeouts_are_retryable() -> None:
    assert classify_exception(TimeoutError()).reason is Reason.TIMEOUT
    assert classify_exception(aiohttp.SocketTimeoutError()).reason is Reason.READ_TIMEOUT
    assert classify_exception(aiohttp.ConnectionTimeoutError()).reason is Reason.CONNECT_TIMEOUT


def test_anything_else_is_a_bug_not_a_fetch_failure() -> None:
    with pytest.raises(TypeError):
        classify_exception(KeyError("oops"))
