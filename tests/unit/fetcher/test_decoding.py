"""Incremental decoders: exact round trips in any chunking, bounded output, corrupt input."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from fetcher.decoding import (
    ACCEPT_ENCODING,
    DECODE_STEP_BYTES,
    SUPPORTED_ENCODINGS,
    BodyDecoder,
    decoder_for,
)
from fetcher.exceptions import CorruptEncodingError, UnsupportedEncodingError
from tests.unit.fetcher.bombs import BOMBS, MIB, whole_bomb


def _encode(coding: str, data: bytes) -> bytes:
    if coding == "gzip":
        return gzip.compress(data)
    if coding == "deflate":
        return zlib.compress(data)
    if coding == "raw-deflate":
        compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
        return compressor.compress(data) + compressor.flush()
    if coding == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    return data


def _decode_all(decoder: BodyDecoder, encoded: bytes, cuts: list[int], room: int) -> bytes:
    output = b""
    start = 0
    for cut in [*sorted(cuts), len(encoded)]:
        output += decoder.decode(encoded[start:cut], room - len(output))
        start = cut
    return output


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw-deflate", "zstd", "identity"])
@given(data=st.binary(max_size=5000), cuts=st.lists(st.integers(0, 6000), max_size=8))
@settings(max_examples=40, deadline=None)
def test_round_trip_in_any_chunking(coding: str, data: bytes, cuts: list[int]) -> None:
    encoded = _encode(coding, data)
    header = "deflate" if coding == "raw-deflate" else coding
    cuts = [min(cut, len(encoded)) for cut in cuts]
    decoded = _decode_all(decoder_for(header), encoded, cuts, room=len(data) + 1)
    assert decoded == data


@pytest.mark.parametrize("coding", ["gzip", "deflate", "zstd", "identity"])
def test_output_never_exceeds_room(coding: str) -> None:
    data = bytes(range(256)) * 4000
    decoder = decoder_for(coding)
    output = decoder.decode(_encode(coding, data), 1000)
    assert output == data[:1000]


def test_concatenated_gzip_members_are_all_decoded() -> None:
    encoded = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decoder_for("gzip").decode(encoded, 100) == b"first second"


def test_concatenated_zstd_frames_are_all_decoded() -> None:
    compressor = zstandard.ZstdCompressor()
    encoded = compressor.compress(b"one ") + compressor.compress(b"two")
    assert decoder_for("zstd").decode(encoded, 100) == b"one two"


@pytest.mark.parametrize("coding", ["gzip", "deflate", "zstd"])
def test_garbage_is_a_corrupt_encoding(coding: str) -> None:
    with pytest.raises(CorruptEncodingError):
        decoder_for(coding).decode(b"\x00\x01this is not compressed at all" * 10, 10_000)


def test_zstd_window_over_8_mib_is_refused() -> None:
    params = zstandard.ZstdCompressionParameters.from_level(19, window_log=27)
    compressor = zstandard.ZstdCompressor(compression_params=params)
    chunker = compressor.compressobj()
    encoded = chunker.compress(b"x" * 1000) + chunker.flush()
    with pytest.raises(CorruptEncodingError):
        decoder_for("zstd").decode(encoded, 10_000)


@pytest.mark.parametrize("header", ["compress", "gzip, gzip", "x-unknown", "br, gzip"])
def test_unsupported_codings_are_refused(header: str) -> None:
    with pytest.raises(UnsupportedEncodingError):
        decoder_for(header)


def test_identity_and_case_are_tolerated() -> None:
    assert decoder_for(" GZIP ").decode(gzip.compress(b"a"), 10) == b"a"
    assert decoder_for("identity").decode(b"abc", 10) == b"abc"
    assert decoder_for(None).decode(b"abc", 2) == b"ab"


def test_accept_encoding_lists_exactly_what_decodes() -> None:
    assert ACCEPT_ENCODING.split(", ") == list(SUPPORTED_ENCODINGS)
    for coding in SUPPORTED_ENCODINGS:
        decoder_for(coding)
    if "br" not in SUPPORTED_ENCODINGS:
        with pytest.raises(UnsupportedEncodingError):
            decoder_for("br")


@pytest.mark.parametrize("kind", sorted(BOMBS))
def test_a_whole_bomb_in_one_call_costs_only_the_room(kind: str) -> None:
    bomb = whole_bomb(kind, 1024)
    tracemalloc.start()
    try:
        output = decoder_for(kind.removeprefix("raw-")).decode(bomb, MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert output == bytes(MIB)
    assert peak < 8 * MIB


def _encode_any(coding: str, data: bytes) -> bytes:
    if coding == "br":
        import brotli  # type: ignore[import-untyped]  # noqa: PLC0415

        return bytes(brotli.compress(data, quality=1))
    return _encode(coding, data)


@pytest.mark.parametrize("coding", SUPPORTED_ENCODINGS)
def test_bodies_longer_than_one_step_decode_whole(coding: str) -> None:
    """Several steps' output from one call, ending on a step boundary and past it."""
    data = bytes(range(256)) * (3 * DECODE_STEP_BYTES // 256) + b"tail"
    body = bytearray(b"kept:")
    decoder_for(coding).decode_into(_encode_any(coding, data), body, len(data) + 100)
    assert body == b"kept:" + data


@pytest.mark.parametrize("coding", ["gzip", "deflate", "zstd", "identity"])
def test_the_body_never_grows_past_the_limit(coding: str) -> None:
    data = bytes(range(256)) * 20_000
    encoded = _encode(coding, data)
    body = bytearray()
    decoder = decoder_for(coding)
    for start in range(0, len(encoded), 7000):
        decoder.decode_into(encoded[start : start + 7000], body, 1_000_001)
        assert len(body) <= 1_000_001
    assert body == data[:1_000_001]


@pytest.mark.parametrize("kind", sorted(BOMBS))
def test_a_bomb_costs_the_limit_plus_one_step(kind: str) -> None:
    """The body is the only buffer that grows: no join, no slice, no copy of the output."""
    bomb = whole_bomb(kind, 64)
    limit = 16 * MIB
    tracemalloc.start()
    try:
        body = bytearray()
        decoder_for(kind.removeprefix("raw-")).decode_into(bomb, body, limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(body) == limit and body.count(0) == limit
    assert peak < limit + 2 * MIB + 4 * MIB, "the body, its growth slack, one step or zstd slice"
