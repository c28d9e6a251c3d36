"""`streamcrawl log CRAWL_ID [--limit N] [--json]`: every fetch of a crawl, as Heritrix's crawl.log.

Each fetch attempt the fetchers made for the crawl, read from the `outcomes` topic (its retention,
7 days by default) from its start to the end it had when the command started: when, the status (or
how it failed), the URL's depth, how long it took, the body's size and media type, the URL, and
where it redirected or why it failed. The ``--limit`` newest are listed oldest first (memory stays
bounded however long the crawl); then a count of every attempt by its last word (the HTTP status,
or the kind of failure). ``--json`` writes every attempt as its FetchOutcome, one JSON object a
line, as read. Heritrix's reports instead of the log, each in memory bounded by what it lists:

- ``--hosts``: a line a host, the most fetched first, with its fetches by status class (none: no
  HTTP status) and its mean fetch time;
- ``--mimetypes``: a line a media type, the most fetched first, with its fetches and body bytes
  (``-``: no media type, a failure or a redirect without a body);
- ``--seeds``: a line a seed of the crawl, with its latest outcome and, for a seed that redirects,
  where its chain ends and how (the chain read through up to ten redirects, one more read of
  `outcomes` a hop), or that it was never fetched.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from schemas import outcomes
from schemas.canonical import canonical_url
from schemas.serde import encode
from streamcrawl.console import say
from streamcrawl.kafka import crawl_records_to_end
from streamcrawl.newest import Newest
from streamcrawl.settings import Settings
from streamcrawl.status import require_broker
from streamcrawl.topics import topic_name
from streamcrawl.watch import crawl_state

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
    report = parser.add_mutually_exclusive_group()
    report.add_argument(
        "--hosts", action="store_true", help="a line a host instead: fetches by status class"
    )
    report.add_argument(
        "--mimetypes", action="store_true", help="a line a media type instead: fetches and bytes"
    )
    report.add_argument(
        "--seeds",
        action="store_true",
        help="a line a seed instead: its outcome, and where its redirects end",
    )
    parser.set_defaults(run=cmd_log)


def cmd_log(args: argparse.Namespace, settings: Settings) -> int:
    require_broker(settings)
    if args.hosts:
        return _hosts_report(settings, args.crawl_id)
    if args.mimetypes:
        return _mimetypes_report(settings, args.crawl_id)
    if args.seeds:
        return _seeds_report(settings, args.crawl_id)
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


def _mimetypes_report(settings: Settings, crawl_id: str) -> int:
    by_type: dict[str, list[int]] = {}
    topic = topic_name(settings, outcomes.TOPIC)
    for outcome in crawl_records_to_end(settings, topic, outcomes.FetchOutcome, crawl_id):
        tally = by_type.setdefault(outcome.content_type or "-", [0, 0])
        tally[0] += 1
        tally[1] += outcome.body_size or 0
    for text in mimetypes_report(by_type):
        say(text)
    return 0


def mimetypes_report(by_type: dict[str, list[int]]) -> list[str]:
    """A header, then a line a media type (fetches, bytes), the most fetched first."""
    if not by_type:
        return ["no fetches in outcomes"]
    width = max(len("mimetype"), *(len(media) for media in by_type))
    lines = [f"{'mimetype':<{width}} {'fetches':>8} {'bytes':>14}"]
    for media, (fetches, size) in sorted(by_type.items(), key=lambda item: (-item[1][0], item[0])):
        lines.append(f"{media:<{width}} {fetches:>8} {size:>14}")
    return lines


MAX_SEED_HOPS = 10


def _seeds_report(settings: Settings, crawl_id: str) -> int:
    state = crawl_state(settings, crawl_id)
    if state is None:
        say(f"no crawl {crawl_id} in crawls")
        return 1
    topic = topic_name(settings, outcomes.TOPIC)

    def latest(urls: set[str]) -> dict[str, outcomes.FetchOutcome]:
        found: dict[str, outcomes.FetchOutcome] = {}
        for outcome in crawl_records_to_end(settings, topic, outcomes.FetchOutcome, crawl_id):
            known = found.get(outcome.url)
            if outcome.url in urls and (known is None or known.fetched_at <= outcome.fetched_at):
                found[outcome.url] = outcome
        return found

    for text in seeds_report(state.request.seeds, latest):
        say(text)
    return 0


def seeds_report(
    seeds: list[str], latest: Callable[[set[str]], dict[str, outcomes.FetchOutcome]]
) -> list[str]:
    """A line a seed: its outcome's word, the seed, and where its redirect chain ends; then a
    count. ``latest`` gives the newest outcome of each URL asked for that has one."""
    canonical = {seed: canonical_url(seed) or seed for seed in seeds}
    known = latest(set(canonical.values()))
    wanted = _redirect_targets(known) - set(known)
    for _ in range(MAX_SEED_HOPS):
        if not wanted:
            break
        found = latest(wanted)
        known.update(found)
        wanted = _redirect_targets(found) - set(known)
    lines: list[str] = []
    counts: Counter[str] = Counter()
    for seed in seeds:
        outcome = known.get(canonical[seed])
        if outcome is None:
            counts["not fetched"] += 1
            lines.append(f"{'-':>9}  {seed}  not fetched (yet, or before outcomes' retention)")
            continue
        counts["fetched" if outcome.kind in ("done", "unchanged", "redirect") else "failed"] += 1
        text = f"{outcomes.outcome_label(outcome):>9}  {seed}{_chain_end(outcome, known)}"
        if outcome.kind in ("retryable", "permanent", "robots_denied") and outcome.error:
            text += f"  {outcome.kind}: {outcome.error}"
        lines.append(text)
    summary = ", ".join(f"{count} {name}" for name, count in counts.most_common())
    lines.append(f"{len(seeds)} seeds: {summary}")
    return lines


def _redirect_targets(found: dict[str, outcomes.FetchOutcome]) -> set[str]:
    return {outcome.redirect_to for outcome in found.values() if outcome.redirect_to}


def _chain_end(outcome: outcomes.FetchOutcome, known: dict[str, outcomes.FetchOutcome]) -> str:
    """`` -> target (how it ended)`` for a seed that redirects, "" for one that does not."""
    end = outcome
    for _ in range(MAX_SEED_HOPS):
        if not end.redirect_to:
            break
        following = known.get(end.redirect_to)
        if following is None:
            return f"  -> {end.redirect_to} (not fetched)"
        end = following
    else:
        if end.redirect_to:
            return f"  -> {end.redirect_to} (more than {MAX_SEED_HOPS} redirects)"
    if end is outcome:
        return ""
    return f"  -> {end.url} ({outcomes.outcome_label(end)})"


def _time(outcome: outcomes.FetchOutcome) -> int:
    return outcome.fetched_at


def line(outcome: outcomes.FetchOutcome) -> str:
    """``when  status  depth  duration  size  mimetype  URL  [-> target | error]``: Heritrix's
    columns but the discovery path and the thread (``-``: no body read, no media type)."""
    at = datetime.fromtimestamp(outcome.fetched_at / 1000, UTC)
    when = at.strftime("%Y-%m-%d %H:%M:%S.") + f"{outcome.fetched_at % 1000:03d}"
    size = "-" if outcome.body_size is None else str(outcome.body_size)
    text = (
        f"{when}  {outcomes.outcome_label(outcome):>9}  d{outcome.depth:<3} "
        f"{outcome.elapsed_ms:>6}ms {size:>9}  {outcome.content_type or '-':<10} {outcome.url}"
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
