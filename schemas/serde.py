"""Bytes on the wire, in one place.

Values are compact UTF-8 JSON of a pydantic model. Page bodies are not put inside JSON (base64 would
cost a third more and a copy); a FetchedPage travels in the body envelope:

    <JSON metadata, no raw newline inside> b"\\n" <body bytes, exactly body_size of them>

Large PageLinks and DiscoveredUrls are split into numbered parts (`part`, `parts`) each of which
fits under the topic's `max.message.bytes` (librdkafka checks the size before compression).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from schemas.exceptions import DecodeError
from schemas.pages import FetchedPage

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

PART_HEADROOM_BYTES = 4096
"""Left free under a topic's limit for the key, headers and record overhead."""


def encode(message: BaseModel) -> bytes:
    return message.__pydantic_serializer__.to_json(message)


def decode(schema: type[M] | TypeAdapter[Any], data: bytes | None) -> Any:
    """Parse and validate; any failure is a DecodeError whose text is the reason to dead-letter."""
    if data is None:
        raise DecodeError("message has no value")
    try:
        if isinstance(schema, TypeAdapter):
            return schema.validate_json(data)
        return schema.model_validate_json(data)
    except ValidationError as error:
        raise DecodeError(_describe(error)) from error
    except (UnicodeDecodeError, ValueError) as error:
        raise DecodeError(f"not valid JSON: {error}") from error


def validate(schema: type[M], fields: Any) -> M:
    """`decode` of a value already parsed from JSON (a dict of JSON's types, which the model
    validates as it would the JSON); a DecodeError says why not."""
    try:
        return schema.model_validate(fields)
    except ValidationError as error:
        raise DecodeError(_describe(error)) from error


def _describe(error: ValidationError) -> str:
    problems = [
        f"{'.'.join(str(part) for part in item['loc']) or '<root>'}: {item['msg']}"
        for item in error.errors()[:10]
    ]
    more = f" (+{error.error_count() - 10} more)" if error.error_count() > 10 else ""
    return f"{error.title}: " + "; ".join(problems) + more


def encode_page(page: FetchedPage, body: bytes | bytearray | memoryview) -> bytes:
    """The page envelope. ``body`` may be any buffer (the fetcher's bytearray, a view of it): it is
    copied once, into the envelope, and not kept."""
    size = body.nbytes if isinstance(body, memoryview) else len(body)
    if page.body_size != size:
        raise ValueError(f"body_size {page.body_size} does not match body of {size} bytes")
    return b"".join((encode(page), b"\n", body))


def decode_page(data: bytes | None) -> tuple[FetchedPage, bytes]:
    if data is None:
        raise DecodeError("message has no value")
    head, newline, body = data.partition(b"\n")
    if not newline:
        raise DecodeError("page envelope has no newline between metadata and body")
    page: FetchedPage = decode(FetchedPage, head)
    if page.body_size != len(body):
        raise DecodeError(f"page envelope says {page.body_size} body bytes, carries {len(body)}")
    return page, body


def split_into_parts(
    items: Sequence[T],
    build: Callable[[list[T], int, int], M],
    max_bytes: int,
) -> list[M]:
    """Pack items into as few messages as fit under max_bytes, numbered part 0..parts-1.

    `build(items, part, parts)` makes one message; an empty `items` still yields one message (a page
    with no links is still reported). A single item larger than the limit is an error: callers cap
    item sizes (URL length, anchor length) well below it.
    """
    budget = max_bytes - PART_HEADROOM_BYTES
    empty_size = len(encode(build([], 0, 1)))
    if empty_size >= budget:
        raise ValueError("an empty message already exceeds the size limit")
    adapter: TypeAdapter[Any] = TypeAdapter(Any)
    chunks: list[list[T]] = [[]]
    used = empty_size
    for item in items:
        size = len(adapter.dump_json(item)) + 1
        if empty_size + size > budget:
            raise ValueError(f"one item of {size} bytes exceeds the message limit of {budget}")
        if used + size > budget and chunks[-1]:
            chunks.append([])
            used = empty_size
        chunks[-1].append(item)
        used += size
    return [build(chunk, index, len(chunks)) for index, chunk in enumerate(chunks)]
