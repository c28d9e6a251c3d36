"""Admission scope: whether a canonical URL of a crawl may be queued (DESIGN.md section 3, step 2).

:func:`decide` is a pure function over :class:`ScopeRules` (built once per crawl from its
CrawlRequest, regexes compiled) and facts the caller looked up. It applies seed document 000's
filter order, so a URL failing several rules reports the first, then this project's additions:

1. ``duplicate``: already in the crawl's visited set.
2. ``domain``: ``same_domain="host"`` wants the URL's host key (host plus any non-default port, as
   seed 000 compares ``netloc``) to equal a seed's; ``"registered_domain"`` wants its registrable
   domain (public suffix plus one label) to equal a seed's; ``"any"`` checks nothing. A non-empty
   ``domain_whitelist`` additionally admits hosts equal to or under a listed domain. A crawl with
   ``check_external`` admits the other hosts too, as links to check (their status only, never
   followed, `frontier.release`), and the include pattern, which draws the crawl's own part of
   its sites, does not apply to them; every other rule does.
3. ``include``: ``include_pattern`` must match somewhere in the URL (``re.search``).
4. ``exclude``: ``exclude_pattern`` must not match.
5. ``depth``: depth above ``max_depth`` (unless it is -1, unlimited).
6. ``budget``: the crawl's max_links budget is spent (the caller says so).
7. ``trap_*``: URL shape guards of `frontier.traps`.
8. ``host_budget``: the host already has ``max_pages_per_host`` admitted pages.
9. ``scope_score``: when ``scope_score_threshold`` is set, seed 002's
   ``scope_score = domain_affinity x depth_factor`` must reach it, where domain_affinity is 1.0 for
   a seed's host, 0.8 for a seed's registered domain and 0.3 for any other domain, and
   ``depth_factor = max(0, 1 - depth / D)`` with D the crawl's max_depth, or seed 002's default 5
   when max_depth is unlimited. Seed 002 gives other domains 0.3 at one hop and 0.1 at two or more;
   a URL here does not carry how many cross-domain hops led to it, so every other domain counts as
   one hop (0.3), the generous reading. Whitelisted domains are other domains for the score.
   Depth 0 has factor 1.0 whatever D, so seeds always score their affinity. Scores within 1e-9 of
   the threshold pass, so ``1.0 x (1 - 4/5)`` meets a threshold of 0.2 despite float rounding.

A page's requisites (`schemas.urls.DiscoveredUrls.requisites`, a crawl with
``fetch_page_requisites``) are transcluded, as Heritrix's TransclusionDecideRule accepts embeds:
the domain, include and scope-score rules do not apply to them, the others do (they come at their
page's depth, and ``max_redirects`` bounds their hops before they get here).

Each reason is a stable string, used as a counter label.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Literal

from frontier.traps import DEFAULT_TRAP_LIMITS, TrapLimits, TrapReason, check_traps
from schemas.canonical import canonical_url as canonicalise
from schemas.canonical import host_key, registered_domain
from schemas.seeds import CrawlRequest, SameDomain

RejectReason = Literal[
    "duplicate",
    "domain",
    "include",
    "exclude",
    "depth",
    "budget",
    "trap_url_length",
    "trap_path_segments",
    "trap_repeated_segments",
    "trap_query_params",
    "host_budget",
    "scope_score",
]

SAME_HOST_AFFINITY = 1.0
SAME_REGISTERED_DOMAIN_AFFINITY = 0.8
OTHER_DOMAIN_AFFINITY = 0.3
DEFAULT_SCORE_DEPTH = 5
_SCORE_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class ScopeDecision:
    """Admit (``reason`` None) or reject with the first rule the URL broke."""

    reason: RejectReason | None = None

    @property
    def admitted(self) -> bool:
        return self.reason is None

    @property
    def label(self) -> str:
        """``"admitted"`` or the rejection reason: the counter label."""
        return self.reason or "admitted"


ADMIT = ScopeDecision()


@dataclass(frozen=True, slots=True)
class ScopeRules:
    """One crawl's scope, precompiled; build with :meth:`from_request`."""

    same_domain: SameDomain
    seed_hosts: frozenset[str]
    """Host keys of the seeds (``host`` or ``host:port``)."""
    seed_domains: frozenset[str]
    """Registered domains of the seeds' hostnames."""
    whitelist: tuple[str, ...]
    include: re.Pattern[str] | None
    exclude: re.Pattern[str] | None
    max_depth: int
    max_pages_per_host: int
    scope_score_threshold: float | None
    trap_limits: TrapLimits = field(default=DEFAULT_TRAP_LIMITS)
    check_external: bool = False
    """Hosts outside the domains are admitted as links to check (see the module docstring)."""

    @classmethod
    def from_request(
        cls, request: CrawlRequest, trap_limits: TrapLimits = DEFAULT_TRAP_LIMITS
    ) -> ScopeRules:
        seed_hosts = frozenset(_seed_host_keys(request.seeds))
        return cls(
            same_domain=request.same_domain,
            seed_hosts=seed_hosts,
            seed_domains=frozenset(_registered_domain(hostname(host)) for host in seed_hosts),
            whitelist=_whitelist(request.domain_whitelist),
            include=_compile(request.include_pattern),
            exclude=_compile(request.exclude_pattern),
            max_depth=request.max_depth,
            max_pages_per_host=request.max_pages_per_host,
            scope_score_threshold=request.scope_score_threshold,
            trap_limits=trap_limits,
            check_external=request.check_external,
        )


