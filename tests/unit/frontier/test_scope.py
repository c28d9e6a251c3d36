"""Admission scope: seed 000's filter order, domain modes, whitelist and seed 002's scope score."""

from __future__ import annotations

from typing import Any

import pytest

from frontier.scope import (
    ScopeDecision,
    ScopeRules,
    decide,
    decide_new,
    depth_factor,
    domain_affinity,
    host_scope,
    hostname,
    in_domain,
    scope_score,
)
from frontier.traps import TrapLimits
from schemas.seeds import CrawlRequest


def rules_for(*seeds: str, **options: Any) -> ScopeRules:
    return ScopeRules.from_request(CrawlRequest(seeds=list(seeds), **options))


def admit(rules: ScopeRules, url: str, host: str, depth: int = 1, **facts: Any) -> ScopeDecision:
    defaults: dict[str, Any] = {"visited": False, "budget_left": True, "host_page_count": 0}
    return decide(rules, url, host, depth, **(defaults | facts))


def test_a_url_failing_several_rules_reports_the_first_in_seed_000_order() -> None:
    rules = rules_for(
        "https://example.com/docs/intro",
        include_pattern="/docs/",
        exclude_pattern="private",
        max_depth=2,
        max_pages_per_host=10,
        scope_score_threshold=0.9,
    )
    trap_path = "/a/a/a/a"
    # Each step repairs the rule reported before, so the next one in the order shows.
    steps: list[tuple[str, str, int, dict[str, Any], str]] = [
        ("https://other.org/private" + trap_path, "other.org", 3,
         {"visited": True, "budget_left": False, "host_page_count": 10}, "duplicate"),
        ("https://other.org/private" + trap_path, "other.org", 3,
         {"budget_left": False, "host_page_count": 10}, "domain"),
        ("https://example.com/private" + trap_path, "example.com", 3,
         {"budget_left": False, "host_page_count": 10}, "include"),
        ("https://example.com/docs/private" + trap_path, "example.com", 3,
         {"budget_left": False, "host_page_count": 10}, "exclude"),
        ("https://example.com/docs" + trap_path, "example.com", 3,
         {"budget_left": False, "host_page_count": 10}, "depth"),
        ("https://example.com/docs" + trap_path, "example.com", 1,
         {"budget_left": False, "host_page_count": 10}, "budget"),
        ("https://example.com/docs" + trap_path, "example.com", 1,
         {"host_page_count": 10}, "trap_repeated_segments"),
        ("https://example.com/docs/a", "example.com", 1, {"host_page_count": 10}, "host_budget"),
        ("https://example.com/docs/a", "example.com", 1, {}, "scope_score"),
    ]  # fmt: skip
    for url, host, depth, facts, reason in steps:
        assert admit(rules, url, host, depth, **facts).reason == reason, url
    decision = admit(rules, "https://example.com/docs/a", "example.com", 0)
    assert decision.admitted
    assert decision.label == "admitted"
    assert ScopeDecision("exclude").label == "exclude"


def test_seed_000_trace_filters_visited_and_excluded_links() -> None:
    rules = rules_for("https://example.com/docs/intro", exclude_pattern="/blog/", max_depth=2)
    assert admit(rules, "https://example.com/docs/setup", "example.com").admitted
    assert admit(rules, "https://example.com/blog/news", "example.com").reason == "exclude"
    intro = admit(rules, "https://example.com/docs/intro", "example.com", 2, visited=True)
    assert intro.reason == "duplicate"
    assert admit(rules, "https://example.com/docs/config", "example.com", 2).admitted
    assert admit(rules, "https://example.com/docs/deeper", "example.com", 3).reason == "depth"


def test_host_mode_compares_host_and_port_like_seed_000_netloc() -> None:
    rules = rules_for("http://127.0.0.1:8080/", "https://Example.COM/")
    assert in_domain(rules, "127.0.0.1:8080")
    assert in_domain(rules, "example.com")
    assert not in_domain(rules, "127.0.0.1:9090")
    assert not in_domain(rules, "blog.example.com")
    assert not in_domain(rules, "example.org")


