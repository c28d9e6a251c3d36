"""Length-prefixed fields of the frontier's binary records (visited records, queue entries).

Each field is a big-endian u16 length and its bytes; the length 0xFFFF marks an absent field.
"""

from __future__ import annotations

import struct

LENGTH = struct.Struct(">H")
ABSENT = 0xFFFF
ABSENT_FIELD = LENGTH.pack(ABSENT)


def pack_field(value: bytes | None, what: str) -> bytes:
    if value is None:
        return ABSENT_FIELD
    if len(value) >= ABSENT:
        raise ValueError(f"a {what} field of {len(value)} bytes is too long")
    return LENGTH.pack(len(value)) + value


def unpack_fields(raw: bytes, offset: int, count: int) -> list[bytes | None]:
    """`count` fields of `raw` from `offset` on."""
    values: list[bytes | None] = []
    for _ in range(count):
        (length,) = LENGTH.unpack_from(raw, offset)
        offset += LENGTH.size
        if length == ABSENT:
            values.append(None)
        else:
            values.append(raw[offset : offset + length])
            offset += length
    return values