def decide(
    rules: ScopeRules,
    canonical_url: str,
    host: str,
    depth: int,
    *,
    visited: bool,
    budget_left: bool,
    host_page_count: int,
) -> ScopeDecision:
    """Admit ``canonical_url`` (whose host key is ``host``) at ``depth``, or say why not.

    ``visited``: the crawl's visited set holds it. ``budget_left``: the crawl's max_links budget
    can still take a URL. ``host_page_count``: pages of this crawl already admitted for ``host``.
    """
    if visited:
        return ScopeDecision("duplicate")
    reason = decide_new(
        rules, host_scope(rules, host, depth, budget_left), canonical_url, host_page_count
    )
    return ADMIT if reason is None else ScopeDecision(reason)


@dataclass(frozen=True, slots=True)
class HostScope:
    """The rules of :func:`decide` that depend only on the host, the depth and the budget, which
    all the URLs of one DiscoveredUrls message share: evaluated once per message."""

    in_domain: bool
    depth_ok: bool
    budget_left: bool
    score_ok: bool
    requisites: bool = False
    """The message's URLs are a page's requisites: the domain, include and scope-score rules do
    not apply to them."""

    def open_to_all(self, rules: ScopeRules) -> bool:
        """Whether only the exclude pattern, the traps and the host budget can refuse a URL."""
        if self.requisites:
            return self.depth_ok and self.budget_left
        return (
            self.in_domain
            and self.depth_ok
            and self.budget_left
            and self.score_ok
            and rules.include is None
        )


def host_scope(
    rules: ScopeRules, host: str, depth: int, budget_left: bool, *, requisites: bool = False
) -> HostScope:
    threshold = rules.scope_score_threshold
    return HostScope(
        in_domain=in_domain(rules, host),
        depth_ok=rules.max_depth == -1 or depth <= rules.max_depth,
        budget_left=budget_left,
        score_ok=threshold is None
        or scope_score(rules, host, depth) >= threshold - _SCORE_TOLERANCE,
        requisites=requisites,
    )


def decide_new(
    rules: ScopeRules, scope: HostScope, canonical_url: str, host_page_count: int
) -> RejectReason | None:
    """:func:`decide` for a URL not visited, its host's rules evaluated already: the first rule
    broken, in the module docstring's order, or None to admit."""
    transcluded = scope.requisites
    if not scope.in_domain and not rules.check_external and not transcluded:
        return "domain"
    if (
        scope.in_domain
        and not transcluded
        and rules.include is not None
        and rules.include.search(canonical_url) is None
    ):
        return "include"
    if rules.exclude is not None and rules.exclude.search(canonical_url) is not None:
        return "exclude"
    if not scope.depth_ok:
        return "depth"
    if not scope.budget_left:
        return "budget"
    trap: TrapReason | None = check_traps(canonical_url, rules.trap_limits)
    if trap is not None:
        return trap
    if rules.max_pages_per_host != -1 and host_page_count >= rules.max_pages_per_host:
        return "host_budget"
    if not scope.score_ok and not transcluded:
        return "scope_score"
    return None


def in_domain(rules: ScopeRules, host: str) -> bool:
    """Rule 2: the same-domain mode, or the whitelist, admits ``host``."""
    if rules.same_domain == "any" or host in rules.seed_hosts:
        return True
    name = hostname(host)
    if rules.same_domain == "registered_domain" and _registered_domain(name) in rules.seed_domains:
        return True
    return any(name == domain or name.endswith("." + domain) for domain in rules.whitelist)


def domain_affinity(rules: ScopeRules, host: str) -> float:
    """Seed 002's domain affinity, with every other domain counted as one hop away."""
    if host in rules.seed_hosts:
        return SAME_HOST_AFFINITY
    if _registered_domain(hostname(host)) in rules.seed_domains:
        return SAME_REGISTERED_DOMAIN_AFFINITY
    return OTHER_DOMAIN_AFFINITY


def depth_factor(depth: int, max_depth: int) -> float:
    """``max(0, 1 - depth / D)``, D being ``max_depth`` or 5 when unlimited; 1.0 at depth 0."""
    if depth <= 0:
        return 1.0
    limit = DEFAULT_SCORE_DEPTH if max_depth == -1 else max_depth
    return max(0.0, 1.0 - depth / limit) if limit > 0 else 0.0


def scope_score(rules: ScopeRules, host: str, depth: int) -> float:
    """Seed 002's ``domain_affinity x depth_factor``, in [0, 1]."""
    return domain_affinity(rules, host) * depth_factor(depth, rules.max_depth)


def hostname(host: str) -> str:
    """A host key without its port: ``example.com:8080`` -> ``example.com``, ``[::1]:81`` ->
    ``[::1]``."""
    if host.startswith("["):
        return host[: host.find("]") + 1] or host
    return host.partition(":")[0]


def _seed_host_keys(seeds: list[str]) -> list[str]:
    keys = []
    for seed in seeds:
        canonical = canonicalise(seed)
        if canonical is not None:
            keys.append(host_key(canonical))
    return keys


def _whitelist(domains: list[str]) -> tuple[str, ...]:
    """Whitelist entries normalised and deduplicated, blanks dropped."""
    return tuple(dict.fromkeys(d for d in map(_whitelist_domain, domains) if d))


def _whitelist_domain(domain: str) -> str:
    """A whitelist entry in host-key form (IDNA, lowercase), ``*.`` and dots trimmed, no port."""
    bare = domain.strip().lower().removeprefix("*.").strip(".")
    canonical = canonicalise(f"http://{bare}/") if bare else None
    return hostname(host_key(canonical)) if canonical is not None else bare


def _compile(pattern: str | None) -> re.Pattern[str] | None:
    """An empty pattern counts as unset: an empty exclude pattern would refuse every URL."""
    return re.compile(pattern) if pattern else None


@functools.lru_cache(maxsize=65_536)
def _registered_domain(name: str) -> str:
    """Cached: a partition asks about the same few hosts again and again."""
    return registered_domain(name)
