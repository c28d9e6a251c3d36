"""`streamcrawl seed`, `crawl`, `watch`, `pause`, `resume`, `cancel` and `crawls`: publish a crawl
request and follow it until done, follow one already running, send a command to a running crawl,
or list the crawls."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError
from pydantic_core import ErrorDetails
from rich.console import Console

from schemas import seeds
from schemas.crawls import CrawlState, CrawlStatus
from schemas.seeds import (
    CONTENT_TYPE_ALIASES,
    MAX_REQUEST_BYTES,
    MAX_SEEDS,
    CrawlCommand,
    CrawlRequest,
    PriorityStrategy,
    SameDomain,
    check_seed_url,
    expand_content_types,
)
from schemas.serde import encode
from schemas.topic import MIB
from streamcrawl.apis import ServiceDirectory
from streamcrawl.console import say
from streamcrawl.exceptions import DeliveryError, StreamcrawlError
from streamcrawl.kafka import KafkaProducer
from streamcrawl.settings import Settings
from streamcrawl.status import require_broker
from streamcrawl.summary import gather_summary, summary_lines
from streamcrawl.table import wait_until
from streamcrawl.topics import topic_name
from streamcrawl.watch import FINAL_STATUSES, TABLES_LOADED_S, CrawlWatcher, crawl_state


class CrawlRequestError(StreamcrawlError):
    """The command line does not make a valid crawl request; says which options and why."""


CONTROLS = {
    "pause": "pause a crawl: nothing more of it is leased; its queues are kept",
    "resume": "resume a paused crawl",
    "cancel": "cancel a crawl: its queued URLs are dropped, nothing more is leased",
}
CONTROLLED = {"pause": "paused", "resume": "active", "cancel": "cancelled"}
"""The status each command leaves a crawl in once its owner applied it."""
CONTROL_WAIT_S = 30.0
"""How long `pause`, `resume` and `cancel` wait for the crawl's owner (a frontier) to apply them."""
"""How long a command may take to read `crawls` and `progress` whole."""
MAX_BAD_LINES_SHOWN = 10
"""A seed list's bad lines named one by one; the rest are counted."""

OPTIONS = {
    "crawl_id": "--crawl-id",
    "max_depth": "--max-depth",
    "max_links": "--max-links",
    "max_pages_per_host": "--max-pages-per-host",
    "max_duration_ms": "--max-duration-s",
    "same_domain": "--same-domain",
    "domain_whitelist": "--domain",
    "include_pattern": "--include",
    "exclude_pattern": "--exclude",
    "politeness_delay_ms": "--delay-ms",
    "host_delays_ms": "--host-delay",
    "max_retries": "--max-retries",
    "max_redirects": "--max-redirects",
    "recrawl_interval_hours": "--recrawl-hours",
    "recrawl_adaptive": "--recrawl-adaptive",
    "fetch_page_requisites": "--page-requisites",
    "recrawl_min_hours": "--recrawl-min-hours",
    "recrawl_max_hours": "--recrawl-max-hours",
    "content_types": "--content-type",
    "priority": "--priority",
    "prefer_pattern": "--prefer",
    "scope_score_threshold": "--scope-threshold",
    "extract": "--extract",
    "extract_pattern": "--extract-pattern",
    "follow_within": "--follow-within",
    "headers": "--header",
}
"""The option that sets each CrawlRequest field (errors name the option, not the field)."""


def add_commands(commands: Any) -> None:
    """`seed`, `crawl`, `watch`, `crawls`, `pause`, `resume` and `cancel` on the CLI's
    subcommands."""
    seed = commands.add_parser("seed", help="publish a crawl request; prints the crawl id")
    add_crawl_options(seed)
    seed.set_defaults(run=cmd_seed)

    crawl = commands.add_parser("crawl", help="publish a crawl request and follow it until done")
    add_crawl_options(crawl)
    add_follow_option(crawl)
    crawl.set_defaults(run=cmd_crawl)

    watch = commands.add_parser(
        "watch", help="follow a crawl already submitted until done, then its summary"
    )
    add_crawl_id_argument(watch)
    add_follow_option(watch)
    watch.set_defaults(run=cmd_watch)

    listing = commands.add_parser("crawls", help="every crawl: its status, seeds and counters")
    listing.add_argument(
        "--status", choices=get_args(CrawlStatus), help="only the crawls in this status"
    )
    listing.add_argument("--json", action="store_true", help="print the crawls as JSON")
    listing.set_defaults(run=cmd_crawls)

    for action, explained in CONTROLS.items():
        control = commands.add_parser(action, help=explained)
        add_crawl_id_argument(control)
        control.add_argument(
            "--no-wait",
            action="store_true",
            help="return once it is sent, without waiting for the crawl's owner to apply it",
        )
        control.set_defaults(run=cmd_control, control=action)


