"""Errors of the contract layer."""


class SchemaError(Exception):
    """Base of every schemas error."""


class DecodeError(SchemaError):
    """Bytes that are not a valid message of the expected type; the reason says why."""
