"""One pass over a parsed page: its visible text, every link in it, and where each link sits.

The context window of a link is text on both sides of it, so the page's visible text must be laid
out in document order with each link's place in it. Per-link XPath (``preceding::text()``) would be
quadratic, and per-link selector calls are what makes bare parsel slow; instead one pass of
``root.iter()`` over the tree (each element once, in document order, generated in C) appends each
visible text node as it is to one list (the *stream*), and a link records the stream's length when
it opens and when it closes. Slicing the joined stream then gives a link's anchor text and context,
normalised only then, for only those few hundred characters: time linear in the page.

Rules of the text stream:

- Text of ``script``, ``style`` and ``title`` is never visible. ``noscript`` and ``template``
  subtrees add no visible text but are still walked, so their links are found, as by ``a[href]``;
  such a link's anchor text is read from its own subtree instead.
- Whitespace-only text nodes and block elements (and ``<br>``) are word boundaries, one space
  each at most; inline elements are not (``foo<b>bar</b>`` reads ``foobar``). Slices are
  normalised with ``str.split``: runs of Unicode whitespace, NBSP included, become one space. CSS
  is not evaluated: text hidden by a stylesheet counts as visible.

Positions come from the nearest landmark ancestor, by element or ARIA role (an explicit role wins):
``nav``/navigation and a page-level ``header``/banner are NAV, a page-level ``footer``/contentinfo
is FOOTER, ``aside``/complementary is SIDEBAR, and ``main``/main resets to CONTENT. As in HTML-AAM,
``header`` and ``footer`` are page-level only outside article, aside, main, nav and section (and the
matching roles): an article's own header or footer takes the position around it. An ``article``
does not reset to CONTENT, so the teasers in an ``<aside>`` of related articles stay SIDEBAR.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lxml import etree

from schemas.links import LinkPosition

_INVISIBLE_LEAVES = frozenset({"script", "style", "title"})
_HIDDEN_SUBTREES = frozenset({"noscript", "template"})
_LINK_TAGS = frozenset({"a", "area"})
_BLOCK_TAGS = frozenset(
    {
        *("address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details"),
        *("dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form"),
        *("h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "html", "li", "legend"),
        *("main", "menu", "nav", "ol", "option", "p", "pre", "section", "summary", "table"),
        *("tbody", "td", "tfoot", "th", "thead", "tr", "ul"),
    }
)
_TAG_LANDMARKS: dict[str, LinkPosition] = {
    "nav": "NAV",
    "header": "NAV",
    "footer": "FOOTER",
    "aside": "SIDEBAR",
    "main": "CONTENT",
}
_ROLE_LANDMARKS: dict[str, LinkPosition] = {
    "navigation": "NAV",
    "banner": "NAV",
    "contentinfo": "FOOTER",
    "complementary": "SIDEBAR",
    "main": "CONTENT",
}
_PAGE_LEVEL_ONLY = frozenset({"header", "footer"})
_SECTIONING_TAGS = frozenset({"article", "aside", "main", "nav", "section"})
_SECTIONING_ROLES = frozenset({"article", "complementary", "main", "navigation", "region"})
_LANDMARK_TAGS = frozenset(_TAG_LANDMARKS) | _SECTIONING_TAGS

# What the walk needs to know of a tag, as bits: one dictionary lookup per element. Comments and
# processing instructions (whose ``tag`` is a function) hold no visible text, like scripts.
_BLOCK, _INVISIBLE, _HIDDEN, _LINK, _IMAGE, _LANDMARK = 1, 2, 4, 8, 16, 32
_SPECIAL = _HIDDEN | _LINK | _IMAGE | _LANDMARK
_TAG_KINDS: dict[Any, int] = {}
for _bit, _tags in (
    (_BLOCK, _BLOCK_TAGS),
    (_INVISIBLE, {*_INVISIBLE_LEAVES, etree.Comment, etree.ProcessingInstruction, etree.Entity}),
    (_HIDDEN, _HIDDEN_SUBTREES),
    (_LINK, _LINK_TAGS),
    (_IMAGE, {"img"}),
    (_LANDMARK, _LANDMARK_TAGS),
):
    for _tag in _tags:
        _TAG_KINDS[_tag] = _TAG_KINDS.get(_tag, 0) | _bit


@dataclass(slots=True)
class LinkOccurrence:
    """One ``a[href]`` or ``area[href]`` as found; ``start:end`` is its span of the text stream."""

    href: str
    start: int
    end: int = -1
    position: LinkPosition = "CONTENT"
    element: Any = None
    """The element, kept only for links in hidden subtrees (their text is read afterwards)."""
    image_alt: str | None = None
    title: str | None = None
    rel: str | None = None


@dataclass
class WalkedPage:
    """A page's text stream (raw text nodes, a space at each word boundary) and its links, in
    document order of their start tags."""

    stream: str
    links: list[LinkOccurrence] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    """Where the stream leaves the page's content for a NAV, FOOTER or SIDEBAR landmark, and where
    it comes back, alternately (its offsets, ascending)."""

    def visible_text_length(self) -> int:
        return len(" ".join(self.stream.split()))

    def main_text(self) -> str:
        """The visible text outside navigation, page-level header and footer, and asides: what
        the page says, without the template every page of its site repeats."""
        bounds = [0, *self.turns, len(self.stream)]
        return " ".join(
            self.stream[bounds[n] : bounds[n + 1]] for n in range(0, len(bounds) - 1, 2)
        )

    def anchor_text(self, link: LinkOccurrence, max_chars: int) -> str:
        """The link's own visible text, normalised and cut to ``max_chars``."""
        if link.element is not None:
            return subtree_text(link.element)[:max_chars]
        # Whitespace shrinks when normalised, so a raw slice of 8x the limit is plenty.
        return " ".join(self.stream[link.start : link.end][: 8 * max_chars].split())[:max_chars]

    def context(self, link: LinkOccurrence, shown: str, side_chars: int) -> str:
        """About ``side_chars`` of visible text before the link, ``shown`` (its anchor text from
        :meth:`anchor_text`), and as many after, normalised.

        The sides are cut from the raw stream, so a side whose raw text holds runs of whitespace
        yields a little fewer visible characters. A word cut at the outer edge is dropped, and
        "foo<a>bar</a>" stays one word, as on screen.
        """
        stream, start, end = self.stream, link.start, link.end
        left = max(0, start - side_chars)
        before = stream[left:start]
        if left > 0 and before[:1].strip() and not stream[left - 1].isspace():
            parts = before.split(None, 1)
            before = parts[1] if len(parts) == 2 else ""
        right = end + side_chars
        after = stream[end:right]
        if right < len(stream) and after[-1:].strip() and not stream[right].isspace():
            parts = after.rsplit(None, 1)
            after = parts[0] if len(parts) == 2 else ""
        if link.element is not None or not shown:
            middle = f" {shown} "
        else:
            lead = " " if stream[start].isspace() else ""
            middle = f"{lead}{shown} " if stream[end - 1].isspace() else f"{lead}{shown}"
        return " ".join(f"{before}{middle}{after}".split())


