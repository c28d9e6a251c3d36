"""`streamcrawl url CRAWL_ID URL [--json]`: one URL of a crawl as the frontier knows it.

Where is this URL, and why was it fetched or not? The answer comes from the frontier instance that
holds the URL's state partition (`frontier.lookup`). The command asks any live frontier's crawl
API. One that does not hold the partition answers 421 with its number, and the command then asks
the frontier that `members` lists for it. Exit 0 with the URL's status (admitted or not), 1 for
no such crawl, 2 when no frontier can answer.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from schemas import members, urls
from streamcrawl.apis import ApiError, ServiceDirectory, get_json
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.settings import Settings
from streamcrawl.status import require_broker
from streamcrawl.topics import topic_name

NOT_HELD_HERE = 421
REFUSED_BY = {
    "domain": "its host is outside the crawl's domains (--same-domain, --domain)",
    "include": "it does not match the crawl's --include pattern",
    "exclude": "it matches the crawl's --exclude pattern",
    "scope_score": "its domain scores below the crawl's --scope-threshold",
}
"""How the scope rules that refuse a URL wherever it is found are named (traps: by their own)."""


class CrawlNotFoundError(StreamcrawlError):
    """The frontier knows no such crawl."""


def add_command(commands: Any) -> None:
    url = commands.add_parser(
        "url", help="one URL of a crawl as the frontier knows it: state, depth, outcome, due"
    )
    url.add_argument("crawl_id", metavar="CRAWL_ID", help="the crawl")
    url.add_argument("url", metavar="URL", help="the URL, as found or in any equivalent form")
    url.add_argument("--json", action="store_true", help="print the frontier's answer as JSON")
    url.set_defaults(run=cmd_url)


def cmd_url(args: argparse.Namespace, settings: Settings) -> int:
    require_broker(settings)
    with ServiceDirectory(settings) as directory:
        frontiers = [m for m in directory.live("frontier") if m.api_address and m.ready]
        if not frontiers:
            raise StreamcrawlError("no live frontier publishes its crawl API in members")
        try:
            status = ask_owner(frontiers, topic_name(settings, urls.TOPIC), args.crawl_id, args.url)
        except CrawlNotFoundError as error:
            sys.stderr.write(f"streamcrawl: {error}\n")
            return 1
    if args.json:
        sys.stdout.write(json.dumps(status, indent=2) + "\n")
    else:
        sys.stdout.write("\n".join(status_lines(status, time.time() * 1000)) + "\n")
    return 0


def ask_owner(
    frontiers: list[members.Member], urls_topic: str, crawl_id: str, url: str
) -> dict[str, Any]:
    """The URL's status from the frontier holding its partition, asking any one first (the next
    when one does not answer at all: it may have died a moment ago and still look live)."""
    asked: set[str] = set()
    partition = None
    for frontier in frontiers:
        asked.add(frontier.instance)
        try:
            return _ask(frontier, crawl_id, url)
        except ApiError as error:
            if error.status == NOT_HELD_HERE and isinstance(error.document, dict):
                partition = int(error.document["partition"])
                break
            if error.status is not None or frontier is frontiers[-1]:
                raise
    assert partition is not None  # every other way out of the loop returned or raised
    wanted = f"{urls_topic}:{partition}"
    owners = [m for m in frontiers if wanted in m.partitions and m.instance not in asked]
    if not owners:
        raise StreamcrawlError(
            f"no live frontier holds partition {partition} of {urls_topic} now (it may be "
            "moving between instances): ask again in a moment"
        )
    return _ask(owners[0], crawl_id, url)


def _ask(frontier: members.Member, crawl_id: str, url: str) -> dict[str, Any]:
    try:
        answer: dict[str, Any] = get_json(
            str(frontier.api_address), f"/v1/crawl/{crawl_id}/url", url=url
        )
    except ApiError as error:
        if error.status == 404:
            raise CrawlNotFoundError(f"no crawl {crawl_id!r}") from error
        if error.status == 400 and isinstance(error.document, dict):
            messages = [e.get("message", "") for e in error.document.get("errors", [])]
            raise StreamcrawlError("; ".join(messages) or str(error)) from error
        raise
    return answer


def status_lines(status: dict[str, Any], now_ms: float) -> list[str]:
    """The status as a user reads it: where the URL is, what happened to it, what comes next."""
    lines = [
        status["url"],
        f"crawl: {status['crawl_id']}  host: {status['host']}  partition: {status['partition']}",
    ]
    if not status["admitted"] and status.get("purged"):
        lines.append(
            "not known: the crawl has finished and this frontier keeps none of its state on this "
            "host's partition (purged after STREAMCRAWL_FRONTIER__FINISHED_CRAWL_RETENTION_MS, "
            "7 days by default, or it never had URLs there)"
        )
        return lines
    if not status["admitted"]:
        refused = status.get("scope")
        if refused:
            reason = REFUSED_BY.get(refused, f"it looks like a crawler trap ({refused})")
            lines.append(f"not admitted: the crawl's scope refuses it: {reason}")
        else:
            lines.append(
                "not admitted: no page of the crawl has linked it so far within its max depth "
                "and budgets (its domain, patterns and shape are in scope)"
            )
        return lines
    lines.append("state: " + _state(status, now_ms))
    outcome = status.get("last_outcome") or "none yet"
    lines.append(
        f"depth: {status['depth']}  attempts: {status['attempts']}  last outcome: {outcome}"
    )
    if status.get("recrawl_interval_ms") is not None:
        lines.append(f"recrawl interval: {_duration(status['recrawl_interval_ms'])}")
    validators = [
        f"{label}: {status[name]}"
        for name, label in (("etag", "etag"), ("last_modified", "last-modified"))
        if status.get(name)
    ]
    if status.get("content_hash"):
        validators.append(f"sha256: {status['content_hash'][:16]}")
    if validators:
        lines.append("  ".join(validators))
    return lines


def _state(status: dict[str, Any], now_ms: float) -> str:
    state = str(status["state"])
    if state == "waiting" and status.get("due_ms") is not None:
        return f"waiting for a {status['waiting_for']}, due {_when(status['due_ms'], now_ms)}"
    if state == "leased" and status.get("lease_deadline_ms") is not None:
        deadline = _when(status["lease_deadline_ms"], now_ms)
        return f"leased to a fetcher (lease {status['lease_id']}, deadline {deadline})"
    return {
        "queued": "queued on its host, waiting for its turn",
        "done": "done",
        "dead": "dead (streamcrawl deadletters --crawl-id ... says why)",
    }.get(state, state)


def _when(epoch_ms: int, now_ms: float) -> str:
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch_ms / 1000))
    left = epoch_ms - now_ms
    relative = f"in {_duration(left)}" if left >= 0 else f"{_duration(-left)} ago"
    return f"{at} UTC ({relative})"


def _duration(ms: float) -> str:
    seconds = round(ms / 1000)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds}s" if seconds else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h" if hours else f"{days}d"