def test_registered_domain_mode_uses_the_public_suffix_list() -> None:
    rules = rules_for(
        "https://www.example.co.uk/", "https://alice.github.io/", same_domain="registered_domain"
    )
    assert in_domain(rules, "shop.example.co.uk")
    assert in_domain(rules, "example.co.uk:8443")
    assert in_domain(rules, "alice.github.io")
    assert not in_domain(rules, "other.co.uk")
    assert not in_domain(rules, "bob.github.io")  # github.io is a public suffix (private section)


def test_any_mode_admits_every_domain() -> None:
    rules = rules_for("https://example.com/", same_domain="any")
    assert admit(rules, "https://elsewhere.net/", "elsewhere.net").admitted


def test_whitelist_admits_listed_domains_and_their_subdomains_in_addition() -> None:
    rules = rules_for(
        "https://example.com/", domain_whitelist=["Partner.ORG", "*.cdn.net", "Bücher.de", " "]
    )
    assert rules.whitelist == ("partner.org", "cdn.net", "xn--bcher-kva.de")
    for host in ("example.com", "partner.org", "docs.partner.org", "a.b.cdn.net", "cdn.net:81"):
        assert in_domain(rules, host), host
    assert in_domain(rules, "shop.xn--bcher-kva.de")
    for host in ("notpartner.org", "partner.org.evil.com", "blog.example.com", "org"):
        assert not in_domain(rules, host), host


def test_check_external_admits_other_hosts_as_links_to_check() -> None:
    """Other domains are admitted; the include pattern draws the crawl's own part of its sites
    and does not apply to them; exclude, depth and the traps do."""
    rules = rules_for(
        "https://example.com/", check_external=True, include_pattern="/docs/", max_depth=2
    )
    assert admit(rules, "https://elsewhere.net/page", "elsewhere.net").admitted
    assert admit(rules, "https://example.com/blog/", "example.com").reason == "include"
    assert admit(rules, "https://elsewhere.net/page", "elsewhere.net", depth=3).reason == "depth"
    excluding = rules_for("https://example.com/", check_external=True, exclude_pattern="share")
    assert admit(excluding, "https://social.net/share?u=1", "social.net").reason == "exclude"
    assert admit(rules_for("https://example.com/"), "https://x.net/", "x.net").reason == "domain"


def test_requisites_are_transcluded_from_any_site() -> None:
    """A page's requisites pass the domain, include and scope-score rules, as Heritrix's
    transclusion accepts embeds; exclude, depth, the budgets and the traps still apply."""
    rules = rules_for(
        "https://example.com/",
        include_pattern="/docs/",
        scope_score_threshold=0.9,
        exclude_pattern="tracker",
        max_depth=2,
        max_pages_per_host=5,
    )

    def requisite(url: str, host: str, depth: int = 1, **facts: Any) -> str | None:
        scope = host_scope(rules, host, depth, facts.get("budget_left", True), requisites=True)
        return decide_new(rules, scope, url, facts.get("host_page_count", 0))

    assert requisite("https://cdn.example.net/site.css", "cdn.example.net") is None
    assert requisite("https://example.com/img/logo.png", "example.com") is None
    assert requisite("https://cdn.example.net/tracker.js", "cdn.example.net") == "exclude"
    assert requisite("https://cdn.example.net/a.css", "cdn.example.net", depth=3) == "depth"
    assert requisite("https://cdn.example.net/a.css", "cdn.example.net", budget_left=False) == (
        "budget"
    )
    assert requisite("https://cdn.example.net/a.css", "cdn.example.net", host_page_count=5) == (
        "host_budget"
    )
    # The same URLs as links: refused by the rules requisites pass.
    assert admit(rules, "https://cdn.example.net/site.css", "cdn.example.net").reason == "domain"
    assert admit(rules, "https://example.com/img/logo.png", "example.com").reason == "include"


