"""`seeds`: crawl requests and crawl commands, from users to the frontier.

Producers: the CLI (`streamcrawl seed`), the crawl-control API, any script. Consumer: the frontier
group; the instance owning a crawl id's partition owns that crawl (writes `crawls`, grants budget).
Key: the crawl id, so every command of one crawl lands on its owner in order. Cleanup: delete (the
accepted request lives on in the compacted `crawls` topic).

These are inbound user messages: unknown fields are rejected, URLs must be http(s), lengths and
numbers are bounded and patterns must compile, so a bad request dead-letters with a clear reason
instead of misbehaving later.
"""

from __future__ import annotations

import functools
import re
import uuid
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Discriminator, Field, Tag, TypeAdapter, ValidationInfo, field_validator

from schemas.base import InboundModel
from schemas.canonical import canonical_url, host_key
from schemas.items import Extraction, FieldName, Selector, check_fields, selector_xpath
from schemas.serde import PART_HEADROOM_BYTES
from schemas.topic import MIB, TopicSpec

TOPIC = TopicSpec(suffix="seeds", key="crawl_id", max_message_bytes=4 * MIB)

MAX_URL_LENGTH = 8192
MAX_SEEDS = 100_000
MAX_REQUEST_BYTES = TOPIC.max_message_bytes - PART_HEADROOM_BYTES
"""The most an encoded crawl request may take, so it fits `seeds` (and `crawls`, inside its
crawl's state) whatever the compression: some 70,000 seed URLs of 60 bytes."""
MAX_PATTERN_LENGTH = 2048

CrawlId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")]
SameDomain = Literal["host", "registered_domain", "any"]
PriorityStrategy = Literal["bfs", "score", "pagerank", "novelty"]
RecrawlHours = Annotated[float, Field(gt=0, le=24 * 3650)]
DelayMs = Annotated[int, Field(ge=0, le=3_600_000)]
MAX_HOST_DELAYS = 1_000


CONTENT_TYPE_ALIASES = {
    "html": ("text/html", "application/xhtml+xml"),
    "any": ("*/*",),
}
"""Words that stand for media types where a user gives content types (the API, the CLI)."""

SITEMAP_MEDIA_TYPES = ("application/xml", "text/xml", "application/gzip", "application/x-gzip")
"""The media types sitemaps are served as (sitemaps.org: XML, or XML gzipped)."""


FEED_MEDIA_TYPES = (
    "application/rss+xml",
    "application/atom+xml",
    "application/rdf+xml",
    "application/feed+json",
    "application/xml",
    "text/xml",
    "application/json",
)
"""The media types news feeds are served as: their own, and plain XML or JSON (common for RSS and
JSON Feed)."""


def looks_like_sitemap(url: str) -> bool:
    """Whether a URL is where a sitemap would be: ``sitemap`` in its path (``/sitemap.xml``,
    ``/wp-sitemap.xml``, ``/sitemaps/posts``), or a path ending ``.xml`` or ``.xml.gz`` (the files
    a sitemap index lists)."""
    path = urlsplit(url).path.lower()
    return "sitemap" in path or path.endswith((".xml", ".xml.gz"))


def _domain_name(written: str) -> str | None:
    """A domain as a host key without port (IDNA, lowercase), ``*.`` and dots trimmed; None when
    it is no host name (a URL, a path, a port)."""
    bare = written.strip().lower().removeprefix("*.").strip(".")
    if not bare or any(character in bare for character in "/:@?#[] \t"):
        return None
    canonical = canonical_url(f"http://{bare}/")
    return None if canonical is None else host_key(canonical)


def fetched_content_types(request: CrawlRequest, url: str) -> list[str]:
    """The media types a fetch of `url` keeps: the crawl's, and the sitemap types too where a
    crawl that uses sitemaps fetches a sitemap-like URL, so its HTML-only default does not refuse
    the very sitemaps it asked for (served as application/xml or gzip); with ``use_feeds``, the
    feed types for every URL (feed URLs look like anything: ``/feed/``, ``?format=rss``); with
    ``fetch_page_requisites``, every type (a URL queued does not say whether it is a requisite)."""
    if request.fetch_page_requisites:
        return ["*/*"]
    kept = list(request.content_types)
    if not kept or "*/*" in kept:
        return kept
    if request.use_sitemaps and looks_like_sitemap(url):
        kept += [media for media in SITEMAP_MEDIA_TYPES if media not in kept]
    if request.use_feeds:
        kept += [media for media in FEED_MEDIA_TYPES if media not in kept]
    return kept


