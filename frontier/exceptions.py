"""The frontier's errors, one base class so callers can route them in one place."""

from __future__ import annotations


class FrontierError(Exception):
    """Base of every frontier error."""


class ApiPortUnavailableError(FrontierError):
    """The crawl API's configured port could not be had: the frontier must not run without it."""