def add_crawl_id_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "crawl_id", metavar="CRAWL_ID", help="the crawl, as seed or crawl printed it"
    )


def _default(field: str) -> object:
    return CrawlRequest.model_fields[field].default


def add_crawl_options(command: argparse.ArgumentParser, *, seeds_given: bool = True) -> None:
    """A crawl request's options, defaulting to CrawlRequest's (seed documents 000 and 004; a
    command may set others with `set_defaults`). Without `seeds_given` (the demo) no seed URLs
    are taken: the command has its own."""
    if seeds_given:
        command.add_argument("urls", nargs="*", metavar="URL", help="seed URLs (http or https)")
        command.add_argument(
            "--seeds-file",
            metavar="FILE",
            help="more seed URLs, one a line, from FILE (- for standard input); blank lines, "
            "lines starting with # and anything after a URL's first space are ignored",
        )
    else:
        command.set_defaults(urls=[], seeds_file=None)
    command.add_argument(
        "--crawl-id", metavar="ID", help="the crawl's id (default: a new random one)"
    )
    scope = command.add_argument_group("scope")
    scope.add_argument(
        "--max-depth",
        type=int,
        metavar="N",
        default=_default("max_depth"),
        help="links followed from a seed, -1 for no limit (default: %(default)s)",
    )
    scope.add_argument(
        "--same-domain",
        choices=get_args(SameDomain),
        default=_default("same_domain"),
        help="what discovered URLs may leave the seeds for: nothing beyond their hosts, their "
        "registered domains (example.co.uk), or any site (default: %(default)s)",
    )
    scope.add_argument(
        "--domain",
        action="append",
        metavar="DOMAIN",
        help="also admit hosts equal to or under DOMAIN (repeatable)",
    )
    scope.add_argument("--include", metavar="REGEX", help="admit only URLs it matches (anywhere)")
    scope.add_argument("--exclude", metavar="REGEX", help="never admit URLs it matches")
    scope.add_argument(
        "--scope-threshold",
        type=float,
        metavar="SCORE",
        help="admit only URLs whose scope score (domain affinity x depth factor, 0-1) reaches "
        "SCORE",
    )
    scope.add_argument(
        "--follow-nofollow", action="store_true", help="follow links marked rel=nofollow too"
    )
    scope.add_argument(
        "--sitemaps", action="store_true", help="admit the URLs of sitemaps robots.txt lists"
    )
    scope.add_argument(
        "--feeds",
        action="store_true",
        help="follow the RSS and Atom feeds pages announce (<link rel=alternate>) to their "
        "items; with --recrawl-hours a feed's dates tell which items changed",
    )
    scope.add_argument(
        "--follow-within",
        metavar="SELECTOR",
        help="discover only the links inside the elements it matches (CSS, or xpath:...), "
        "e.g. '.pagination, .product-list'; every link still goes to the link graph",
    )
    limits = command.add_argument_group("limits")
    limits.add_argument(
        "--max-links",
        type=int,
        metavar="N",
        help="most distinct URLs the crawl fetches, -1 for no limit (the default)",
    )
    limits.add_argument(
        "--max-pages-per-host", type=int, metavar="N", help="most pages admitted per host"
    )
    limits.add_argument(
        "--max-duration-s",
        type=float,
        metavar="S",
        help="the crawl ends after this long; its queued URLs are dropped",
    )
    fetching = command.add_argument_group("fetching")
    fetching.add_argument(
        "--delay-ms",
        type=int,
        metavar="MS",
        default=_default("politeness_delay_ms"),
        help="politeness delay between two requests to one host (default: %(default)s); "
        "a longer robots.txt Crawl-delay wins",
    )
    fetching.add_argument(
        "--host-delay",
        action="append",
        metavar="DOMAIN=MS",
        help="a politeness delay of its own for the hosts equal to or under DOMAIN, e.g. "
        "api.example.com=5000 (repeatable; the longest domain that matches wins)",
    )
    fetching.add_argument(
        "--ignore-robots", action="store_true", help="fetch what robots.txt disallows"
    )
    fetching.add_argument(
        "--check-external",
        action="store_true",
        help="fetch the links to other domains for their status only (never read or followed): "
        "broken outbound links show in streamcrawl broken",
    )
    fetching.add_argument(
        "--page-requisites",
        action="store_true",
        help="fetch what each page needs to be shown (stylesheets, scripts, images, fonts, "
        "media, frames) from any site, at the page's depth, as Heritrix and wget -p do, for an "
        "archive that replays; keeps every media type",
    )
    fetching.add_argument(
        "--cookies",
        action="store_true",
        help="send back the cookies each host set (for sites that set one and redirect to "
        "the same page: cookie checks, consent walls)",
    )
    fetching.add_argument(
        "--max-retries",
        type=int,
        metavar="N",
        help=f"retries of a failed fetch (default: {_default('max_retries')})",
    )
    fetching.add_argument(
        "--max-redirects",
        type=int,
        metavar="N",
        help=f"redirects followed from one URL (default: {_default('max_redirects')})",
    )
    fetching.add_argument(
        "--content-type",
        action="append",
        metavar="TYPE",
        help="a media type to keep, or an alias: "
        + ", ".join(CONTENT_TYPE_ALIASES)
        + " (repeatable; default: html)",
    )
    fetching.add_argument(
        "--header",
        action="append",
        metavar="'NAME: VALUE'",
        help="a request header sent with every fetch of the crawl, e.g. 'Accept-Language: de' "
        "(repeatable; not User-Agent, Accept or the other headers the fetcher sends itself)",
    )
    fetching.add_argument(
        "--recrawl-hours",
        type=float,
        metavar="H",
        help="fetch each page again this long after its last fetch (conditionally)",
    )
    fetching.add_argument(
        "--recrawl-adaptive",
        action="store_true",
        help="each page's recrawl interval adapts: divided by 1.5 after a recrawl found the "
        "page changed, x1.25 after one found it unchanged (starts at --recrawl-hours)",
    )
    fetching.add_argument(
        "--recrawl-min-hours",
        type=float,
        metavar="H",
        help="the shortest adaptive interval (default: --recrawl-hours / 4)",
    )
    fetching.add_argument(
        "--recrawl-max-hours",
        type=float,
        metavar="H",
        help="the longest adaptive interval (default: --recrawl-hours x 4)",
    )
    fetching.add_argument(
        "--priority",
        choices=get_args(PriorityStrategy),
        default=_default("priority"),
        help="the order of each host's queue: breadth first, seed score (in-links, authority, "
        "depth), PageRank, or novelty (fewer in-links first) (default: %(default)s)",
    )
    fetching.add_argument(
        "--prefer",
        metavar="REGEX",
        help="fetch the URLs it matches (anywhere) before the others of their host, in the "
        "--priority order (bfs and depth-ordered crawls: within their depth)",
    )
    extraction = command.add_argument_group("extraction (--extract: items on the `items` topic)")
    extraction.add_argument(
        "--extract",
        action="append",
        metavar="NAME=SELECTOR",
        help="a field read from every fetched page: a CSS selector (parsel's, with ::text and "
        "::attr(name)), xpath:EXPRESSION, or jsonld:TYPE (schema.org structured data), e.g. "
        "title=h1::text (repeatable)",
    )
    extraction.add_argument(
        "--extract-pattern",
        metavar="REGEX",
        help="extract only from pages whose URL it matches (anywhere)",
    )
    extraction.add_argument(
        "--near-duplicates",
        action="store_true",
        help="sign each page's main text (MinHash) so that streamcrawl duplicates --near finds "
        "the pages that say nearly the same",
    )


