"""The shape of a generated site: its pages, their kinds and levels, and every link between them.

:func:`generate_site` builds, from a seed, a site spread over several hosts (ports of 127.0.0.1)
that is *layered*: a page of level L is linked from a page of level L - 1 (its tree parent) and
content links only ever go one level down, so a page's breadth-first depth from the home page is
its level whichever order pages are fetched in. Links that go back up (breadcrumbs to the tree
parent, the nav bar to the home page and the level-1 pages) only point at pages admitted before
the linking page was discovered. That is what lets the ground truth name the crawled set exactly
even when several frontier partitions lease at their own pace.

What the site holds, beside ordinary pages: out-degrees drawn from a power law, header, nav, aside
and footer regions, relative, root-relative, scheme-relative and absolute spellings, fragments and
tracking parameters, 301 redirects (a few in chains of two) whose target is linked from nowhere
else, 404 and 500 pages, a robots.txt section per host (``/private/`` on host 0, ``/drafts/`` on
host 1; host 2 and later serve no robots.txt), nofollow, ugc and sponsored links to pages no other
link reaches, links to other registered domains, and a spider trap (``/trap/`` whose pages link
``next/`` relatively, without end).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

PageKind = Literal["html", "missing", "error", "redirect", "private"]
Region = Literal["header", "nav", "main", "aside", "footer"]
Spelling = Literal["root", "relative", "absolute", "scheme", "fragment_only"]

SECTIONS = ("guide", "api", "notes", "ref")
DISALLOWED = {0: "/private/", 1: "/drafts/"}
"""The robots.txt section each host disallows; hosts not listed serve no robots.txt."""
TRAP_ROOT = "/trap/"
TRAP_STEP = "next/"
EXTERNAL_SITE = "https://example.com/"
LOGIN_PATH = "/login"
MAX_OUT_DEGREE = 40
POWER_LAW_ALPHA = 1.6


@dataclass(frozen=True, slots=True)
class Address:
    """A path on one of the site's hosts (host index, not port: ports are known at serve time)."""

    host: int
    path: str


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """One link as written in a page: what it points at, how it is spelled, where it sits."""

    target: Address | str
    """An address on the site, or an absolute URL elsewhere (never fetched: out of scope)."""
    anchor: str
    region: Region
    rel: str = ""
    spelling: Spelling = "root"
    fragment: str = ""
    tracking: str = ""
    """Tracking parameters appended to the query (``utm_source=...``): canonical form drops them."""


@dataclass(slots=True)
class SitePage:
    address: Address
    level: int
    kind: PageKind
    number: int
    redirect_to: Address | None = None
    parent: Address | None = None
    content_links: list[LinkSpec] = field(default_factory=list)
    """Links of the main region, one level down (plus the breadcrumb up), in document order."""
    aside_links: list[LinkSpec] = field(default_factory=list)


@dataclass
class SiteGraph:
    hosts: int
    seed: int
    pages: dict[Address, SitePage] = field(default_factory=dict)
    levels: list[list[Address]] = field(default_factory=list)
    nav_targets: list[Address] = field(default_factory=list)
    trap_level: int = 1

    @property
    def home(self) -> Address:
        return Address(0, "/")

    def page(self, address: Address) -> SitePage | None:
        return self.pages.get(address)

    def trap_depth(self, path: str) -> int | None:
        """How many ``next/`` steps a trap path takes (0 for the trap's root), None if not one."""
        if not path.startswith(TRAP_ROOT):
            return None
        rest = path[len(TRAP_ROOT) :]
        steps = rest.count(TRAP_STEP)
        return steps if rest == TRAP_STEP * steps else None

    def disallowed(self, address: Address) -> bool:
        prefix = DISALLOWED.get(address.host)
        return prefix is not None and address.path.startswith(prefix)


def level_sizes(pages: int, levels: int) -> list[int]:
    """How many pages each level below the home page holds: growing by half each level."""
    weights = [1.5**level for level in range(levels)]
    total = sum(weights)
    return [max(2, round(pages * weight / total)) for weight in weights]


def generate_site(pages: int = 300, hosts: int = 3, levels: int = 5, seed: int = 1) -> SiteGraph:
    """A layered site of about ``pages`` pages below the home page, on ``hosts`` hosts."""
    if hosts < 1 or levels < 1:
        raise ValueError("a site needs at least one host and one level below its home page")
    rng = random.Random(seed)
    site = SiteGraph(hosts=hosts, seed=seed)
    home = SitePage(site.home, 0, "html", 0)
    site.pages[home.address] = home
    site.levels.append([home.address])
    builder = _Builder(site, rng)
    for level, size in enumerate(level_sizes(pages, levels), start=1):
        builder.add_level(level, size)
    site.nav_targets = [site.home, *[a for a in site.levels[1] if site.pages[a].kind == "html"][:3]]
    builder.link_levels()
    return site