def walk_page(root: Any) -> WalkedPage:
    """Walk the lxml tree under ``root`` once; see the module docstring for the rules.

    ``root.iter()`` yields each element once, in document order, at C speed; the element's end
    (where its tail and closing work go) is when the next element is no longer its descendant,
    which ``getparent()`` on the next element tells. The loop is written out in one function,
    locals only: per-element method calls would cost more than lxml's iteration itself.
    """
    chunks: list[str] = []
    append = chunks.append
    length = hidden = 0
    spaced = True  # the stream is empty or ends in whitespace: no boundary space needed
    # Landmark and sectioning ancestors: (element, position inside it, inside a section).
    frames: list[tuple[Any, LinkPosition, bool]] = []
    open_links: list[tuple[Any, LinkOccurrence]] = []
    links: list[LinkOccurrence] = []
    turns: list[int] = []  # where the stream enters or leaves boilerplate landmarks
    stack: list[tuple[Any, int]] = []  # open elements and their tag kinds, root first
    elements = root.iter()
    element = next(elements, None)
    parent = None
    while True:
        if stack and stack[-1][0] is not parent:  # close the innermost open element
            top, kind = stack.pop()
            if open_links and open_links[-1][0] is top:
                open_links.pop()[1].end = length
            if frames and frames[-1][0] is top:
                _leave_landmark(frames, turns, length)
            if kind & _HIDDEN:
                hidden -= 1
            boundary, text = kind & _BLOCK, top.tail
        elif element is not None:  # open the next element
            kind = _TAG_KINDS.get(element.tag, 0)
            boundary, text = kind & _BLOCK, None if kind & _INVISIBLE else element.text
            if kind & _SPECIAL or (not kind & _INVISIBLE and element.get("role") is not None):
                _open_special(element, kind, frames, open_links, links, length, hidden, turns)
                if kind & _HIDDEN:
                    hidden += 1
            stack.append((element, kind))
            element = next(elements, None)
            parent = None if element is None else element.getparent()
        else:
            break
        if hidden:
            continue
        if text and not text.isspace():
            if boundary and not spaced:
                append(" ")
                length += 1
            append(text)
            length += len(text)
            spaced = text[-1].isspace()
        elif (boundary or text) and not spaced:
            append(" ")
            length += 1
            spaced = True
    return WalkedPage("".join(chunks), links, turns)