def add_follow_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--timeout-s",
        type=float,
        metavar="S",
        help="stop following after this long (the crawl goes on)",
    )


def read_seeds_file(name: str) -> tuple[list[str], list[str]]:
    """The seed URLs of a seed list (Heritrix's seeds.txt, Nutch's seed files: one URL a line,
    blank lines and # comments skipped, what follows a URL on its line ignored), and the
    problems of its bad lines, each named by its line number."""
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return [], [f"--seeds-file: cannot read {name}: {error}"]
    urls: list[str] = []
    bad: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        try:
            urls.append(check_seed_url(fields[0]))
        except ValueError as error:
            bad.append(f"--seeds-file line {number}: {error}")
    if len(bad) > MAX_BAD_LINES_SHOWN:
        bad[MAX_BAD_LINES_SHOWN:] = [f"... and {len(bad) - MAX_BAD_LINES_SHOWN} more bad lines"]
    return urls, bad


def crawl_request(args: argparse.Namespace) -> CrawlRequest:
    """The request the options describe; `CrawlRequestError` naming each bad option."""
    problems: list[str] = []
    seed_urls = list(args.urls)
    if args.seeds_file is not None:
        listed, bad_lines = read_seeds_file(args.seeds_file)
        seed_urls += listed
        problems += bad_lines
    fields: dict[str, object] = {
        "seeds": seed_urls,
        "max_depth": args.max_depth,
        "same_domain": args.same_domain,
        "politeness_delay_ms": args.delay_ms,
        "priority": args.priority,
        "respect_robots": not args.ignore_robots,
        "use_sitemaps": args.sitemaps,
        "use_feeds": args.feeds,
        "use_cookies": args.cookies,
        "check_external": args.check_external,
        "find_near_duplicates": args.near_duplicates,
        "fetch_page_requisites": args.page_requisites,
        "follow_nofollow": args.follow_nofollow,
        "recrawl_adaptive": args.recrawl_adaptive,
    }
    duration_s = args.max_duration_s
    given = {
        "crawl_id": args.crawl_id,
        "max_links": args.max_links,
        "max_pages_per_host": args.max_pages_per_host,
        "max_duration_ms": None if duration_s is None else round(duration_s * 1000),
        "domain_whitelist": args.domain,
        "include_pattern": args.include,
        "prefer_pattern": args.prefer,
        "exclude_pattern": args.exclude,
        "max_retries": args.max_retries,
        "max_redirects": args.max_redirects,
        "recrawl_interval_hours": args.recrawl_hours,
        "recrawl_min_hours": args.recrawl_min_hours,
        "recrawl_max_hours": args.recrawl_max_hours,
        "scope_score_threshold": args.scope_threshold,
        "follow_within": args.follow_within,
    }
    fields.update({name: value for name, value in given.items() if value is not None})
    if args.content_type:
        fields["content_types"], problem = expand_content_types(args.content_type)
        if problem is not None:
            problems.append(f"--content-type: {problem}")
    if args.extract:
        fields["extract"], bad = _extract_fields(args.extract)
        problems += bad
    if args.header:
        fields["headers"], bad = _headers(args.header)
        problems += bad
    if args.host_delay:
        fields["host_delays_ms"], bad = _host_delays(args.host_delay)
        problems += bad
    if args.extract_pattern is not None:
        fields["extract_pattern"] = args.extract_pattern
    try:
        request = CrawlRequest.model_validate(fields)
    except ValidationError as error:
        problems.extend(_problem(item) for item in error.errors())
    if problems:
        raise CrawlRequestError("not a valid crawl request:\n  " + "\n  ".join(problems))
    size = len(encode(request))
    if size > MAX_REQUEST_BYTES:
        base = len(encode(request.model_copy(update={"seeds": []})))
        per_seed = (size - base) / len(request.seeds)
        fitting = int((MAX_REQUEST_BYTES - base) / per_seed * 0.99)  # a margin for longer URLs
        raise CrawlRequestError(
            f"the crawl request takes {size / MIB:.1f} MiB, over the "
            f"{MAX_REQUEST_BYTES / MIB:.1f} MiB a crawl request may take: split its "
            f"{len(request.seeds)} seed URLs into crawls of about {fitting} at most"
        )
    return request


