"""A generated site's pages as served, and the edges a parser must read from each.

One document model drives both: a page is a list of blocks (header, nav, paragraphs of main, aside,
footer), each a list of tokens (words, or links with their anchor text), separated by one space.
:func:`render_html` writes it out with no whitespace between tags, so the page's visible text is
exactly the blocks joined by one space; :func:`expected_edges` reads the same model and says, for
every distinct target in document order, the edge seed document 002 defines: canonical target,
anchor text, context window (about 50 characters of visible text either side of the anchor, a word
cut at the outer edge dropped), link type, rel tokens and position. Nothing here calls the parser
or the canonicaliser: the site knows what each spelling means by construction, so comparing the
two is a real check of both.
"""

from __future__ import annotations

import html
import random
import zlib
from dataclasses import dataclass

from streamcrawl.testsite.graph import (
    EXTERNAL_SITE,
    LOGIN_PATH,
    TRAP_STEP,
    Address,
    LinkSpec,
    Region,
    SiteGraph,
)

CONTEXT_CHARS = 50
POSITIONS = {
    "header": "NAV",
    "nav": "NAV",
    "main": "CONTENT",
    "aside": "SIDEBAR",
    "footer": "FOOTER",
}
_NOT_FOLLOWED = frozenset({"nofollow", "ugc", "sponsored"})
_WORDS = [
    *("crawler", "frontier", "fetch", "parse", "queue", "host", "lease", "depth", "graph"),
    *("anchor", "rank", "index", "page", "link", "robots", "delay", "partition", "broker"),
    *("topic", "offset", "commit", "replay", "state", "store", "budget", "seed", "site", "text"),
]


@dataclass(frozen=True, slots=True)
class Token:
    text: str
    link: LinkSpec | None = None


@dataclass(frozen=True, slots=True)
class Block:
    region: Region
    tag: str
    """The block element written: ``p``, ``h1``, or the region's own element."""
    tokens: tuple[Token, ...]


@dataclass(frozen=True, slots=True)
class ExpectedEdge:
    """One edge as the parser must report it (``discovered_at`` aside)."""

    to_url: str
    anchor_text: str
    context_window: str
    link_type: str
    rel: tuple[str, ...]
    position: str

    @property
    def followed(self) -> bool:
        """Whether a crawler that respects nofollow, ugc and sponsored follows it."""
        return _NOT_FOLLOWED.isdisjoint(self.rel)


