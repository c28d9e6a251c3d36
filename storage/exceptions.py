"""The storage service's errors, one base class so callers can route them in one place."""

from __future__ import annotations


class StorageError(Exception):
    """Base of every storage error."""


class BlobCorruptError(StorageError):
    """A blob that does not decompress, or whose content does not hash to its name."""


class WarcError(StorageError):
    """A WARC file that cannot be written or read back as expected."""


class StorageUnavailableError(StorageError):
    """A write to `storage.root` failed (full, read-only, I/O error): the service stops before it
    commits, so the pages are stored after the disk is fixed instead of being dead-lettered."""


class ApiPortUnavailableError(StorageError):
    """The page API's configured port could not be had."""