def _headers(given: list[str]) -> tuple[dict[str, str], list[str]]:
    """``--header 'NAME: VALUE'`` options as headers, and the problems of the malformed ones."""
    headers: dict[str, str] = {}
    problems: list[str] = []
    for option in given:
        name, colon, value = option.partition(":")
        if not colon or not name.strip():
            problems.append(f"--header: {option[:100]!r} is not 'NAME: VALUE'")
        else:
            headers[name.strip()] = value.strip()
    return headers, problems


def _host_delays(given: list[str]) -> tuple[dict[str, int], list[str]]:
    """``--host-delay DOMAIN=MS`` options as delays, and the problems of the malformed ones."""
    delays: dict[str, int] = {}
    problems: list[str] = []
    for option in given:
        domain, equals, delay = option.partition("=")
        if not equals or not domain.strip() or not delay.strip().isdigit():
            problems.append(f"--host-delay: {option[:100]!r} is not DOMAIN=MS")
        else:
            delays[domain.strip()] = int(delay)
    return delays, problems


def _extract_fields(given: list[str]) -> tuple[dict[str, str], list[str]]:
    """``--extract NAME=SELECTOR`` options as fields, and the problems of the malformed ones."""
    fields: dict[str, str] = {}
    problems: list[str] = []
    for option in given:
        name, equals, selector = option.partition("=")
        if not equals or not name.strip() or not selector.strip():
            problems.append(f"--extract: {option[:100]!r} is not NAME=SELECTOR")
        elif name.strip() in fields:
            problems.append(f"--extract: field {name.strip()!r} given twice")
        else:
            fields[name.strip()] = selector.strip()
    return fields, problems


