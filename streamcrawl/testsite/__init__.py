"""A deterministic generated web site served on 127.0.0.1, with its own ground truth.

`graph` builds the site from a seed, `pages` renders it and says which edges each page holds,
`reference` runs seed document 000's breadth-first crawl over it, and `server` serves it. The demo
(`streamcrawl demo`), the end-to-end tests and the benchmark all crawl it.
"""

from streamcrawl.testsite.graph import Address, SiteGraph, generate_site
from streamcrawl.testsite.pages import BoundSite, ExpectedEdge
from streamcrawl.testsite.reference import ReferenceCrawl, reference_crawl
from streamcrawl.testsite.server import SiteServer

__all__ = [
    "Address",
    "BoundSite",
    "ExpectedEdge",
    "ReferenceCrawl",
    "SiteGraph",
    "SiteServer",
    "generate_site",
    "reference_crawl",
]
