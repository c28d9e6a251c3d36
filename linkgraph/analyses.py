"""Global analyses of one ranking's graph snapshot (seed document 002, "Use Cases"). Pure numpy.

- **Domain graph**: links between pages (self-links excluded, every link type) aggregated by the
  registered domains of both ends, with counts; a domain's links to itself are its internal links.
- **Link farms**: domains with at least ``farm_min_links`` links to other domains of which more
  than ``farm_share`` (0.9) go to one single target domain. Only links leaving the domain count:
  counting internal ones would make every site a farm of itself.
- **Syndication pairs**: two domains linking each other with at least ``syndication_min_links``
  links in each direction (bidirectional high-volume linking).
- **Orphans**: crawled pages with no internal in-link (from another page of the same registered
  domain, any link type), seeds excepted: pages that exist but that navigation does not reach.
  Only documents count (HTML, `linkgraph.graph.is_document`): a page's stylesheet or image, a
  sitemap or a feed is reached by no link and is no orphan.
- **Important pages**: PageRank above mean + 2 standard deviations.
- **Click paths**: a shortest path of links (every type, redirects included) from the seeds to
  each page, breadth first over the whole graph: how many clicks a reader needs from a start page
  and through which pages, what SEO audits call click depth. One BFS a seed set, whose
  predecessor array answers every page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from linkgraph.graph import EdgeArrays
from linkgraph.pagerank import distinct


@dataclass(frozen=True)
class AnalysisParameters:
    farm_share: float = 0.9
    farm_min_links: int = 10
    syndication_min_links: int = 10
    important_sigmas: float = 2.0


@dataclass(frozen=True)
class DomainLinks:
    source: npt.NDArray[np.int64]
    target: npt.NDArray[np.int64]
    links: npt.NDArray[np.int64]


def edge_domains(
    graph: EdgeArrays,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
    """Per edge: source domain, target domain, and whether it joins two different pages."""
    domains = graph.domain_of_host[graph.host[: graph.nodes]]
    return domains[graph.src], domains[graph.dst], graph.src != graph.dst


def domain_links(graph: EdgeArrays) -> DomainLinks:
    source, target, between_pages = edge_domains(graph)
    width = int(graph.domain_of_host.max(initial=0)) + 1
    pairs = source[between_pages].astype(np.int64) * width + target[between_pages]
    unique, counts = distinct(pairs)
    return DomainLinks(unique // width, unique % width, counts)


def domain_graph(links: DomainLinks, names: list[str], limit: int) -> list[dict[str, Any]]:
    order = np.argsort(-links.links, kind="stable")[:limit]
    return [
        {
            "from": names[int(links.source[i])],
            "to": names[int(links.target[i])],
            "links": int(links.links[i]),
        }
        for i in order
    ]


def farms(
    links: DomainLinks, names: list[str], parameters: AnalysisParameters
) -> list[dict[str, Any]]:
    leaving = links.source != links.target
    source, target, counts = links.source[leaving], links.target[leaving], links.links[leaving]
    if source.size == 0:
        return []
    # `links` is sorted by (source, target): each source domain is one run.
    starts = np.flatnonzero(np.concatenate(([True], source[1:] != source[:-1])))
    totals = np.add.reduceat(counts, starts)
    tops = np.maximum.reduceat(counts, starts)
    run = np.repeat(np.arange(starts.size), np.diff(np.append(starts, source.size)))
    at_top = np.flatnonzero(counts == tops[run])
    first_top = at_top[np.concatenate(([True], run[at_top][1:] != run[at_top][:-1]))]
    found: list[dict[str, Any]] = [
        {
            "domain": names[int(source[starts[i]])],
            "target_domain": names[int(target[first_top[i]])],
            "share": float(tops[i] / totals[i]),
            "links_out": int(totals[i]),
            "links_to_target": int(tops[i]),
        }
        for i in np.flatnonzero(
            (totals >= parameters.farm_min_links) & (tops > parameters.farm_share * totals)
        )
    ]
    found.sort(key=lambda item: (-item["links_to_target"], item["domain"]))
    return found


def syndication(
    links: DomainLinks, names: list[str], parameters: AnalysisParameters
) -> list[dict[str, Any]]:
    heavy: dict[tuple[int, int], int] = {
        (int(s), int(t)): int(n)
        for s, t, n in zip(links.source, links.target, links.links, strict=True)
        if s != t and n >= parameters.syndication_min_links
    }
    pairs: list[dict[str, Any]] = []
    for (a, b), forward in heavy.items():
        backward = heavy.get((b, a))
        if a < b and backward is not None:
            pairs.append(
                {"domains": [names[a], names[b]], "links_ab": forward, "links_ba": backward}
            )
    pairs.sort(key=lambda item: (-(item["links_ab"] + item["links_ba"]), item["domains"]))
    return pairs


def orphans(graph: EdgeArrays, seeds: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    source, target, between_pages = edge_domains(graph)
    internal = between_pages & (source == target)
    internal_in = np.bincount(graph.dst[internal], minlength=graph.nodes)
    orphan = graph.crawled & graph.documents & (internal_in == 0)
    orphan[seeds] = False
    return np.flatnonzero(orphan)


def click_tree(graph: EdgeArrays, seeds: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
    """Each node's predecessor on a shortest path from the seeds: a seed's is -1, and so is that
    of a node the seeds do not reach (tell them apart by `click_path`). The seeds hang from one
    extra node, so a single breadth-first search serves them all."""
    start = graph.nodes
    size = graph.nodes + 1
    # int32 ids and int8 weights: about 14 bytes a link while the tree is built.
    sources = np.concatenate((graph.src, np.full(seeds.size, start, dtype=np.int32)))
    targets = np.concatenate((graph.dst, seeds.astype(np.int32)))
    ones = np.ones(sources.size, dtype=np.int8)
    adjacency = csr_matrix((ones, (sources, targets)), shape=(size, size))
    _, predecessors = breadth_first_order(adjacency, start, directed=True)
    tree: npt.NDArray[np.int32] = np.asarray(predecessors[: graph.nodes], dtype=np.int32)
    tree[(tree == start) | (tree < 0)] = -1
    return tree


def click_path(
    tree: npt.NDArray[np.int32], seeds: npt.NDArray[np.int64], node: int
) -> list[int] | None:
    """The nodes from a seed to ``node``, both included; None when no seed reaches it."""
    path = [node]
    while tree[path[-1]] >= 0:
        path.append(int(tree[path[-1]]))
        if len(path) > tree.size:  # a cycle could only come from a corrupt tree
            return None
    return path[::-1] if np.isin(path[-1], seeds) else None


def important(scores: npt.NDArray[np.float64], sigmas: float) -> npt.NDArray[np.int64]:
    if scores.size == 0:
        return np.zeros(0, dtype=np.int64)
    threshold = scores.mean() + sigmas * scores.std()
    found = np.flatnonzero(scores > threshold)
    return found[np.argsort(-scores[found], kind="stable")]


def top(
    scores: npt.NDArray[np.float64], mask: npt.NDArray[np.bool_] | None, limit: int
) -> npt.NDArray[np.int64]:
    candidates = np.arange(scores.size) if mask is None else np.flatnonzero(mask)
    if candidates.size > limit:
        part = np.argpartition(-scores[candidates], limit - 1)[:limit]
        candidates = candidates[part]
    return candidates[np.lexsort((candidates, -scores[candidates]))]
