"""The link graph's errors, one base class so callers can route them in one place."""

from __future__ import annotations


class LinkGraphError(Exception):
    """Base of every link-graph error."""


class CorruptRecordError(LinkGraphError):
    """A stored record does not decode: the state is damaged, the message is dead-lettered."""


class PartitionMismatchError(LinkGraphError):
    """`links` and `links.by-target` differ in partition count: owners would split."""


class QueryError(LinkGraphError):
    """A query that cannot be answered; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class NotOwnedError(QueryError):
    """The key's partition is not open on this instance (moved during the query)."""

    def __init__(self, partition: int) -> None:
        super().__init__(f"partition {partition} is not served here", 503)
        self.partition = partition