MAX_HEADERS = 20
MAX_HEADER_BYTES = 1000
FETCHER_HEADERS = frozenset(
    {
        "host",
        "user-agent",
        "accept",
        "accept-encoding",
        "authorization",
        "connection",
        "content-length",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "keep-alive",
        "if-none-match",
        "if-modified-since",
        "if-match",
        "if-unmodified-since",
        "if-range",
        "range",
        "expect",
    }
)
"""Headers a crawl may not set: the fetcher's (its identity, which robots.txt rules are matched
against; Accept from --content-type; the encodings it can decode; the conditional headers of
recrawls; credentials, which go to one origin from the fetcher's configuration) and HTTP's own."""
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def check_headers(headers: dict[str, str]) -> dict[str, str]:
    """The headers when a crawl may send them all, else ValueError naming each bad one."""
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"{len(headers)} headers, at most {MAX_HEADERS}")
    problems = []
    for name, value in headers.items():
        lowered = name.lower()
        if not _TOKEN.match(name):
            problems.append(f"{name[:100]!r} is not a header name")
        elif lowered in FETCHER_HEADERS or lowered.startswith("proxy-"):
            problems.append(f"{name} is the fetcher's to send")
        elif any(character in value for character in "\r\n\0"):
            problems.append(f"{name}: the value holds a line break or NUL")
        elif len(name) + len(value) > MAX_HEADER_BYTES:
            problems.append(f"{name}: longer than {MAX_HEADER_BYTES} bytes")
    if problems:
        raise ValueError("; ".join(problems))
    return headers


def extraction_for(request: CrawlRequest, url: str) -> Extraction | None:
    """The selectors a fetch of `url` carries to the parser: the crawl's, when it names fields
    and its ``extract_pattern`` (if any) matches the URL."""
    if request.extract is None:
        return None
    pattern = request.extract_pattern
    if pattern is not None and _compiled(pattern).search(url) is None:
        return None
    return Extraction.model_construct(fields=request.extract)  # validated with the request


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def new_crawl_id() -> str:
    return uuid.uuid4().hex


def key(crawl_id: str) -> str:
    return crawl_id


def check_seed_url(url: str) -> str:
    """The URL when a crawl can start from it (http or https, a host, not too long), else
    ValueError saying why."""
    if len(url) > MAX_URL_LENGTH:
        raise ValueError(f"URL longer than {MAX_URL_LENGTH} characters")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"only http and https URLs are crawled, not {url[:100]!r}")
    if not parts.hostname:
        raise ValueError(f"URL has no host: {url[:100]!r}")
    if canonical_url(url) is None:
        raise ValueError(f"not a crawlable URL (invalid host or port): {url[:100]!r}")
    return url


def _check_pattern(pattern: str | None) -> str | None:
    if pattern is None:
        return None
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(f"pattern longer than {MAX_PATTERN_LENGTH} characters")
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as error:
        # OverflowError (a{4294967296}) and RecursionError (deep nesting) are not ValueErrors, so
        # pydantic would let them escape `decode` and stop the partition instead of dead-lettering.
        raise ValueError(f"pattern does not compile: {error}") from error
    return pattern


