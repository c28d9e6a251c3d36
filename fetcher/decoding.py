"""Incremental Content-Encoding decoders whose output is bounded per call.

aiohttp's own decompression is off (``auto_decompress=False``) because it inflates whatever a
chunk holds: a 10 KB chunk of a deflate bomb becomes 10 MB in one call, and zstd or brotli chunks
far more. Here every call is given ``room``, the number of output bytes the caller still wants,
and never returns more than that, so a bomb costs at most the body cap in memory:

- gzip and deflate use zlib's ``max_length``; what is left waits in ``unconsumed_tail``.
  Concatenated gzip members are decoded one after the other; "deflate" is zlib-wrapped as RFC 9110
  says, or raw deflate when the first two bytes are not a zlib header (old IIS servers).
- zstd input is fed in slices small enough that one slice cannot expand past the room by much: a
  zstd block holds at most 128 KiB of output and needs at least 4 bytes, so a slice of ``s``
  bytes yields at most about ``s * 32768`` bytes. The window is capped at 8 MiB (the limit RFC
  8878 sets for HTTP), which also caps the decoder's own allocation.
- br is decoded only with a brotli binding that has ``output_buffer_limit`` (brotli or brotlicffi
  1.2 and later); without one it is not offered in Accept-Encoding, and a server that sends it
  anyway gets :class:`~fetcher.exceptions.UnsupportedEncodingError`.

A stream that ends early is accepted as a prefix (browsers show it too); bytes that do not decode
raise :class:`~fetcher.exceptions.CorruptEncodingError`.
"""

from __future__ import annotations

import importlib
import zlib
from typing import Any, Protocol

import zstandard

from fetcher.exceptions import CorruptEncodingError, UnsupportedEncodingError

ZSTD_MAX_WINDOW_BYTES = 8 * 1024 * 1024
_ZSTD_BLOCK_RATIO = 32768
_ZSTD_MIN_SLICE = 64
_ZSTD_MAX_SLICE = 64 * 1024
_GZIP_MAGIC = b"\x1f\x8b"


def _load_brotli() -> Any:
    """A brotli module whose Decompressor bounds its output, or None."""
    for name in ("brotli", "brotlicffi"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module.Decompressor(), "can_accept_more_data"):
            return module
    return None


_BROTLI: Any = _load_brotli()

SUPPORTED_ENCODINGS: tuple[str, ...] = ("gzip", "deflate", "zstd") + (
    ("br",) if _BROTLI is not None else ()
)
ACCEPT_ENCODING = ", ".join(SUPPORTED_ENCODINGS)
"""The Accept-Encoding header value: exactly what :func:`decoder_for` can decode."""


class BodyDecoder(Protocol):
    """Decodes one body's bytes as they arrive."""

    def decode(self, data: bytes, room: int) -> bytes:
        """Decode ``data``; return at most ``room`` (> 0) bytes. Output beyond ``room`` is
        dropped, so pass one more than the bytes still wanted to learn that the body goes on."""
        ...


class IdentityDecoder:
    """No Content-Encoding."""

    def decode(self, data: bytes, room: int) -> bytes:
        return data[:room]


class ZlibDecoder:
    """gzip (``wbits`` 31) or deflate (zlib-wrapped 15, raw -15, chosen from the first bytes)."""

    def __init__(self, gzip: bool) -> None:
        self._gzip = gzip
        self._inflater: Any = zlib.decompressobj(47) if gzip else None
        self._head = b""

    def decode(self, data: bytes, room: int) -> bytes:
        if self._inflater is None:
            self._head += data
            if len(self._head) < 2:
                return b""
            self._inflater = zlib.decompressobj(15 if _is_zlib_header(self._head) else -15)
            data, self._head = self._head, b""
        output: list[bytes] = []
        wanted = room
        try:
            while wanted > 0 and data:
                chunk = self._inflater.decompress(data, wanted)
                output.append(chunk)
                wanted -= len(chunk)
                data = self._inflater.unconsumed_tail
                if self._inflater.eof:
                    data = self._next_member()
        except zlib.error as error:
            raise CorruptEncodingError(f"{'gzip' if self._gzip else 'deflate'}: {error}") from error
        return b"".join(output)

    def _next_member(self) -> bytes:
        """After one gzip member, start the next if one follows; anything else is ignored."""
        rest: bytes = self._inflater.unused_data
        if self._gzip and rest.startswith(_GZIP_MAGIC):
            self._inflater = zlib.decompressobj(31)
            return rest
        return b""


def _is_zlib_header(head: bytes) -> bool:
    return head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0


class ZstdDecoder:
    """zstd, across concatenated frames, with an 8 MiB window limit."""

    def __init__(self) -> None:
        decompressor = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW_BYTES)
        self._decoder = decompressor.decompressobj(read_across_frames=True)

    def decode(self, data: bytes, room: int) -> bytes:
        output: list[bytes] = []
        produced = 0
        view = memoryview(data)
        try:
            while view and produced < room:
                size = min(_ZSTD_MAX_SLICE, max(_ZSTD_MIN_SLICE, room // _ZSTD_BLOCK_RATIO))
                chunk = self._decoder.decompress(view[:size].tobytes())
                view = view[size:]
                output.append(chunk)
                produced += len(chunk)
        except zstandard.ZstdError as error:
            raise CorruptEncodingError(f"zstd: {error}") from error
        return b"".join(output)[:room]


class BrotliDecoder:
    """br, through a binding whose ``process`` takes ``output_buffer_limit``."""

    def __init__(self) -> None:
        self._decoder = _BROTLI.Decompressor()

    def decode(self, data: bytes, room: int) -> bytes:
        output: list[bytes] = []
        wanted = room
        try:
            chunk = self._decoder.process(data, output_buffer_limit=wanted)
            output.append(chunk)
            wanted -= len(chunk)
            while wanted > 0 and not self._decoder.can_accept_more_data():
                chunk = self._decoder.process(b"", output_buffer_limit=wanted)
                if not chunk:
                    break
                output.append(chunk)
                wanted -= len(chunk)
        except _BROTLI.error as error:
            raise CorruptEncodingError(f"br: {error}") from error
        return b"".join(output)


def decoder_for(content_encoding: str | None) -> BodyDecoder:
    """The decoder for a Content-Encoding header value; one coding besides ``identity``.

    Raises UnsupportedEncodingError for anything else, stacked codings included: servers do not
    stack codings unless asked, and this fetcher never asks.
    """
    codings = [
        coding.strip().lower()
        for coding in (content_encoding or "").split(",")
        if coding.strip().lower() not in ("", "identity")
    ]
    if not codings:
        return IdentityDecoder()
    if len(codings) == 1:
        coding = codings[0]
        if coding in ("gzip", "x-gzip"):
            return ZlibDecoder(gzip=True)
        if coding == "deflate":
            return ZlibDecoder(gzip=False)
        if coding == "zstd":
            return ZstdDecoder()
        if coding == "br" and _BROTLI is not None:
            return BrotliDecoder()
    raise UnsupportedEncodingError(f"content-encoding {content_encoding!r}")