class _Builder:
    def __init__(self, site: SiteGraph, rng: random.Random) -> None:
        self.site = site
        self.rng = rng
        self.number = 0
        self.linkable: list[list[Address]] = [[site.home]]
        """Per level: pages other links may point at (not redirect targets)."""

    def _new(self, level: int, kind: PageKind, host: int, path: str | None = None) -> SitePage:
        self.number += 1
        number = self.number
        if path is None:
            prefix = {"private": DISALLOWED.get(host, "/"), "missing": "/gone/"}.get(kind)
            if kind == "error":
                prefix = "/broken/"
            if kind == "redirect":
                prefix = "/old/"
            section = SECTIONS[number % len(SECTIONS)]
            path = f"{prefix}{number}" if prefix else f"/{section}/page-{number}"
        page = SitePage(Address(host, path), level, kind, number)
        self.site.pages[page.address] = page
        return page

    def _kind(self, level: int, host: int) -> PageKind:
        if level < 2:
            return "html"
        draw = self.rng.random()
        if draw < 0.03:
            return "missing"
        if draw < 0.05:
            return "error"
        if draw < 0.09 and host in DISALLOWED:
            return "private"
        if draw < 0.13:
            return "redirect"
        return "html"

    def add_level(self, level: int, size: int) -> None:
        site, rng = self.site, self.rng
        addresses: list[Address] = []
        linkable: list[Address] = []
        if level == 1:
            for host in range(1, site.hosts):  # every other host's home page hangs off the home
                page = self._new(1, "html", host, "/")
                addresses.append(page.address)
                linkable.append(page.address)
        while len(addresses) < size:
            host = 0 if rng.random() < 0.5 else rng.randrange(site.hosts)
            kind = self._kind(level, host)
            page = self._new(level, kind, host)
            addresses.append(page.address)
            linkable.append(page.address)
            if kind == "redirect":
                hops = 2 if rng.random() < 0.25 else 1
                source = page
                for hop in range(1, hops + 1):
                    target_host = host if rng.random() < 0.7 else rng.randrange(site.hosts)
                    last = hop == hops
                    path = None if last else f"/moved/{source.number}"
                    target = self._new(level, "html" if last else "redirect", target_host, path)
                    source.redirect_to = target.address
                    addresses.append(target.address)
                    source = target
        site.levels.append(addresses)
        self.linkable.append(linkable)

    def link_levels(self) -> None:
        site, rng = self.site, self.rng
        for level in range(len(site.levels) - 1):
            parents = [a for a in site.levels[level] if site.pages[a].kind == "html"]
            children = self.linkable[level + 1]
            child_lists: dict[Address, list[Address]] = {a: [] for a in parents}
            for child in children:  # the tree: every child gets one parent one level up
                parent = site.home if level == 0 else rng.choice(parents)
                child_lists[parent].append(child)
                site.pages[child].parent = parent
            for parent in parents:
                degree = min(MAX_OUT_DEGREE, int(rng.paretovariate(POWER_LAW_ALPHA)))
                targets = list(child_lists[parent])
                while len(targets) < degree and len(targets) < len(children):
                    extra = rng.choice(children)
                    if extra not in targets:
                        targets.append(extra)
                self._write_links(site.pages[parent], targets)

    def _write_links(self, page: SitePage, targets: list[Address]) -> None:
        rng = self.rng
        links: list[LinkSpec] = []
        if page.parent is not None:
            links.append(LinkSpec(page.parent, "up one level", "main", spelling="relative"))
        if page.address == self.site.home:
            links.append(LinkSpec(Address(0, TRAP_ROOT), "the calendar", "main"))
        for target in targets:
            links.append(self._link(page, target, "main"))
        page.content_links = links
        aside: list[LinkSpec] = []
        if targets and rng.random() < 0.5:  # a related link: the same target spelled otherwise
            aside.append(self._link(page, rng.choice(targets), "aside"))
        if rng.random() < 0.2:
            aside.append(
                LinkSpec(
                    Address(page.address.host, f"/u/{page.number}"), "a reader", "aside", "ugc"
                )
            )
        if rng.random() < 0.2:
            ad = f"https://ads.example.net/{page.number}"
            aside.append(LinkSpec(ad, "our sponsor", "aside", "sponsored noopener"))
        page.aside_links = aside

    def _link(self, page: SitePage, target: Address, region: Region) -> LinkSpec:
        rng = self.rng
        cross_host = target.host != page.address.host
        spellings: tuple[Spelling, ...] = (
            ("absolute", "scheme") if cross_host else ("root", "relative", "absolute")
        )
        draw = rng.random()
        return LinkSpec(
            target,
            anchor=f"page {self.site.pages[target].number}",
            region=region,
            spelling=rng.choice(spellings),
            fragment=f"part-{rng.randrange(9)}" if draw < 0.2 else "",
            tracking=f"utm_source=gen&utm_medium=l{rng.randrange(9)}" if 0.1 < draw < 0.3 else "",
        )
