"""Page-level robots directives: ``<meta name="robots">`` and the ``X-Robots-Tag`` header.

Only the two directives the crawler acts on are read: ``noindex`` (recorded for storage and
indexers) and ``nofollow`` (no link of the page is followed; DESIGN.md 3.6). ``none`` means both.
Restrictions from every source add up: one ``nofollow`` anywhere wins, as with Google's rules.

``robots_names`` are the meta names / header user-agent scopes that address this crawler, lowercase:
``robots`` (everyone) plus, if configured, the crawler's own token. In ``X-Robots-Tag`` a
``name: directive`` part scopes it and the parts after it to that user agent, e.g.
``otherbot: nofollow, noindex`` concerns only otherbot; directives that take a value
(``unavailable_after: ...``, ``max-snippet: 20``) are not scopes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_ROBOTS_NAMES: frozenset[str] = frozenset({"robots"})

_VALUED_DIRECTIVES = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)


@dataclass(frozen=True, slots=True)
class RobotsDirectives:
    """What a page asks of crawlers; both False when it asks nothing."""

    noindex: bool = False
    nofollow: bool = False

    def merge(self, other: RobotsDirectives) -> RobotsDirectives:
        return RobotsDirectives(self.noindex or other.noindex, self.nofollow or other.nofollow)


NO_DIRECTIVES = RobotsDirectives()


def directives_from_tokens(tokens: Iterable[str]) -> RobotsDirectives:
    """Fold directive tokens (any case, surrounding spaces allowed) into the two flags."""
    noindex = nofollow = False
    for token in tokens:
        word = token.strip().lower()
        if word == "none":
            noindex = nofollow = True
        elif word == "noindex":
            noindex = True
        elif word == "nofollow":
            nofollow = True
    return RobotsDirectives(noindex, nofollow)


def meta_robots(content: str) -> RobotsDirectives:
    """The directives of one robots meta tag's ``content`` (comma or space separated)."""
    return directives_from_tokens(content.replace(",", " ").split())


def x_robots_tag(
    value: str, robots_names: frozenset[str] = DEFAULT_ROBOTS_NAMES
) -> RobotsDirectives:
    """The directives of an ``X-Robots-Tag`` value (repeated headers joined with commas)."""
    applies = True
    tokens: list[str] = []
    for part in value.split(","):
        name, colon, rest = part.partition(":")
        name = name.strip().lower()
        directive = part
        if colon and name not in _VALUED_DIRECTIVES:
            applies = name in robots_names
            directive = rest
        if applies:
            tokens.append(directive)
    return directives_from_tokens(tokens)
