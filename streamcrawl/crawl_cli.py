"""`streamcrawl seed` and `streamcrawl crawl`: publish a crawl request, and follow it until done."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from schemas import seeds
from schemas.seeds import CrawlRequest
from schemas.serde import encode
from streamcrawl.apis import ServiceDirectory
from streamcrawl.console import say
from streamcrawl.kafka import KafkaProducer
from streamcrawl.settings import Settings
from streamcrawl.summary import gather_summary, summary_lines
from streamcrawl.topics import topic_name
from streamcrawl.watch import CrawlWatcher, OutcomeTally


def add_commands(commands: Any) -> None:
    """`seed` and `crawl` on the CLI's subcommands."""
    seed = commands.add_parser("seed", help="publish a crawl request; prints the crawl id")
    seed.add_argument("urls", nargs="+")
    add_crawl_options(seed)
    seed.set_defaults(run=cmd_seed)

    crawl = commands.add_parser("crawl", help="publish a crawl request and follow it until done")
    crawl.add_argument("urls", nargs="+")
    add_crawl_options(crawl)
    crawl.set_defaults(run=cmd_crawl)


def add_crawl_options(
    command: argparse.ArgumentParser, max_depth: int = 2, delay_ms: int = 1000
) -> None:
    command.add_argument("--max-depth", type=int, default=max_depth)
    command.add_argument("--max-links", type=int, default=-1)
    command.add_argument(
        "--same-domain", choices=["host", "registered_domain", "any"], default="host"
    )
    command.add_argument("--include")
    command.add_argument("--exclude")
    command.add_argument("--delay-ms", type=int, default=delay_ms)
    command.add_argument("--max-retries", type=int, default=3)
    command.add_argument(
        "--priority", choices=["bfs", "score", "pagerank", "novelty"], default="bfs"
    )
    command.add_argument("--ignore-robots", action="store_true")
    command.add_argument(
        "--timeout-s",
        type=float,
        default=None,
        help="stop following after this long (the crawl goes on)",
    )


def crawl_request(args: argparse.Namespace) -> CrawlRequest:
    return CrawlRequest(
        seeds=args.urls,
        max_depth=args.max_depth,
        max_links=args.max_links,
        same_domain=args.same_domain,
        include_pattern=args.include,
        exclude_pattern=args.exclude,
        politeness_delay_ms=args.delay_ms,
        max_retries=args.max_retries,
        priority=args.priority,
        respect_robots=not args.ignore_robots,
    )


def publish_request(settings: Settings, request: CrawlRequest) -> None:
    producer = KafkaProducer.from_settings(settings)
    producer.produce(
        topic_name(settings, seeds.TOPIC), seeds.key(request.crawl_id), encode(request)
    )
    producer.flush(30)


def cmd_seed(args: argparse.Namespace, settings: Settings) -> int:
    request = crawl_request(args)
    publish_request(settings, request)
    say(request.crawl_id)
    return 0


def follow_crawl(
    settings: Settings, crawl_id: str, timeout_s: float | None, tally: OutcomeTally
) -> int:
    """Show the crawl's progress until it is done, then its summary; 0 only when it finished."""
    console = Console()
    try:
        with CrawlWatcher(settings) as watcher:
            view = watcher.follow(
                crawl_id, say, timeout_s=timeout_s, console=console, on_tick=tally.poll
            )
        tally.poll(timeout_s=1.0)
    except KeyboardInterrupt:
        say(f"stopped following crawl {crawl_id}; it goes on (streamcrawl status shows it)")
        return 130
    finally:
        pages_by_status = tally.by_status()
        tally.close()
    with ServiceDirectory(settings) as directory:
        summary = gather_summary(crawl_id, view, pages_by_status, directory)
    for line in summary_lines(summary):
        say(line)
    if view.status != "done":
        say(f"the crawl is {view.status or 'not started'}, not done")
    return 0 if view.status == "done" else 1


def submit_and_follow(settings: Settings, request: CrawlRequest, timeout_s: float | None) -> int:
    """Publish the request and follow it; the tally starts first so it sees every outcome."""
    with ServiceDirectory(settings) as directory:
        if not directory.live("frontier"):
            say("no frontier is running: start the stack first (streamcrawl up)")
            return 2
    tally = OutcomeTally(settings, request.crawl_id)
    publish_request(settings, request)
    say(f"crawl {request.crawl_id} submitted")
    return follow_crawl(settings, request.crawl_id, timeout_s, tally)


def cmd_crawl(args: argparse.Namespace, settings: Settings) -> int:
    return submit_and_follow(settings, crawl_request(args), args.timeout_s)
