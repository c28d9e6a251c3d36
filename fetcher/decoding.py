"""Incremental Content-Encoding decoders that append to the body and never past its cap.

aiohttp's own decompression is off (``auto_decompress=False``) because it inflates whatever a
chunk holds: a 10 KB chunk of a deflate bomb becomes 10 MB in one call, and zstd or brotli chunks
far more. Here the caller's body buffer and its ``limit`` are passed in
(:meth:`BodyDecoder.decode_into`); decoded bytes are appended to the buffer in steps, and the
buffer never grows past the limit, so a bomb costs the body cap plus one call's output:

- gzip and deflate use zlib's ``max_length`` (at most ``DECODE_STEP_BYTES`` per call); what is
  left waits in ``unconsumed_tail``. Concatenated gzip members are decoded one after the other;
  "deflate" is zlib-wrapped as RFC 9110 says, or raw deflate when the first two bytes are not a
  zlib header (old IIS servers).
- zstd input is fed in slices of ``_ZSTD_SLICE_BYTES`` (128): a zstd block holds at most 128 KiB
  of output and needs at least 4 bytes, so a slice yields at most about 4 MiB, of which only what
  fits under the limit is kept. The window is capped at 8 MiB (the limit RFC 8878 sets for HTTP),
  which also caps the decoder's own allocation.
- br is decoded only with a brotli binding that has ``output_buffer_limit`` (brotli or brotlicffi
  1.2 and later); without one it is not offered in Accept-Encoding, and a server that sends it
  anyway gets :class:`~fetcher.exceptions.UnsupportedEncodingError`. The limit is where the
  binding's output buffer stops growing, so one call returns up to about twice the step; what
  does not fit under the body's limit is dropped.

Decoding runs on the event loop thread, one call at a time, so the step's transient exists once
per process, not once per fetch. A stream that ends early is accepted as a prefix (browsers show
it too); bytes that do not decode raise :class:`~fetcher.exceptions.CorruptEncodingError`.
"""

from __future__ import annotations

import importlib
import zlib
from abc import ABC, abstractmethod
from typing import Any

import zstandard

from fetcher.exceptions import CorruptEncodingError, UnsupportedEncodingError

ZSTD_MAX_WINDOW_BYTES = 8 * 1024 * 1024
DECODE_STEP_BYTES = 1024 * 1024
"""Output one zlib or brotli call is asked for before it is appended to the body."""
_ZSTD_SLICE_BYTES = 128
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


class BodyDecoder(ABC):
    """Decodes one body's bytes as they arrive."""

    @abstractmethod
    def decode_into(self, data: bytes, body: bytearray, limit: int) -> None:
        """Decode ``data`` and append the output to ``body``, which never grows past ``limit``
        bytes: output beyond it is dropped, so make the limit one more than the bytes wanted to
        learn that the body goes on."""

    def decode(self, data: bytes, room: int) -> bytes:
        """Decode ``data`` on its own; at most ``room`` (> 0) bytes of output."""
        body = bytearray()
        self.decode_into(data, body, room)
        return bytes(body)


class IdentityDecoder(BodyDecoder):
    """No Content-Encoding."""

    def decode_into(self, data: bytes, body: bytearray, limit: int) -> None:
        room = limit - len(body)
        if len(data) <= room:
            body += data
        elif room > 0:
            body += memoryview(data)[:room]


_IDENTITY = IdentityDecoder()
"""Shared: it keeps no state between calls."""


class ZlibDecoder(BodyDecoder):
    """gzip (``wbits`` 31) or deflate (zlib-wrapped 15, raw -15, chosen from the first bytes)."""

    def __init__(self, gzip: bool) -> None:
        self._gzip = gzip
        self._inflater: Any = zlib.decompressobj(47) if gzip else None
        self._head = b""

    def decode_into(self, data: bytes, body: bytearray, limit: int) -> None:
        if self._inflater is None:
            self._head += data
            if len(self._head) < 2:
                return
            self._inflater = zlib.decompressobj(15 if _is_zlib_header(self._head) else -15)
            data, self._head = self._head, b""
        try:
            while len(body) < limit:
                step = min(limit - len(body), DECODE_STEP_BYTES)
                chunk = self._inflater.decompress(data, step)
                body += chunk
                data = self._inflater.unconsumed_tail
                if self._inflater.eof:
                    data = self._next_member()
                    if not data:
                        return
                elif not data and len(chunk) < step:
                    return  # input used up, no output pending
        except zlib.error as error:
            raise CorruptEncodingError(f"{'gzip' if self._gzip else 'deflate'}: {error}") from error

    def _next_member(self) -> bytes:
        """After one gzip member, start the next if one follows; anything else is ignored."""
        rest: bytes = self._inflater.unused_data
        if self._gzip and rest.startswith(_GZIP_MAGIC):
            self._inflater = zlib.decompressobj(31)
            return rest
        return b""


def _is_zlib_header(head: bytes) -> bool:
    return head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0


class ZstdDecoder(BodyDecoder):
    """zstd, across concatenated frames, with an 8 MiB window limit."""

    def __init__(self) -> None:
        decompressor = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW_BYTES)
        self._decoder = decompressor.decompressobj(read_across_frames=True)

    def decode_into(self, data: bytes, body: bytearray, limit: int) -> None:
        view = memoryview(data)
        try:
            while view and len(body) < limit:
                chunk = self._decoder.decompress(view[:_ZSTD_SLICE_BYTES])
                view = view[_ZSTD_SLICE_BYTES:]
                room = limit - len(body)
                body += chunk if len(chunk) <= room else memoryview(chunk)[:room]
        except zstandard.ZstdError as error:
            raise CorruptEncodingError(f"zstd: {error}") from error


class BrotliDecoder(BodyDecoder):
    """br, through a binding whose ``process`` takes ``output_buffer_limit``."""

    def __init__(self) -> None:
        self._decoder = _BROTLI.Decompressor()

    def decode_into(self, data: bytes, body: bytearray, limit: int) -> None:
        try:
            chunk = self._decoder.process(data, output_buffer_limit=DECODE_STEP_BYTES)
            # Output may wait inside the decoder even when it says it can take more input, so
            # ask until it has none.
            while chunk:
                room = limit - len(body)
                body += chunk if len(chunk) <= room else memoryview(chunk)[:room]
                if len(body) >= limit:
                    return
                chunk = self._decoder.process(b"", output_buffer_limit=DECODE_STEP_BYTES)
        except _BROTLI.error as error:
            raise CorruptEncodingError(f"br: {error}") from error


def decoder_for(content_encoding: str | None) -> BodyDecoder:
    """The decoder for a Content-Encoding header value; one coding besides ``identity``.

    Raises UnsupportedEncodingError for anything else, stacked codings included: servers do not
    stack codings unless asked, and this fetcher never asks.
    """
    if content_encoding is None:  # most responses: no parsing, and the decoder keeps no state
        return _IDENTITY
    codings = [
        coding.strip().lower()
        for coding in (content_encoding or "").split(",")
        if coding.strip().lower() not in ("", "identity")
    ]
    if not codings:
        return _IDENTITY
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
