"""The fetcher's errors, one base class so callers route them in one place (`fetcher.errors`)."""

from __future__ import annotations

import errno


class FetcherError(Exception):
    """Base of every fetcher error."""


class BlockedAddressError(FetcherError, OSError):
    """A host resolved to, or was written as, an address the configuration does not allow.

    An ``OSError`` so that aiohttp, which wraps resolver and socket errors in its own connector
    errors, keeps it as the cause instead of failing in an unexpected way.
    """

    def __init__(self, host: str, address: str) -> None:
        super().__init__(errno.EACCES, f"address {address} of {host!r} is not allowed")
        self.host = host
        self.address = address


class UnsupportedEncodingError(FetcherError):
    """The response used a Content-Encoding this fetcher cannot decode (and did not ask for)."""


class CorruptEncodingError(FetcherError):
    """The body did not decode with the Content-Encoding the server declared."""


class HeadersTooLargeError(FetcherError):
    """The response's header block exceeded the configured total size."""