def test_unlimited_depth_and_host_budget() -> None:
    rules = rules_for("https://example.com/", max_depth=-1, max_pages_per_host=2)
    assert admit(rules, "https://example.com/x", "example.com", 10_000, host_page_count=1).admitted
    over = admit(rules, "https://example.com/x", "example.com", 1, host_page_count=2)
    assert over.reason == "host_budget"


def test_trap_guards_use_the_rules_limits() -> None:
    rules = ScopeRules.from_request(
        CrawlRequest(seeds=["https://example.com/"]), TrapLimits(max_url_length=30)
    )
    assert admit(rules, "https://example.com/short", "example.com").admitted
    long_url = "https://example.com/" + "x" * 20
    assert admit(rules, long_url, "example.com").reason == "trap_url_length"


def test_empty_patterns_count_as_unset() -> None:
    rules = rules_for("https://example.com/", include_pattern="", exclude_pattern="")
    assert admit(rules, "https://example.com/anything", "example.com").admitted


def test_patterns_search_anywhere_in_the_canonical_url() -> None:
    rules = rules_for("https://example.com/", include_pattern=r"\.html$|\?page=")
    assert admit(rules, "https://example.com/a/b.html", "example.com").admitted
    assert admit(rules, "https://example.com/list?page=2", "example.com").admitted
    assert admit(rules, "https://example.com/a/b.pdf", "example.com").reason == "include"


@pytest.mark.parametrize(
    ("host", "depth", "max_depth", "expected"),
    [
        ("example.com", 0, 2, 1.0),
        ("example.com", 1, 5, 0.8),
        ("example.com", 1, -1, 0.8),  # unlimited: seed 002's default max_depth of 5
        ("blog.example.com", 0, 5, 0.8),
        ("blog.example.com", 2, 5, 0.48),
        ("other.org", 0, 5, 0.3),
        ("other.org", 1, 5, 0.24),
        ("example.com", 5, 5, 0.0),
        ("example.com", 7, -1, 0.0),
    ],
)
def test_scope_score_is_domain_affinity_times_depth_factor(
    host: str, depth: int, max_depth: int, expected: float
) -> None:
    rules = rules_for("https://example.com/", max_depth=max_depth)
    assert scope_score(rules, host, depth) == pytest.approx(expected)


def test_scope_score_threshold_decides_after_every_other_rule() -> None:
    rules = rules_for(
        "https://example.com/", same_domain="any", max_depth=-1, scope_score_threshold=0.3
    )
    assert admit(rules, "https://other.org/", "other.org", 0).admitted  # 0.3 x 1.0
    assert admit(rules, "https://other.org/a", "other.org", 1).reason == "scope_score"  # 0.24
    assert admit(rules, "https://blog.example.com/a", "blog.example.com", 3).admitted  # 0.32
    assert admit(rules, "https://blog.example.com/a", "blog.example.com", 4).reason == (
        "scope_score"
    )  # 0.16


def test_scores_a_float_rounding_below_the_threshold_still_pass() -> None:
    rules = rules_for("https://example.com/", max_depth=5, scope_score_threshold=0.2)
    assert scope_score(rules, "example.com", 4) < 0.2  # 0.19999999999999996
    assert admit(rules, "https://example.com/a", "example.com", 4).admitted


def test_affinity_depth_factor_and_hostname_helpers() -> None:
    rules = rules_for("http://[::1]:8080/", "https://example.com/")
    assert domain_affinity(rules, "[::1]:8080") == 1.0
    assert domain_affinity(rules, "www.example.com") == 0.8
    assert domain_affinity(rules, "[::1]:9090") == 0.8  # same address, other port
    assert domain_affinity(rules, "example.net") == 0.3
    assert depth_factor(0, 0) == 1.0
    assert depth_factor(1, 0) == 0.0
    assert hostname("example.com:8080") == "example.com"
    assert hostname("[::1]:8080") == "[::1]"
    assert hostname("example.com") == "example.com"
