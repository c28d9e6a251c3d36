"""`streamcrawl log CRAWL_ID [--limit N] [--json]`: every fetch of a crawl, as Heritrix's crawl.log.

Each fetch attempt the fetchers made for the crawl, read from the `outcomes` topic (its retention,
7 days by default) from its start to the end it had when the command started: when, the status (or
how it failed), the URL's depth, how long it took, the URL, and where it redirected or why it
failed. The ``--limit`` newest are listed oldest first (memory stays bounded however long the
crawl); then a count of every attempt by its last word (the HTTP status, or the kind of failure).
``--json`` writes every attempt as its FetchOutcome, one JSON object a line, as read.
``--hosts`` writes Heritrix's hosts report instead: a line a host, the most fetched first, with its
fetches by status class (none: no HTTP status) and its mean fetch time.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from schemas import outcomes
from schemas.serde import encode
from streamcrawl.console import say
from streamcrawl.kafka import crawl_records_to_end
from streamcrawl.newest import Newest
from streamcrawl.settings import Settings
from streamcrawl.status import require_broker
from streamcrawl.topics import topic_name

DEFAULT_LIMIT = 100


def add_command(commands: Any) -> None:
    parser = commands.add_parser("log", help="every fetch of a crawl, as Heritrix's crawl.log")
    parser.add_argument("crawl_id", metavar="CRAWL_ID", help="the crawl whose fetches to list")
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help="list the N newest fetches, 0 for none, -1 for all (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="every fetch as JSON, one a line")
    parser.add_argument(
        "--hosts", action="store_true", help="a line a host instead: fetches by status class"
    )
    parser.set_defaults(run=cmd_log)


def cmd_log(args: argparse.Namespace, settings: Settings) -> int:
    require_broker(settings)
    if args.hosts:
        return _hosts_report(settings, args.crawl_id)
    limit = args.limit if args.limit >= 0 else None
    newest: Newest[outcomes.FetchOutcome] | None = None
    if limit is not None:
        newest = Newest(limit, lambda outcome: outcome.fetched_at)
    every: list[outcomes.FetchOutcome] = []
    counts: Counter[str] = Counter()
    topic = topic_name(settings, outcomes.TOPIC)
    for outcome in crawl_records_to_end(settings, topic, outcomes.FetchOutcome, args.crawl_id):
        counts[outcomes.outcome_label(outcome)] += 1
        if args.json:
            say(encode(outcome).decode("utf-8"))
        elif newest is not None:
            newest.add(outcome)
        else:
            every.append(outcome)
    if args.json:
        return 0
    shown = newest.oldest_first() if newest is not None else sorted(every, key=_time)
    for outcome in shown:
        say(line(outcome))
    say(summary_line(args.crawl_id, counts, len(shown)))
    return 0


HOST_COLUMNS = ("2xx", "3xx", "4xx", "5xx", "none")
"""Fetches by status class; none: no HTTP status (a failure, a robots.txt denial)."""


@dataclass
class HostFetches:
    """One host's fetches: a count per column of `HOST_COLUMNS`, and their time in all."""

    counts: Counter[str] = field(default_factory=Counter)
    elapsed_ms: int = 0

    def add(self, outcome: outcomes.FetchOutcome) -> None:
        status = outcome.status
        if status is not None and 200 <= status < 600:
            self.counts[f"{status // 100}xx"] += 1
        else:
            self.counts["none"] += 1
        self.elapsed_ms += outcome.elapsed_ms

    @property
    def fetches(self) -> int:
        return sum(self.counts.values())


def _hosts_report(settings: Settings, crawl_id: str) -> int:
    by_host: dict[str, HostFetches] = {}
    topic = topic_name(settings, outcomes.TOPIC)
    for outcome in crawl_records_to_end(settings, topic, outcomes.FetchOutcome, crawl_id):
        by_host.setdefault(outcome.host, HostFetches()).add(outcome)
    for text in hosts_report(by_host):
        say(text)
    return 0


def hosts_report(by_host: dict[str, HostFetches]) -> list[str]:
    """The report's lines: a header, then a line a host, the most fetched first."""
    if not by_host:
        return ["no fetches in outcomes"]
    width = max(len(host) for host in by_host)
    header = f"{'host':<{width}} {'fetches':>8} " + " ".join(f"{c:>7}" for c in HOST_COLUMNS)
    lines = [header + f" {'mean ms':>8}"]
    for host, fetches in sorted(by_host.items(), key=lambda item: (-item[1].fetches, item[0])):
        counts = " ".join(f"{fetches.counts[column]:>7}" for column in HOST_COLUMNS)
        mean = fetches.elapsed_ms / max(fetches.fetches, 1)
        lines.append(f"{host:<{width}} {fetches.fetches:>8} {counts} {mean:>8.0f}")
    return lines


def _time(outcome: outcomes.FetchOutcome) -> int:
    return outcome.fetched_at


def line(outcome: outcomes.FetchOutcome) -> str:
    """``when  status  depth  duration  URL  [-> target | error]``."""
    at = datetime.fromtimestamp(outcome.fetched_at / 1000, UTC)
    when = at.strftime("%Y-%m-%d %H:%M:%S.") + f"{outcome.fetched_at % 1000:03d}"
    text = (
        f"{when}  {outcomes.outcome_label(outcome):>9}  d{outcome.depth:<3} "
        f"{outcome.elapsed_ms:>6}ms  {outcome.url}"
    )
    if outcome.redirect_to:
        return f"{text}  -> {outcome.redirect_to}"
    if outcome.kind in ("retryable", "permanent", "robots_denied") and outcome.error:
        return f"{text}  {outcome.kind}: {outcome.error}"
    return text


def summary_line(crawl_id: str, counts: Counter[str], shown: int) -> str:
    total = sum(counts.values())
    if not total:
        return f"no fetches of crawl {crawl_id} in outcomes"
    listed = f", the last {shown} listed" if 0 < shown < total else ""
    by_label = ", ".join(f"{label}={count}" for label, count in counts.most_common())
    return f"{total} fetches of crawl {crawl_id}{listed}: {by_label}"
