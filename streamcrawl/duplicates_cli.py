"""`streamcrawl duplicates CRAWL_ID [--limit N] [--json]`: a crawl's pages that serve the same body.

Exact duplicates, as Nutch's dedup finds them by signature and site audits report them (Screaming
Frog's "exact duplicates"): URLs whose latest fetch (a 2xx, or a recrawl that found it unchanged)
got the same body, by its sha256. They are a site's canonicalisation faults, which the crawl
fetched, stored and ranked twice: a page reachable with and without a parameter, by two paths,
on http and https, or an error page served with a 200.

Memory grows with the crawl in compact arrays, not in strings: a first read of `outcomes` keeps
24 bytes a fetch (the URL's 64-bit fingerprint, the time, the body hash's first 64 bits), finds
each URL's latest fetch and the hashes two URLs or more share; a second read collects the URLs of
those hashes only. `outcomes` holds 7 days of fetches by default; older ones are not seen. The
`--limit` largest groups are listed.
"""

from __future__ import annotations

import argparse
import json
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import mmh3
import numpy as np

from schemas import outcomes
from schemas.outcomes import FetchOutcome
from streamcrawl.console import counted, note, say
from streamcrawl.kafka import crawl_records_to_end
from streamcrawl.settings import Settings
from streamcrawl.status import require_broker
from streamcrawl.topics import topic_name

DEFAULT_LIMIT = 50
_WITH_BODY = ("done", "unchanged")


@dataclass(frozen=True)
class DuplicateGroup:
    """URLs whose latest fetch got the same body."""

    sha256: str
    urls: list[str]

    def lines(self) -> list[str]:
        return [f"{len(self.urls)} URLs, sha256 {self.sha256[:16]}", *(f"  {u}" for u in self.urls)]


def add_command(commands: Any) -> None:
    parser = commands.add_parser(
        "duplicates", help="a crawl's pages that serve the same body (exact duplicates)"
    )
    parser.add_argument("crawl_id", metavar="CRAWL_ID", help="the crawl (see streamcrawl crawls)")
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help="the N largest groups (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per group")
    parser.set_defaults(run=cmd_duplicates)


def cmd_duplicates(args: argparse.Namespace, settings: Settings) -> int:
    require_broker(settings)
    topic = topic_name(settings, outcomes.TOPIC)

    def read() -> Iterable[FetchOutcome]:
        return crawl_records_to_end(settings, topic, FetchOutcome, args.crawl_id)

    groups = duplicate_groups(read)
    for group in groups[: max(args.limit, 0)]:
        if args.json:
            say(json.dumps({"sha256": group.sha256, "urls": group.urls}))
        else:
            for line in group.lines():
                say(line)
    note(summary(groups, args.crawl_id))
    return 0


def duplicate_groups(read: Callable[[], Iterable[FetchOutcome]]) -> list[DuplicateGroup]:
    """The groups, the largest first (then by first URL); ``read`` gives the crawl's outcomes
    and is called twice."""
    latest = _latest_shared(read())
    if not latest:
        return []
    by_hash: dict[str, list[str]] = {}
    for outcome in read():
        prefix = _prefix(outcome)
        if prefix is None:
            continue
        if latest.get(_fingerprint(outcome.url)) == (outcome.fetched_at, prefix):
            urls = by_hash.setdefault(outcome.content_hash or "", [])
            if outcome.url not in urls:  # two fetches of one URL in the same millisecond
                urls.append(outcome.url)
    groups = [DuplicateGroup(h, sorted(urls)) for h, urls in by_hash.items() if len(urls) > 1]
    return sorted(groups, key=lambda group: (-len(group.urls), group.urls[0]))


def _latest_shared(fetches: Iterable[FetchOutcome]) -> dict[int, tuple[int, int]]:
    """URL fingerprint -> (time, hash prefix) of its latest fetch, for the URLs whose latest body
    another URL's latest body shares."""
    urls, times, hashes = array("Q"), array("q"), array("Q")
    for outcome in fetches:
        prefix = _prefix(outcome)
        if prefix is not None:
            urls.append(_fingerprint(outcome.url))
            times.append(outcome.fetched_at)
            hashes.append(prefix)
    if not urls:
        return {}
    url_of = np.frombuffer(urls, dtype=np.uint64)
    time_of = np.frombuffer(times, dtype=np.int64)
    hash_of = np.frombuffer(hashes, dtype=np.uint64)
    order = np.lexsort((time_of, url_of))
    url_of, time_of, hash_of = url_of[order], time_of[order], hash_of[order]
    last = np.append(url_of[1:] != url_of[:-1], True)  # each URL's latest fetch
    url_of, time_of, hash_of = url_of[last], time_of[last], hash_of[last]
    values, counts = np.unique(hash_of, return_counts=True)
    shared = np.isin(hash_of, values[counts > 1])
    return {
        int(url): (int(time), int(prefix))
        for url, time, prefix in zip(url_of[shared], time_of[shared], hash_of[shared], strict=True)
    }


def _fingerprint(url: str) -> int:
    return int(mmh3.hash64(url, signed=False)[0])


def _prefix(outcome: FetchOutcome) -> int | None:
    """The first 64 bits of the body's sha256, when the fetch got a body and says its hash."""
    if outcome.kind not in _WITH_BODY or not outcome.content_hash:
        return None
    try:
        return int(outcome.content_hash[:16], 16)
    except ValueError:
        return None


def summary(groups: list[DuplicateGroup], crawl_id: str) -> str:
    if not groups:
        return f"no duplicate pages in crawl {crawl_id}"
    urls = sum(len(group.urls) for group in groups)
    return (
        f"{counted(len(groups), 'group')} of duplicate pages in crawl {crawl_id}: {urls} URLs "
        f"serve {counted(len(groups), 'body', 'bodies')}, "
        f"{counted(urls - len(groups), 'copy', 'copies')} among them"
    )
