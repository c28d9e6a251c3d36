"""`urls` values as admission reads them: DiscoveredUrls without a model object per URL.

`decode_urls` is the loop's decoder of `urls`. A DiscoveredUrls value whose fields have exactly the
JSON types `schemas.urls.DiscoveredUrls` takes without coercion (every value the parser and the
frontier send) is parsed with orjson and checked field by field, a strict subset of what the model
accepts; any other value (a ParseReport, a number where the model would coerce it, bad JSON, no
value) goes through the pydantic model, which decides and words a dead-letter reason. Either way a
DiscoveredUrls arrives as a :class:`ReceivedUrls`: the message's fields, its URLs as one list of
strings and their hints beside them (sitemap priorities and lastmod times), so admission
allocates nothing per URL before it canonicalises. `tests/unit/frontier/test_wire.py` feeds both
paths the same values, good and bad.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from schemas.serde import decode
from schemas.urls import URLS_MESSAGE, DiscoveredUrls, ParseReport

MAX_EPOCH_MILLIS = 2**53
"""`schemas.base.EpochMillis`' bound."""
KIND = "discovered_urls"


@dataclass(slots=True)
class ReceivedUrls:
    """`DiscoveredUrls`' fields, validated; ``urls[i]``'s sitemap priority is ``priorities[i]``
    and its lastmod ``modified_at[i]``, each list None when no URL has one (the common case)."""

    v: int
    crawl_id: str
    host: str
    depth: int
    source_url: str | None
    redirect_hops: int
    discovered_at: int
    urls: list[str]
    priorities: list[float | None] | None
    part: int
    parts: int
    origin: str | None
    modified_at: list[int | None] | None = None
    requisites: bool = False

    @classmethod
    def of(cls, message: DiscoveredUrls) -> ReceivedUrls:
        """The model's fields as received ones (the decoder's fallback, seeds in tests)."""
        hints = [item.priority for item in message.urls]
        modified = [item.modified_at for item in message.urls]
        return cls(
            message.v,
            message.crawl_id,
            message.host,
            message.depth,
            message.source_url,
            message.redirect_hops,
            message.discovered_at,
            [item.url for item in message.urls],
            None if all(hint is None for hint in hints) else hints,
            message.part,
            message.parts,
            message.origin,
            None if all(time is None for time in modified) else modified,
            message.requisites,
        )

    def to_json(self) -> bytes:
        """DiscoveredUrls JSON (what `pending` stores): `decode_urls` reads it back."""
        urls: list[dict[str, Any]] = [{"url": url} for url in self.urls]
        for name, hints in (("priority", self.priorities), ("modified_at", self.modified_at)):
            if hints is not None:
                for item, hint in zip(urls, hints, strict=True):
                    if hint is not None:
                        item[name] = hint
        fields: dict[str, Any] = {
            "kind": KIND,
            "v": self.v,
            "crawl_id": self.crawl_id,
            "host": self.host,
            "depth": self.depth,
            "source_url": self.source_url,
            "redirect_hops": self.redirect_hops,
            "discovered_at": self.discovered_at,
            "urls": urls,
            "part": self.part,
            "parts": self.parts,
            "origin": self.origin,
        }
        if self.requisites:
            fields["requisites"] = True
        return orjson.dumps(fields)


def decode_urls(raw: bytes | None) -> ReceivedUrls | ParseReport:
    """The loop's decoder of `urls` (see the module docstring); a `DecodeError` for a value the
    model refuses."""
    if raw is not None:
        try:
            fields = orjson.loads(raw)
        except orjson.JSONDecodeError:
            fields = None
        if type(fields) is dict and fields.get("kind") == KIND:
            received = _checked(fields)
            if received is not None:
                return received
    message: DiscoveredUrls | ParseReport = decode(URLS_MESSAGE, raw)
    if isinstance(message, DiscoveredUrls):
        return ReceivedUrls.of(message)
    return message


def decode_pending(raw: bytes) -> ReceivedUrls:
    """A DiscoveredUrls that `pending` held (`ReceivedUrls.to_json`, or the model's JSON)."""
    message = decode_urls(raw)
    if not isinstance(message, ReceivedUrls):
        raise ValueError("a pending entry that is not a DiscoveredUrls")
    return message


def _checked(fields: dict[str, Any]) -> ReceivedUrls | None:
    """The fields as `DiscoveredUrls` would take them, or None if it might judge otherwise
    (a missing or mistyped field, a value it would coerce or refuse: the model decides those)."""
    v = fields.get("v", 1)
    crawl_id = fields.get("crawl_id")
    host = fields.get("host")
    depth = fields.get("depth")
    source_url = fields.get("source_url")
    redirect_hops = fields.get("redirect_hops", 0)
    discovered_at = fields.get("discovered_at")
    items = fields.get("urls")
    part = fields.get("part", 0)
    parts = fields.get("parts", 1)
    origin = fields.get("origin")
    requisites = fields.get("requisites", False)
    if not (
        type(v) is int
        and v >= 1
        and type(crawl_id) is str
        and type(host) is str
        and type(depth) is int
        and depth >= 0
        and (source_url is None or type(source_url) is str)
        and type(redirect_hops) is int
        and redirect_hops >= 0
        and type(discovered_at) is int
        and 0 <= discovered_at <= MAX_EPOCH_MILLIS
        and type(items) is list
        and type(part) is int
        and part >= 0
        and type(parts) is int
        and parts >= 1
        and (origin is None or type(origin) is str)
        and type(requisites) is bool
    ):
        return None
    try:
        # Only a dict answers a str index (orjson makes dicts, lists, str and scalars).
        urls = [item["url"] for item in items]
    except (TypeError, KeyError):
        return None
    if not all(type(url) is str for url in urls):
        return None
    priorities: list[float | None] | None = None
    modified: list[int | None] | None = None
    if not all(len(item) == 1 for item in items):  # a version, a hint or an unknown field
        versions = [item.get("v", 1) for item in items]
        if not all(type(version) is int and version >= 1 for version in versions):
            return None
        priorities = [item.get("priority") for item in items]
        if not all(hint is None or type(hint) is float for hint in priorities):
            return None
        if all(hint is None for hint in priorities):
            priorities = None
        modified = [item.get("modified_at") for item in items]
        if not all(
            time is None or (type(time) is int and 0 <= time <= MAX_EPOCH_MILLIS)
            for time in modified
        ):
            return None
        if all(time is None for time in modified):
            modified = None
    return ReceivedUrls(
        v,
        crawl_id,
        host,
        depth,
        source_url,
        redirect_hops,
        discovered_at,
        urls,
        priorities,
        part,
        parts,
        origin,
        modified,
        requisites,
    )
