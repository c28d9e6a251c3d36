"""Decompression bombs built in milliseconds: a stream head and a unit that can be repeated.

Each unit decodes to 1 MiB of zeros. For zlib streams a full flush after every MiB resets the
compressor's history, so every unit after the first is byte-identical and the stream stays valid
however often it is repeated (the trailer never comes: the fetcher must stop long before). For zstd
a unit is a whole frame, and concatenated frames are one valid stream.
"""

from __future__ import annotations

import zlib

import zstandard

MIB = 1024 * 1024


def zlib_bomb(wbits: int) -> tuple[bytes, bytes]:
    """Head and unit for gzip (``wbits`` 31), zlib-wrapped deflate (15) or raw deflate (-15)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, wbits)
    first = compressor.compress(bytes(MIB)) + compressor.flush(zlib.Z_FULL_FLUSH)
    unit = compressor.compress(bytes(MIB)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return first[: len(first) - len(unit)], unit


def zstd_bomb() -> tuple[bytes, bytes]:
    return b"", zstandard.ZstdCompressor(level=19).compress(bytes(MIB))


BOMBS = {
    "gzip": lambda: zlib_bomb(31),
    "deflate": lambda: zlib_bomb(15),
    "raw-deflate": lambda: zlib_bomb(-15),
    "zstd": zstd_bomb,
}
"""Kind -> builder; the Content-Encoding of raw-deflate is "deflate"."""


def whole_bomb(kind: str, mebibytes: int) -> bytes:
    head, unit = BOMBS[kind]()
    return head + unit * mebibytes
