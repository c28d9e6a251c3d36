"""A page's declarative refresh: ``<meta http-equiv="refresh" content="0; url=/new">`` or the
``Refresh`` header of the same syntax. Browsers follow it as a redirect, so a crawler must too
(Nutch, Heritrix and Scrapy's MetaRefreshMiddleware do): it is how many sites move a page without
server configuration, and a page behind it is otherwise never reached.

:func:`parse_refresh` reads the content as the HTML standard's "shared declarative refresh steps"
do (a delay, then an optional ``url=`` with or without quotes), so whatever a browser follows is
followed; what a browser ignores yields None.
"""

from __future__ import annotations

from dataclasses import dataclass

_WHITESPACE = "\t\n\f\r "
_DIGITS = "0123456789"
_MAX_DIGITS = 9
_FOREVER_S = 10**_MAX_DIGITS
"""A longer delay is as good as never (and int() refuses strings of thousands of digits)."""


@dataclass(frozen=True, slots=True)
class Refresh:
    delay_s: int
    """Whole seconds, as the standard reads them (``1.5`` waits one second)."""
    href: str | None
    """The URL as written, not yet resolved; None: the page reloads itself."""


def parse_refresh(content: str) -> Refresh | None:
    """The refresh ``content`` asks for, or None when a browser would ignore it."""
    end = len(content)
    position = _skip(content, 0, _WHITESPACE)
    digits_end = _skip(content, position, _DIGITS)
    if digits_end == position and (position == end or content[position] != "."):
        return None
    digits = content[position:digits_end]
    delay = int(digits or 0) if len(digits) <= _MAX_DIGITS else _FOREVER_S
    position = _skip(content, digits_end, _DIGITS + ".")
    if position == end:
        return Refresh(delay, None)
    if content[position] not in _WHITESPACE + ";,":
        return None
    position = _skip(content, position, _WHITESPACE)
    if position < end and content[position] in ";,":
        position += 1
    position = _skip(content, position, _WHITESPACE)
    if position == end:
        return Refresh(delay, None)
    href = _url_part(content, position)
    return Refresh(delay, href or None)


def _url_part(content: str, position: int) -> str:
    """The standard's steps from "Let urlString be ...": an optional ``url =``, optional quotes."""
    whole = content[position:]
    if content[position] in "Uu":
        if not content.startswith(("rl", "RL", "rL", "Rl"), position + 1):
            return whole  # "parse" (or "skip quotes" after a lone "u", which reads the same)
        position = _skip(content, position + 3, _WHITESPACE)
        if position == len(content) or content[position] != "=":
            return whole
        position = _skip(content, position + 1, _WHITESPACE)
    quote = content[position] if position < len(content) and content[position] in "'\"" else ""
    rest = content[position + len(quote) :]
    return rest.split(quote, 1)[0] if quote else rest


def _skip(content: str, position: int, characters: str) -> int:
    while position < len(content) and content[position] in characters:
        position += 1
    return position