def _problem(error: ErrorDetails) -> str:
    """One validation error, named by its option (`OPTIONS`; seed URLs as such)."""
    field = str(error["loc"][0]) if error["loc"] else ""
    if field == "seeds" and error["type"] == "too_short":
        return "no seed URLs: give them as arguments or with --seeds-file"
    if field == "seeds" and error["type"] == "too_long":
        return f"at most {MAX_SEEDS} seed URLs in one crawl, not {len(error['input'])}"
    where = "seed URL" if field == "seeds" else OPTIONS.get(field, field)
    message = error["msg"].removeprefix("Value error, ")
    if field == "max_duration_ms":  # the limit's own unit, not the option's
        message = "must be a positive number of seconds"
    return f"{where}: {message}"


def publish_request(settings: Settings, request: CrawlRequest | CrawlCommand) -> None:
    """A crawl request or command onto `seeds`, keyed by its crawl id (so its owner gets them in
    order); returns once the broker has it."""
    producer = KafkaProducer.from_settings(settings)
    value = encode(request)
    delivery = producer.produce(
        topic_name(settings, seeds.TOPIC), seeds.key(request.crawl_id), value
    )
    producer.flush(30)
    try:
        delivery.result(timeout=0)
    except DeliveryError as error:
        raise DeliveryError(
            f"the broker refused the {request.kind.replace('_', ' ')} "
            f"({len(value):,} bytes before compression): {error}"
        ) from error


def refuse_a_taken_crawl_id(settings: Settings, crawl_id: str) -> None:
    """`CrawlRequestError` when `crawls` has the crawl id already: its owner would ignore a
    second request under it, so the user's would be lost."""
    with CrawlWatcher(settings) as watcher:
        watcher.require_loaded()
        status = watcher.view(crawl_id).status
    if status is not None:
        raise CrawlRequestError(
            f"crawl {crawl_id} exists already ({status}): give the new one another --crawl-id"
        )


def cmd_seed(args: argparse.Namespace, settings: Settings) -> int:
    request = crawl_request(args)
    require_broker(settings)
    refuse_a_taken_crawl_id(settings, request.crawl_id)
    publish_request(settings, request)
    say(request.crawl_id)
    return 0


def follow_crawl(settings: Settings, crawl_id: str, timeout_s: float | None) -> int:
    """Show the crawl's progress until it is done, then its summary; 0 only when it finished."""
    console = Console()
    try:
        with CrawlWatcher(settings) as watcher:
            watcher.wait_loaded(TABLES_LOADED_S)  # the first line shows the crawl as it stands
            view = watcher.follow(crawl_id, say, timeout_s=timeout_s, console=console)
    except KeyboardInterrupt:
        say(
            f"stopped following crawl {crawl_id}; it goes on (streamcrawl watch {crawl_id} "
            f"follows it again, streamcrawl cancel {crawl_id} ends it)"
        )
        return 130
    with ServiceDirectory(settings) as directory:
        summary = gather_summary(crawl_id, view, directory)
    for line in summary_lines(summary):
        say(line)
    if view.status != "done":
        say(f"the crawl is {view.status or 'not started'}, not done")
    return 0 if view.status == "done" else 1


