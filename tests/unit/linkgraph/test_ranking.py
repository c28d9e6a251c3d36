"""The ranker's graph and global views on crafted graphs: orphans, domain graph, link farms,
syndication pairs, important pages, top per host and crawl, personalised teleport."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from linkgraph.analyses import AnalysisParameters
from linkgraph.exceptions import QueryError
from linkgraph.graph import CompactGraph
from linkgraph.pagerank import RankParameters
from linkgraph.publisher import changed_scores
from linkgraph.ranking import Ranking, build_ranking
from schemas.links import LinkEdge, PageLinks, PageMeta

ANALYSIS = AnalysisParameters(farm_min_links=5, syndication_min_links=3)


def links(
    source: str,
    targets: list[str],
    at: int = 1,
    kind: str = "INTERNAL",
    crawl: str = "c1",
    part: int = 0,
    parts: int = 1,
) -> PageLinks:
    return PageLinks(
        crawl_id=crawl,
        from_url=source,
        fetched_at=at,
        part=part,
        parts=parts,
        edges=[
            LinkEdge(to_url=t, link_type=kind, discovered_at=at)  # type: ignore[arg-type]
            for t in targets
        ],
    )


def ranked(graph: CompactGraph, seeds: dict[str, list[str]] | None = None) -> Ranking:
    return build_ranking(graph, 1, 0, seeds or {}, RankParameters(), ANALYSIS, None)


def test_newest_fetch_wins_parts_add_up_and_late_older_fetches_are_ignored() -> None:
    graph = CompactGraph()
    graph.add(links("https://a.example/", ["https://a.example/1", "https://a.example/2"], at=1))
    graph.add(links("https://a.example/", ["https://a.example/3"], at=2, part=1, parts=2))
    graph.add(links("https://a.example/", ["https://a.example/4"], at=2, part=0, parts=2))
    graph.add(links("https://a.example/", ["https://a.example/4"], at=2, part=0, parts=2))
    assert not graph.add(links("https://a.example/", ["https://a.example/1"], at=1))
    arrays = graph.arrays()
    source = graph.find(["https://a.example/"])[0]
    targets = arrays.dst[arrays.src == source].tolist()
    assert sorted(graph.urls.urls(targets)) == ["https://a.example/3", "https://a.example/4"]


def test_orphans_are_crawled_pages_without_internal_in_links_seeds_excepted() -> None:
    graph = CompactGraph()
    home, about, lost, seed = (f"https://a.example/{p}" for p in ("", "about", "lost", "seed"))
    graph.add(links(home, [about, home]))  # a self-link is no in-link
    graph.add(links(about, [home]))
    graph.add(links(lost, [home, lost]))
    graph.add(links(seed, [home]))
    graph.add(links("https://b.example/", [lost], kind="EXTERNAL"))  # external: still an orphan
    views = ranked(graph, {"c1": [seed]})
    orphans = {o["url"] for o in views.answer("orphans", {})}
    assert orphans == {lost, "https://b.example/"}


def test_only_documents_are_orphans() -> None:
    """A crawl of page requisites fetches stylesheets and images no link reaches, and a sitemap
    is reached by none either: they are no orphan pages. The newest fetch of a URL says."""
    graph = CompactGraph()
    home, css, logo, sitemap, lost = (
        f"https://a.example/{p}" for p in ("", "site.css", "logo.png", "sitemap.xml", "lost")
    )
    graph.add(links(home, []))
    for url, media in ((css, "text/css"), (logo, "image/png"), (sitemap, "application/xml")):
        graph.add(
            links(url, []).model_copy(update={"page": PageMeta(status=200, content_type=media)})
        )
    graph.add(
        links(lost, []).model_copy(
            update={"page": PageMeta(status=200, content_type="text/html; charset=utf-8")}
        )
    )
    views = ranked(graph, {"c1": [home]})
    assert {o["url"] for o in views.answer("orphans", {})} == {lost}
    # Served as HTML since: an orphan page now.
    graph.add(
        links(logo, [], at=2).model_copy(
            update={"page": PageMeta(status=200, content_type="text/html")}
        )
    )
    assert {o["url"] for o in ranked(graph, {"c1": [home]}).answer("orphans", {})} == {lost, logo}


def test_ports_of_one_host_are_one_site() -> None:
    """A site on two ports (the demo's hosts, a staging server): the parser calls the links
    between them internal, and so do the orphans and the domain graph."""
    graph = CompactGraph()
    home, docs = "http://127.0.0.1:8000/", "http://127.0.0.1:8001/docs"
    graph.add(links(home, [docs, "https://b.example/"]))
    graph.add(links(docs, [home]))
    views = ranked(graph)
    assert views.answer("orphans", {}) == []
    domains = {(d["from"], d["to"]): d["links"] for d in views.answer("domains", {})}
    assert domains == {("127.0.0.1", "127.0.0.1"): 2, ("127.0.0.1", "b.example"): 1}


def test_orphans_of_a_crawl_are_those_its_newest_fetch_found() -> None:
    graph = CompactGraph()
    home, lost, old = (f"https://a.example/{p}" for p in ("", "lost", "old"))
    away = ["https://z.example/"]  # no page has an internal in-link: every one is an orphan
    graph.add(links(home, away, kind="EXTERNAL", crawl="c1"))
    graph.add(links(old, away, kind="EXTERNAL", crawl="c1"))
    graph.add(links(lost, away, kind="EXTERNAL", crawl="c2"))
    graph.add(links(home, away, at=2, kind="EXTERNAL", crawl="c2"))  # c2 fetched it last
    views = ranked(graph)
    assert {o["url"] for o in views.answer("orphans", {})} == {home, lost, old}
    assert {o["url"] for o in views.answer("orphans", {"crawl_id": "c2"})} == {home, lost}
    assert {o["url"] for o in views.answer("orphans", {"crawl_id": "c1"})} == {old}
    assert views.answer("orphans", {"crawl_id": "unknown"}) == []


def test_domain_graph_farms_and_syndication() -> None:
    graph = CompactGraph()
    farm = [f"https://spam.example/{i}" for i in range(6)]
    for i, page in enumerate(farm):
        # 6 pages x 2 links to money.example, one page also links elsewhere: 12/13 > 90%.
        targets = [f"https://money.example/{i}", f"https://money.example/x{i}"]
        if i == 0:
            targets.append("https://other.example/")
        graph.add(links(page, targets, kind="EXTERNAL"))
    mixed = [f"https://blog.example/{i}" for i in range(6)]
    for i, page in enumerate(mixed):  # 50/50 between two domains: no farm
        graph.add(links(page, [f"https://x.example/{i}", f"https://y.example/{i}"]))
    for i in range(3):  # news <-> wire, three links each way: syndication
        graph.add(links(f"https://news.example/{i}", [f"https://wire.example/{i}"]))
        graph.add(links(f"https://wire.example/{i}", [f"https://news.example/{i}"]))
    graph.add(links("https://news.example/9", ["https://wire.example/9"]))
    views = ranked(graph)
    farms = views.answer("farms", {})
    assert [(f["domain"], f["target_domain"], f["links_out"]) for f in farms] == [
        ("spam.example", "money.example", 13)
    ]
    assert farms[0]["share"] == pytest.approx(12 / 13)
    pairs = views.answer("syndication", {})
    assert pairs == [{"domains": ["news.example", "wire.example"], "links_ab": 4, "links_ba": 3}]
    domains = {(d["from"], d["to"]): d["links"] for d in views.answer("domains", {})}
    assert domains[("spam.example", "money.example")] == 12
    assert domains[("blog.example", "x.example")] == 6
    assert domains[("news.example", "wire.example")] == 4


def test_top_per_host_and_crawl_and_important_pages() -> None:
    graph = CompactGraph()
    hub = "https://a.example/hub"
    for i in range(30):
        graph.add(links(f"https://a.example/{i}", [hub]))
    graph.add(links("https://b.example/", ["https://b.example/x"], crawl="c2"))
    views = ranked(graph)
    top = views.answer("top", {"limit": "3"})["pages"]
    assert top[0]["url"] == hub
    assert [p["score"] for p in top] == sorted((p["score"] for p in top), reverse=True)
    only_b = views.answer("top", {"host": "b.example"})["pages"]
    assert {p["url"] for p in only_b} == {"https://b.example/", "https://b.example/x"}
    crawl_two = views.answer("top", {"crawl_id": "c2"})["pages"]
    assert {p["url"] for p in crawl_two} == {"https://b.example/", "https://b.example/x"}
    important = views.answer("important", {})["pages"]
    assert [p["url"] for p in important] == [hub]
    assert views.answer("top", {"crawl_id": "nope"})["pages"] == []


def test_nofollow_links_pass_no_rank() -> None:
    graph = CompactGraph()
    for i in range(10):
        graph.add(links(f"https://a.example/{i}", ["https://a.example/paid"], kind="SPONSORED"))
    graph.add(links("https://a.example/x", ["https://a.example/real"]))
    views = ranked(graph)
    scores = {p["url"]: p["score"] for p in views.answer("top", {"limit": "100"})["pages"]}
    assert scores["https://a.example/real"] > scores["https://a.example/paid"]


def test_personalised_teleport_by_seeds_and_pattern() -> None:
    graph = CompactGraph()
    for i in range(20):
        graph.add(links(f"https://a.example/{i}", [f"https://a.example/{(i + 1) % 20}"]))
        graph.add(links(f"https://b.example/{i}", [f"https://b.example/{(i + 1) % 20}"]))
    views = ranked(graph, {"c1": ["https://b.example/3"]})
    seeded = views.answer("top", {"teleport": "seeds", "limit": "1"})["pages"]
    assert seeded[0]["url"] == "https://b.example/3"
    by_pattern = views.answer(
        "top", {"teleport": "pattern", "pattern": r"a\.example", "limit": "20"}
    )
    assert all(p["url"].startswith("https://a.example/") for p in by_pattern["pages"])
    assert by_pattern["personalised"] is True
    with pytest.raises(QueryError):
        views.answer("top", {"teleport": "pattern", "pattern": "("})
    with pytest.raises(QueryError):
        views.answer("top", {"teleport": "pattern", "pattern": "nothing-matches"})


def test_only_changed_scores_are_published() -> None:
    previous = np.array([0.5, 0.3, 0.2])
    scores = np.array([0.5004, 0.25, 0.2, 0.05])
    assert changed_scores(scores, previous, 0.01).tolist() == [1, 3]
    assert changed_scores(scores, None, 0.01).tolist() == [0, 1, 2, 3]


def test_farm_and_syndication_thresholds_are_bracketed() -> None:
    """A farm sends MORE than 90 % of at least `farm_min_links` (5 here) leaving links to one
    domain; a syndication pair links at least `syndication_min_links` (3 here) each way."""
    graph = CompactGraph()

    def domain_links(domain: str, to_top: int, elsewhere: int) -> None:
        targets = [f"https://top-of-{domain}/{i}" for i in range(to_top)]
        targets += [f"https://else{i}.example/" for i in range(elsewhere)]
        graph.add(links(f"https://{domain}/", targets, kind="EXTERNAL"))

    domain_links("exactly-ninety.example", 9, 1)  # 0.9: not more than 90 %
    domain_links("just-over.example", 10, 1)  # 10/11
    domain_links("too-few.example", 4, 0)  # all of 4 < 5 links
    domain_links("just-enough.example", 5, 0)  # all of 5 links
    for i in range(3):
        graph.add(links(f"https://a.example/{i}", [f"https://b.example/{i}"]))
        graph.add(links(f"https://b.example/{i}", [f"https://a.example/{i}"]))
        graph.add(links(f"https://c.example/{i}", [f"https://d.example/{i}"]))
    for i in range(2):  # d answers c with only 2 links
        graph.add(links(f"https://d.example/{i}", [f"https://c.example/{i}"]))
    views = ranked(graph)
    farms = {f["domain"]: f["share"] for f in views.answer("farms", {})}
    assert farms == {"just-over.example": pytest.approx(10 / 11), "just-enough.example": 1.0}
    pairs = views.answer("syndication", {})
    assert pairs == [{"domains": ["a.example", "b.example"], "links_ab": 3, "links_ba": 3}]


def test_important_pages_are_those_above_mean_plus_two_sigma() -> None:
    """Hubs of several sizes, so that one, two and three standard deviations each pick other
    pages; the threshold is recomputed here from the listed scores of every page."""
    graph = CompactGraph()
    hubs = {"big": 35, "mid": 30, "small": 23}  # about 3.8, 2.5 and 1.4 sigmas above the mean
    for n in range(120):
        targets = [f"https://a.example/{hub}" for hub, size in hubs.items() if n < size]
        graph.add(links(f"https://a.example/{n}", [*targets, f"https://a.example/{(n + 1) % 120}"]))
    views = ranked(graph)
    scores = {p["url"]: p["score"] for p in views.answer("top", {"limit": "1000"})["pages"]}
    assert len(scores) == len(graph.urls) == 123

    def above(sigmas: float) -> set[str]:
        threshold = statistics.fmean(scores.values()) + sigmas * statistics.pstdev(scores.values())
        return {url for url, score in scores.items() if score > threshold}

    assert len(above(1)) > len(above(2)) > len(above(3)) > 0  # the graph tells them apart
    important = views.answer("important", {})
    assert {p["url"] for p in important["pages"]} == above(2)
    assert important["count"] == len(above(2))
    listed = [p["score"] for p in important["pages"]]
    assert listed == sorted(listed, reverse=True)


def test_path_is_a_shortest_click_path_from_the_seeds() -> None:
    """Breadth first over every link type, redirects included, from the seeds of one crawl or of
    all of them; a page no seed reaches has no path, one not in the graph is a 404."""
    graph = CompactGraph()
    a = "https://a.example"
    graph.add(links(f"{a}/", [f"{a}/news", f"{a}/about"]))
    graph.add(links(f"{a}/news", [f"{a}/news/1", f"{a}/news/2"]))
    graph.add(links(f"{a}/about", [f"{a}/news/2"], kind="NOFOLLOW"))
    graph.add(links(f"{a}/news/2", [f"{a}/deep"]))
    graph.add(links(f"{a}/old", [f"{a}/news/1"], kind="REDIRECT", crawl="c2"))
    graph.add(links(f"{a}/island", [f"{a}/deep"]))
    views = ranked(graph, {"c1": [f"{a}/"], "c2": [f"{a}/old"]})

    deep = views.answer("path", {"url": f"{a}/deep", "crawl_id": "c1"})
    assert deep["clicks"] == 3
    assert deep["path"][0] == f"{a}/" and deep["path"][-1] == f"{a}/deep"
    assert deep["path"][2] == f"{a}/news/2"
    assert views.answer("path", {"url": f"{a}/", "crawl_id": "c1"}) == {
        "url": f"{a}/",
        "clicks": 0,
        "path": [f"{a}/"],
    }
    redirected = views.answer("path", {"url": f"{a}/news/1"})  # every crawl's seeds
    assert (redirected["clicks"], redirected["path"]) == (1, [f"{a}/old", f"{a}/news/1"])
    assert views.answer("path", {"url": f"{a}/island"})["path"] is None
    assert views.answer("path", {"url": f"{a}/news", "crawl_id": "c2"})["clicks"] is None
    with pytest.raises(QueryError) as missing:
        views.answer("path", {"url": f"{a}/nowhere"})
    assert missing.value.status == 404
    with pytest.raises(QueryError):
        views.answer("path", {"url": "ftp://a.example/"})