def subtree_text(element: Any) -> str:
    """Whitespace-normalised text of ``element``, without script and style, for hidden links."""
    parts = element.xpath(".//text()[not(parent::script or parent::style)]")
    return " ".join("".join(parts).split())


def _enter_landmark(frames: list[tuple[Any, LinkPosition, bool]], element: Any, tag: str) -> None:
    """Push a frame if ``element`` is a landmark or a section (see the module docstring)."""
    position, sectioned = frames[-1][1:] if frames else ("CONTENT", False)
    role = _first_known_role(element.get("role"))
    new_position = _ROLE_LANDMARKS.get(role) if role else _TAG_LANDMARKS.get(tag)
    # Only the implicit roles of header and footer depend on their ancestors (HTML-AAM).
    scoped_out = sectioned and role is None and tag in _PAGE_LEVEL_ONLY
    if new_position is not None and not scoped_out:
        position = new_position
    is_section = (role in _SECTIONING_ROLES) if role else (tag in _SECTIONING_TAGS)
    if new_position is not None or is_section:
        frames.append((element, position, sectioned or is_section))


def _leave_landmark(
    frames: list[tuple[Any, LinkPosition, bool]], turns: list[int], length: int
) -> None:
    """Pop the innermost frame; a turn where the stream enters or leaves the content."""
    left = frames.pop()[1]
    inside = frames[-1][1] if frames else "CONTENT"
    if (left == "CONTENT") != (inside == "CONTENT"):
        turns.append(length)


def _open_special(
    element: Any,
    kind: int,
    frames: list[tuple[Any, LinkPosition, bool]],
    open_links: list[tuple[Any, LinkOccurrence]],
    links: list[LinkOccurrence],
    length: int,
    hidden: int,
    turns: list[int],
) -> None:
    """The opening work of a landmark, link or image, or of any element with a role."""
    # Here without a special kind means with a role; otherwise the role is still to be read.
    if kind & _LANDMARK or not kind & _SPECIAL or element.get("role") is not None:
        outside = frames[-1][1] if frames else "CONTENT"
        _enter_landmark(frames, element, element.tag)
        inside = frames[-1][1] if frames else "CONTENT"
        if (outside == "CONTENT") != (inside == "CONTENT"):
            turns.append(length)
    if kind & _LINK:
        occurrence = _open_link(element, frames, length, hidden)
        if occurrence is not None:
            open_links.append((element, occurrence))
            links.append(occurrence)
    elif kind & _IMAGE and open_links:
        _note_image(open_links[-1][1], element)


def _note_image(link: LinkOccurrence, image: Any) -> None:
    """The first image of a link lends its ``alt`` to the link, should its text be empty."""
    if link.image_alt is None:
        link.image_alt = image.get("alt")


def _open_link(
    element: Any, frames: list[tuple[Any, LinkPosition, bool]], start: int, hidden: int
) -> LinkOccurrence | None:
    href = element.get("href")
    if href is None:
        return None
    return LinkOccurrence(
        href=href,
        start=start,
        position=frames[-1][1] if frames else "CONTENT",
        element=element if hidden else None,
        image_alt=element.get("alt") if element.tag == "area" else None,
        title=element.get("title"),
        rel=element.get("rel"),
    )


def _first_known_role(value: str | None) -> str | None:
    """ARIA: the first role token the user agent knows is the element's role; the landmark and
    sectioning roles are the ones known here."""
    if not value:
        return None
    for token in value.lower().split():
        if token in _ROLE_LANDMARKS or token in _SECTIONING_ROLES:
            return token
    return None