class BoundSite:
    """A site graph bound to the ports it is served on: URLs, documents and expected edges."""

    def __init__(self, graph: SiteGraph, ports: list[int]) -> None:
        if len(ports) != graph.hosts:
            raise ValueError(f"{graph.hosts} hosts need as many ports, not {len(ports)}")
        self.graph = graph
        self.ports = ports
        self._host_of_port = {port: host for host, port in enumerate(ports)}

    def origin(self, host: int) -> str:
        return f"http://127.0.0.1:{self.ports[host]}"

    def url(self, address: Address) -> str:
        return self.origin(address.host) + address.path

    @property
    def seed_url(self) -> str:
        return self.url(self.graph.home)

    def address(self, url: str) -> Address | None:
        """The site address of a canonical URL, None when it is not on one of the site's hosts."""
        prefix = "http://127.0.0.1:"
        if not url.startswith(prefix):
            return None
        port, slash, path = url[len(prefix) :].partition("/")
        host = self._host_of_port.get(int(port)) if port.isdigit() else None
        return None if host is None or not slash else Address(host, "/" + path)

    def is_document(self, address: Address) -> bool:
        """Whether the address answers 200 with HTML (html pages, robots-hidden ones, the trap)."""
        page = self.graph.page(address)
        if page is not None:
            return page.kind in ("html", "private")
        return (address.host == 0 and self.graph.trap_depth(address.path) is not None) or (
            address.path == LOGIN_PATH
        )

    # ----- the document model ---------------------------------------------------------------

    def blocks(self, address: Address) -> list[Block]:
        graph = self.graph
        page = graph.page(address)
        trap = graph.trap_depth(address.path) if address.host == 0 else None
        rng = random.Random(zlib.crc32(f"{graph.seed}:{address.host}:{address.path}".encode()))
        name = f"page {page.number}" if page else "the calendar"
        level = page.level if page else graph.trap_level + (trap or 0)
        header = LinkSpec(graph.home, "streamcrawl test site", "header", spelling="absolute")
        nav = [
            LinkSpec(
                target,
                "home" if target == graph.home else f"page {self._number(target)}",
                "nav",
                spelling="root" if target.host == address.host else "absolute",
            )
            for target in graph.nav_targets
        ]
        blocks = [
            Block("header", "header", (self._link_token(header),)),
            Block("nav", "nav", tuple(self._link_token(spec) for spec in nav)),
            Block("main", "h1", _words(f"{name} at level {level}".split())),
        ]
        content = list(page.content_links) if page else []
        if trap is not None:
            step = Address(0, address.path + TRAP_STEP)
            content = [LinkSpec(step, "next month", "main", spelling="relative")]
        for start in range(0, len(content), 3):
            blocks.append(Block("main", "p", self._sentence(rng, content[start : start + 3])))
        if page and page.aside_links:
            related = (Token("Related:"), *(self._link_token(s) for s in page.aside_links))
            blocks.append(Block("aside", "p", related))
        footer = [
            LinkSpec(address, "back to top", "footer", spelling="fragment_only", fragment="top"),
            LinkSpec(EXTERNAL_SITE, "an example", "footer"),
            LinkSpec(Address(address.host, LOGIN_PATH), "log in", "footer", rel="nofollow"),
        ]
        tokens = (*(self._link_token(s) for s in footer), *_words(["generated", "for", "tests."]))
        blocks.append(Block("footer", "p", tokens))
        return blocks

    def _number(self, address: Address) -> int:
        page = self.graph.page(address)
        return page.number if page else 0

    def _sentence(self, rng: random.Random, links: list[LinkSpec]) -> tuple[Token, ...]:
        tokens: list[Token] = []
        for spec in links:
            tokens.extend(_words(rng.sample(_WORDS, rng.randint(2, 9))))
            tokens.append(self._link_token(spec))
        tokens.extend(_words([*rng.sample(_WORDS, rng.randint(1, 6)), "end."]))
        return tuple(tokens)

    def _link_token(self, spec: LinkSpec) -> Token:
        return Token(spec.anchor, spec)

    # ----- rendering ------------------------------------------------------------------------

    def href(self, page: Address, spec: LinkSpec) -> str:
        """The link as written in ``page``'s HTML."""
        suffix = (f"?{spec.tracking}" if spec.tracking else "") + (
            f"#{spec.fragment}" if spec.fragment else ""
        )
        target = spec.target
        if isinstance(target, str):
            return target + suffix
        if spec.spelling == "fragment_only":
            return suffix
        cross_host = target.host != page.host
        if spec.spelling == "absolute" or (cross_host and spec.spelling != "scheme"):
            return self.url(target) + suffix
        if spec.spelling == "scheme":
            return f"//127.0.0.1:{self.ports[target.host]}{target.path}{suffix}"
        if spec.spelling == "relative":
            return relative_path(page.path, target.path) + suffix
        return target.path + suffix

    def render_html(self, address: Address) -> str:
        parts = [f"<html><head><title>{html.escape(address.path)}</title></head><body>"]
        regions: list[tuple[Region, list[str]]] = []
        for block in self.blocks(address):
            inner = " ".join(self._token_html(address, token) for token in block.tokens)
            element = f"<{block.tag}>{inner}</{block.tag}>"
            if block.tag == block.region:
                regions.append((block.region, [inner]))
            elif regions and regions[-1][0] == block.region:
                regions[-1][1].append(element)
            else:
                regions.append((block.region, [element]))
        for region, elements in regions:
            parts.append(f"<{region}>{''.join(elements)}</{region}>")
        parts.append("</body></html>")
        return "".join(parts)

    def _token_html(self, page: Address, token: Token) -> str:
        if token.link is None:
            return html.escape(token.text)
        rel = f' rel="{token.link.rel}"' if token.link.rel else ""
        href = html.escape(self.href(page, token.link), quote=True)
        return f'<a href="{href}"{rel}>{html.escape(token.text)}</a>'

    # ----- ground truth ---------------------------------------------------------------------

    def target_url(self, page: Address, spec: LinkSpec) -> str:
        """The canonical URL a link means: fragment and tracking parameters gone."""
        return spec.target if isinstance(spec.target, str) else self.url(spec.target)

    def expected_edges(self, address: Address) -> list[ExpectedEdge]:
        """Every distinct target of the page in document order, from its first occurrence."""
        stream, placed = _text_stream(self.blocks(address))
        edges: dict[str, ExpectedEdge] = {}
        for start, token in placed:
            spec = token.link
            if spec is None:
                continue
            to_url = self.target_url(address, spec)
            if to_url in edges:
                continue
            rel = tuple(dict.fromkeys(spec.rel.lower().split()))
            edges[to_url] = ExpectedEdge(
                to_url=to_url,
                anchor_text=token.text,
                context_window=context_window(stream, start, start + len(token.text)),
                link_type=_link_type(rel, isinstance(spec.target, Address)),
                rel=rel,
                position=POSITIONS[spec.region],
            )
        return list(edges.values())


def relative_path(page_path: str, target_path: str) -> str:
    """A path-relative reference from ``page_path`` to ``target_path`` (both absolute)."""
    directory = page_path[: page_path.rfind("/") + 1]
    if target_path.startswith(directory):
        return target_path[len(directory) :] or "./"
    ups = directory.count("/") - 1
    return "../" * ups + target_path[1:]


def _words(words: list[str]) -> tuple[Token, ...]:
    return tuple(Token(word) for word in words)


def _text_stream(blocks: list[Block]) -> tuple[str, list[tuple[int, Token]]]:
    """The page's visible text and where each token starts in it."""
    placed: list[tuple[int, Token]] = []
    offset = 0
    pieces: list[str] = []
    for block in blocks:
        for token in block.tokens:
            if pieces:
                pieces.append(" ")
                offset += 1
            placed.append((offset, token))
            pieces.append(token.text)
            offset += len(token.text)
    return "".join(pieces), placed


def context_window(stream: str, start: int, end: int, side: int = CONTEXT_CHARS) -> str:
    """``side`` characters of text before ``stream[start:end]``, it, and ``side`` after, with a
    word cut at either outer edge dropped."""
    left = max(0, start - side)
    before = stream[left:start]
    if left > 0 and not stream[left - 1].isspace() and not stream[left].isspace():
        before = before.split(" ", 1)[1] if " " in before else ""
    right = min(len(stream), end + side)
    after = stream[end:right]
    if right < len(stream) and not stream[right].isspace() and not stream[right - 1].isspace():
        after = after.rsplit(" ", 1)[0] if " " in after else ""
    return " ".join(f"{before}{stream[start:end]}{after}".split())


def _link_type(rel: tuple[str, ...], on_site: bool) -> str:
    if "sponsored" in rel:
        return "SPONSORED"
    if "ugc" in rel:
        return "UGC"
    if "nofollow" in rel:
        return "NOFOLLOW"
    return "INTERNAL" if on_site else "EXTERNAL"