def expand_content_types(value: object) -> tuple[object, str | None]:
    """Aliases replaced by their media types; a bare word that is no alias is a problem."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        return value, None  # pydantic reports the wrong type
    expanded: list[object] = []
    for item in items:
        if isinstance(item, str) and "/" not in item:
            alias = CONTENT_TYPE_ALIASES.get(item.strip().lower())
            if alias is None:
                known = ", ".join(CONTENT_TYPE_ALIASES)
                return value, f"{item[:100]!r} is neither a media type nor one of: {known}"
            expanded.extend(alias)
        else:
            expanded.append(item)
    return expanded, None


class CrawlRequest(InboundModel):
    """Start a crawl: seeds plus the limits and policies of seed documents 000 and 004."""

    kind: Literal["crawl_request"] = "crawl_request"
    crawl_id: CrawlId = Field(default_factory=new_crawl_id)
    seeds: Annotated[list[str], Field(min_length=1, max_length=MAX_SEEDS)]
    max_depth: Annotated[int, Field(ge=-1, le=10_000)] = 2
    """-1 means unlimited."""
    max_links: Annotated[int, Field(ge=-1, le=10**12)] = -1
    """Hard cap on distinct URLs leased across all partitions; -1 means unlimited."""
    max_pages_per_host: Annotated[int, Field(ge=-1, le=10**12)] = -1
    max_duration_ms: Annotated[int, Field(ge=-1, le=10**12)] = -1
    same_domain: SameDomain = "host"
    domain_whitelist: Annotated[
        list[Annotated[str, Field(max_length=253)]], Field(max_length=10_000)
    ] = Field(default_factory=list)
    include_pattern: str | None = None
    exclude_pattern: str | None = None
    politeness_delay_ms: DelayMs = 1000
    host_delays_ms: (
        Annotated[dict[Annotated[str, Field(max_length=253)], DelayMs], Field(max_length=1000)]
        | None
    ) = None
    """Politeness delays of their own for some sites, domain -> ms, as Heritrix's sheets and
    Scrapy's DOWNLOAD_SLOTS set them: a host equal to or under a domain gets its delay (the
    longest domain that matches wins), any other host ``politeness_delay_ms``. A longer
    robots.txt Crawl-delay still wins (`delay_ms_for`)."""
    max_retries: Annotated[int, Field(ge=0, le=100)] = 3
    recrawl_interval_hours: RecrawlHours | None = None
    """Fetch each page again this long after its last fetch, conditionally; None: never."""
    recrawl_adaptive: bool = False
    """Each page's interval adapts to how often it changes (`frontier.recrawl`)."""
    recrawl_min_hours: RecrawlHours | None = None
    """The shortest adaptive interval; None: `recrawl_interval_hours` / 4."""
    recrawl_max_hours: RecrawlHours | None = None
    """The longest adaptive interval; None: `recrawl_interval_hours` x 4."""
    content_types: Annotated[list[Annotated[str, Field(max_length=255)]], Field(max_length=100)] = (
        Field(default_factory=lambda: ["text/html", "application/xhtml+xml"])
    )
    respect_robots: bool = True
    use_sitemaps: bool = False
    use_feeds: bool = False
    """Follow the RSS and Atom feeds pages announce (``<link rel=alternate>``) to their items, as
    StormCrawler's feed parser does; feeds given as seeds are read whatever this says, when the
    content types keep them."""
    find_near_duplicates: bool = False
    """Sign each page's main text (MinHash, `parser.minhash`) so that `streamcrawl duplicates
    --near` finds the pages that say nearly the same, as site audits report them; it costs the
    parser about a third of a millisecond per 1,000 words."""
    check_external: bool = False
    """Fetch the links that leave the crawl's domains too, once each, for their status only:
    their bodies are not read, stored or parsed, so nothing beyond them is crawled. Broken
    outbound links then show in `streamcrawl broken`, as a link checker reports them."""
    fetch_page_requisites: bool = False
    """Fetch what each page needs to be shown (its stylesheets, scripts, images, fonts, media and
    frames: Heritrix's embeds, wget's ``--page-requisites``), from any site, at the page's own
    depth, so that an archive of the crawl replays its pages as they looked (`parser.requisites`).
    A requisite is one more hop of the page like a redirect (``max_redirects`` bounds both, as
    Heritrix's transclusion hops), the include pattern and the domain and scope-score rules do
    not apply to it, and every media type is kept, for every fetch of the crawl."""
    use_cookies: bool = False
    """Send back the cookies sites set, per host, as Scrapy and Heritrix do (`fetcher.cookies`):
    for sites that set one and redirect to the same page. Off by default, as in StormCrawler and
    Nutch: a crawler without cookies is not followed from page to page by session trackers."""
    priority: PriorityStrategy = "bfs"
    prefer_pattern: str | None = None
    """URLs it matches (anywhere) are fetched before the others on their host, the strategy's
    order kept within each group (under bfs and depth-ordered crawls: within their depth), as
    Heritrix's precedence rules and Scrapy's request priorities put product or article pages
    first."""
    follow_nofollow: bool = False
    max_redirects: Annotated[int, Field(ge=0, le=50)] = 5
    scope_score_threshold: Annotated[float, Field(ge=0, le=1)] | None = None
    """When set, seed 002's scope_score (domain affinity x depth factor) must reach it."""
    extract: dict[FieldName, Selector] | None = None
    """Fields to extract from every fetched page, name -> selector (CSS, or XPath after
    ``xpath:``): one item a page on `items` (`schemas.items`)."""
    extract_pattern: str | None = None
    """Extract only from pages whose URL it matches (anywhere); every page when unset."""
    headers: dict[str, str] | None = None
    """Request headers sent with every fetch of the crawl (Accept-Language, Cookie, Referer,
    X-...), as Scrapy's DEFAULT_REQUEST_HEADERS; not robots.txt's. The headers the fetcher owns
    are refused (`check_headers`)."""
    follow_within: Selector | None = None
    """Discover only the links inside the elements it matches on a page (CSS, or XPath after
    ``xpath:``), as Scrapy's restrict_css: a pagination bar, a product list. Every link is
    still an edge of the link graph."""

    @field_validator("fetch_page_requisites")
    @classmethod
    def _requisites_are_kept_not_checked(cls, fetch: bool, info: ValidationInfo) -> bool:
        if fetch and info.data.get("check_external"):
            raise ValueError(
                "does not combine with check_external: a requisite on another site is kept, a "
                "link to one only checked, and one URL can be both"
            )
        return fetch

    @field_validator("seeds")
    @classmethod
    def _seeds_are_http(cls, seeds: list[str]) -> list[str]:
        return [check_seed_url(seed.strip()) for seed in seeds]

    @field_validator("include_pattern", "exclude_pattern", "prefer_pattern")
    @classmethod
    def _pattern_compiles(cls, pattern: str | None) -> str | None:
        return _check_pattern(pattern)

    @field_validator("extract")
    @classmethod
    def _selectors_compile(cls, fields: dict[str, str] | None) -> dict[str, str] | None:
        return check_fields(fields) if fields else None

    @field_validator("headers")
    @classmethod
    def _headers_are_the_crawls_to_set(
        cls, headers: dict[str, str] | None
    ) -> dict[str, str] | None:
        return check_headers(headers) if headers else None

    @field_validator("follow_within")
    @classmethod
    def _region_selector_compiles(cls, selector: str | None) -> str | None:
        if selector is not None:
            selector_xpath(selector)
        return selector

    @field_validator("extract_pattern")
    @classmethod
    def _pattern_limits_extraction(cls, pattern: str | None, info: ValidationInfo) -> str | None:
        if pattern is not None and "extract" in info.data and info.data["extract"] is None:
            raise ValueError("limits which pages fields are extracted from, and none are named")
        return _check_pattern(pattern)

    @field_validator("content_types", mode="before")
    @classmethod
    def _content_types_as_list(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("domain_whitelist")
    @classmethod
    def _lowercase_domains(cls, domains: list[str]) -> list[str]:
        return [domain.strip().lower().rstrip(".") for domain in domains if domain.strip()]

    @field_validator("host_delays_ms")
    @classmethod
    def _delays_are_by_domain(cls, delays: dict[str, int] | None) -> dict[str, int] | None:
        if not delays:
            return None
        by_domain: dict[str, int] = {}
        for written, delay in delays.items():
            domain = _domain_name(written)
            if domain is None:
                raise ValueError(f"{written[:100]!r} is not a domain name")
            by_domain[domain] = delay
        return by_domain

    def delay_ms_for(self, host: str) -> int:
        """The politeness delay of ``host`` (a host key): the delay of the longest domain of
        ``host_delays_ms`` it is equal to or under, else ``politeness_delay_ms``."""
        delays = self.host_delays_ms
        if delays:
            name = host[: host.find("]") + 1] if host.startswith("[") else host.partition(":")[0]
            while name:
                delay = delays.get(name)
                if delay is not None:
                    return delay
                name = name.partition(".")[2]
        return self.politeness_delay_ms

    @field_validator("recrawl_adaptive")
    @classmethod
    def _adapts_an_interval(cls, adaptive: bool, info: ValidationInfo) -> bool:
        if adaptive and info.data.get("recrawl_interval_hours", 0) is None:
            raise ValueError("needs a recrawl interval to adapt")
        return adaptive

    @field_validator("recrawl_min_hours", "recrawl_max_hours")
    @classmethod
    def _bounds_the_interval(cls, hours: float | None, info: ValidationInfo) -> float | None:
        if hours is None or not {"recrawl_interval_hours", "recrawl_adaptive"} <= info.data.keys():
            return hours  # unset, or the fields it is checked against are already wrong
        if not info.data["recrawl_adaptive"]:
            raise ValueError("bounds an adaptive recrawl interval, and this crawl's is fixed")
        interval = info.data["recrawl_interval_hours"]
        if info.field_name == "recrawl_min_hours" and hours > interval:
            raise ValueError(f"{hours} is above the recrawl interval, {interval} hours")
        if info.field_name == "recrawl_max_hours" and hours < interval:
            raise ValueError(f"{hours} is below the recrawl interval, {interval} hours")
        return hours


class CrawlCommand(InboundModel):
    """Pause, resume or cancel a crawl; a cancelled crawl releases nothing more."""

    kind: Literal["crawl_command"] = "crawl_command"
    crawl_id: CrawlId
    action: Literal["pause", "resume", "cancel"]


def _seed_kind(value: object) -> str | None:
    """A message without `kind` is a crawl request: the common case stays short to write."""
    if isinstance(value, dict):
        return str(value.get("kind", "crawl_request"))
    return getattr(value, "kind", None)


SeedMessage = Annotated[
    Annotated[CrawlRequest, Tag("crawl_request")] | Annotated[CrawlCommand, Tag("crawl_command")],
    Discriminator(_seed_kind),
]
SEED_MESSAGE: TypeAdapter[CrawlRequest | CrawlCommand] = TypeAdapter(SeedMessage)