def submit_and_follow(settings: Settings, request: CrawlRequest, timeout_s: float | None) -> int:
    """Publish the request and follow it."""
    require_broker(settings)
    with ServiceDirectory(settings) as directory:
        if not directory.live("frontier"):
            say("no frontier is running: start the stack first (streamcrawl up)")
            return 2
    refuse_a_taken_crawl_id(settings, request.crawl_id)
    publish_request(settings, request)
    say(f"crawl {request.crawl_id} submitted")
    return follow_crawl(settings, request.crawl_id, timeout_s)


def cmd_crawl(args: argparse.Namespace, settings: Settings) -> int:
    return submit_and_follow(settings, crawl_request(args), args.timeout_s)


def cmd_watch(args: argparse.Namespace, settings: Settings) -> int:
    """Follow a crawl already submitted (by `seed`, or a `crawl` no longer followed) as `crawl`
    does: its progress until done, then its summary."""
    crawl_id = args.crawl_id
    require_broker(settings)
    if crawl_state(settings, crawl_id) is None:
        say(f"no crawl {crawl_id} (not started, or its owner has not read it yet)")
        return 1
    return follow_crawl(settings, crawl_id, args.timeout_s)


def cmd_control(args: argparse.Namespace, settings: Settings) -> int:
    """`pause`, `resume` or `cancel`: sent to the crawl's owner through `seeds` when the crawl is
    in `crawls` and not already there; then, unless `--no-wait`, its new status awaited."""
    action, wanted = args.control, CONTROLLED[args.control]
    try:
        command = CrawlCommand(crawl_id=args.crawl_id, action=action)
    except ValidationError as error:
        raise CrawlRequestError(f"not a crawl id: {error.errors()[0]['msg']}") from error
    crawl_id = command.crawl_id
    require_broker(settings)
    with CrawlWatcher(settings) as watcher:
        watcher.require_loaded()
        status = watcher.view(crawl_id).status
        if status is None:
            say(f"no crawl {crawl_id} (not started, or its owner has not read it yet)")
            return 1
        if status == wanted:
            say(f"crawl {crawl_id} is already {status}")
            return 0
        if status in FINAL_STATUSES:
            say(f"crawl {crawl_id} is {status}: nothing to {action}")
            return 1
        publish_request(settings, command)
        if args.no_wait:
            say(f"{action} sent to crawl {crawl_id}")
            return 0
        wait_until(
            lambda: watcher.view(crawl_id).status in (wanted, *FINAL_STATUSES), CONTROL_WAIT_S
        )
        status = watcher.view(crawl_id).status
    if status == wanted:
        say(f"crawl {crawl_id} is {status}")
        return 0
    say(f"{action} sent; crawl {crawl_id} is still {status} after {CONTROL_WAIT_S:.0f}s")
    return 1


LISTED = ("fetched", "queued", "leased", "delayed", "dead")
"""The counters `crawls` lists for each crawl."""


def cmd_crawls(args: argparse.Namespace, settings: Settings) -> int:
    """Every crawl in `crawls`, oldest first, with its counters from `progress`."""
    require_broker(settings)
    with CrawlWatcher(settings) as watcher:
        watcher.require_loaded()
        listing = [
            (state, counters)
            for state, counters in watcher.crawls()
            if args.status is None or state.status == args.status
        ]
    if args.json:
        say(json.dumps([crawl_document(state, counters) for state, counters in listing]))
        return 0
    if not listing:
        say("no crawls" + (f" {args.status}" if args.status else ""))
        return 0
    say(
        f"{'crawl':<34} {'status':<9} {'created (UTC)':<19} "
        + " ".join(f"{n:>8}" for n in LISTED)
        + "  seeds"
    )
    for state, counters in listing:
        say(crawl_line(state, counters))
    return 0


def crawl_line(state: CrawlState, counters: dict[str, int]) -> str:
    created = datetime.fromtimestamp(state.created_at / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    seeds = state.request.seeds
    first = seeds[0] if seeds else ""
    more = f" (+{len(seeds) - 1})" if len(seeds) > 1 else ""
    numbers = " ".join(f"{counters.get(name, 0):>8}" for name in LISTED)
    return f"{state.crawl_id:<34} {state.status:<9} {created:<19} {numbers}  {first}{more}"


def crawl_document(state: CrawlState, counters: dict[str, int]) -> dict[str, Any]:
    return {
        "crawl_id": state.crawl_id,
        "status": state.status,
        "ended_by": state.ended_by,
        "created_at": state.created_at,
        "updated_at": state.updated_at,
        "seeds": list(state.request.seeds),
        "counters": counters,
    }
