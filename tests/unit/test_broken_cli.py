"""`streamcrawl broken`'s own logic: which dead letters are broken links, each URL once (its last
letter), the newest kept, and how they read (`streamcrawl.broken_cli`)."""

from __future__ import annotations

from schemas.deadletter import dead_letter
from schemas.outcomes import FetchOutcome
from schemas.serde import encode
from schemas.urls import DiscoveredUrl, DiscoveredUrls
from streamcrawl.broken_cli import BrokenUrl, embed_in, newest_broken, summary
from streamcrawl.deadletter_cli import Letter

SITE = "https://shop.example"


def letter(
    url: str, reason: str, *, crawl: str = "c1", stage: str = "frontier", **outcome: object
) -> Letter:
    fields = {"kind": "permanent", "status": 404, "fetched_at": 1, **outcome}
    payload = FetchOutcome(crawl_id=crawl, url=url, host="shop.example", lease_id="l", **fields)  # type: ignore[arg-type]
    made = dead_letter(
        stage, "outcomes", 0, len(url), f"{reason}: status {fields['status']}", encode(payload)
    )
    made = made.model_copy(update={"at": 1_000 + len(url)})
    return Letter(made, "shop.example", crawl, url)


def test_only_links_that_lead_nowhere_are_broken() -> None:
    letters = [
        letter(f"{SITE}/gone", "permanent"),
        letter(f"{SITE}/down", "retries_exhausted", kind="retryable", status=503),
        letter(
            f"{SITE}/timeout",
            "retries_exhausted",
            kind="retryable",
            status=None,
            error="timeout: 30 s",
        ),
        letter(f"{SITE}/loop", "too_many_redirects", kind="redirect", status=302),
        letter(f"{SITE}/private", "robots_denied", kind="robots_denied", status=None),
        letter(f"{SITE}/crashy", "lease_expired"),
        letter(f"{SITE}/other-crawl", "permanent", crawl="c2"),
        letter(f"{SITE}/poison", "undecodable", stage="parser"),
    ]
    broken = newest_broken(letters, "c1", 100)
    assert [(item.url.removeprefix(SITE), item.failure) for item in broken] == [
        ("/gone", "404"),
        ("/down", "503"),
        ("/loop", "302"),
        ("/timeout", "timeout"),
    ]


def test_a_url_dead_twice_counts_once_and_the_newest_are_kept() -> None:
    twice = [letter(f"{SITE}/a", "permanent"), letter(f"{SITE}/a", "permanent", status=410)]
    [item] = newest_broken(twice, "c1", 100)
    assert item.status == 410
    many = [letter(f"{SITE}/{'x' * n}", "permanent") for n in range(10)]
    kept = newest_broken(many, "c1", 3)
    assert [len(item.url) for item in kept] == [len(SITE) + 8, len(SITE) + 9, len(SITE) + 10]


def test_lines_and_summary() -> None:
    item = BrokenUrl(f"{SITE}/gone", "permanent", 404, None, 1)
    item.linked_from = [
        {
            "from_url": f"{SITE}/",
            "anchor_text": "old offer",
            "link_type": "INTERNAL",
            "position": "CONTENT",
        },
        {
            "from_url": "https://blog.example/",
            "anchor_text": "",
            "link_type": "EXTERNAL",
            "position": "NAV",
        },
    ]
    item.more_links = True
    assert item.lines() == [
        f"404     {SITE}/gone  (permanent)",
        f"        <- {SITE}/  'old offer'  [INTERNAL]",
        "        <- https://blog.example/  [EXTERNAL]",
        "        <- ... (more: streamcrawl graph in URL)",
    ]
    lone = BrokenUrl(f"{SITE}/seed", "permanent", 404, None, 2)
    assert summary([item, lone], "c1") == (
        "2 broken URLs in crawl c1, linked from 2 pages;"
        " 1 with no page linking (seeds, sitemap entries, page requisites)"
    )
    assert summary([], "c1") == "no broken links in crawl c1"


def requisites_message(
    page: str, found: list[str], crawl: str = "c1", flagged: bool = True
) -> bytes:
    message = DiscoveredUrls(
        crawl_id=crawl,
        host="shop.example",
        depth=0,
        source_url=page,
        redirect_hops=1,
        discovered_at=1,
        urls=[DiscoveredUrl(url=url) for url in found],
        origin="l/requisites",
        requisites=flagged,
    )
    return encode(message)


def test_a_broken_requisite_names_the_pages_it_is_a_requisite_of() -> None:
    logo, style, gone = (f"{SITE}/{path}" for path in ("logo.png", "site.css", "gone"))
    broken = [
        BrokenUrl(logo, "permanent", 404, None, 1),
        BrokenUrl(style, "permanent", 404, None, 2),
        BrokenUrl(gone, "permanent", 404, None, 3),
    ]
    broken[1].linked_from = [
        {"from_url": f"{SITE}/", "anchor_text": "", "link_type": "INTERNAL", "position": "NAV"}
    ]
    values = [
        requisites_message(f"{SITE}/", [logo, style]),
        requisites_message(f"{SITE}/about", [logo]),
        requisites_message(f"{SITE}/", [logo]),  # redelivered: the page once
        requisites_message(f"{SITE}/other-crawl", [logo], crawl="c2"),
        requisites_message(f"{SITE}/linked", [gone], flagged=False),  # links, not requisites
        requisites_message(f"{SITE}/third", [logo]),  # past the limit of two
        None,
        b"not json",
    ]
    embed_in(broken, values, "c1", pages=2)
    assert broken[0].embedded_in == [f"{SITE}/", f"{SITE}/about"]
    assert broken[1].embedded_in == []  # linked already: the graph named its pages
    assert broken[2].embedded_in == []
    assert broken[0].lines()[1:] == [
        f"        <- {SITE}/  [requisite]",
        f"        <- {SITE}/about  [requisite]",
    ]
    assert broken[0].as_json()["embedded_in"] == [f"{SITE}/", f"{SITE}/about"]
    assert summary(broken, "c1") == (
        "3 broken URLs in crawl c1, linked from 2 pages;"
        " 1 with no page linking (seeds, sitemap entries, page requisites)"
    )
