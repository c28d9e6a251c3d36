"""`streamcrawl items CRAWL_ID [--all] [-o FILE]`: a crawl's extracted items as JSON lines.

What a Scrapy user gets from ``scrapy crawl spider -o items.jsonl``: one JSON object a line, the
crawl's `ExtractedItem`s (`schemas.items`) read from the `items` topic, from its start to the end
it had when the command started. Delivery is at least once and a recrawl extracts a page again, so
by default each URL's newest item is written, once (in the order the URLs were first met); with
``--all`` every item read is written as it comes, duplicates and older versions included, in
memory bounded whatever the crawl's size. A line of counts follows on standard error: items
written, and how many had every field, some, or none.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import IO, Any

from schemas import items
from schemas.serde import encode
from streamcrawl.console import note
from streamcrawl.kafka import crawl_records_to_end
from streamcrawl.settings import Settings
from streamcrawl.status import require_broker
from streamcrawl.topics import topic_name


def add_command(commands: Any) -> None:
    parser = commands.add_parser(
        "items", help="a crawl's extracted items (--extract) as JSON lines"
    )
    parser.add_argument("crawl_id", metavar="CRAWL_ID", help="the crawl whose items to write")
    parser.add_argument(
        "--all",
        action="store_true",
        help="every item read, each recrawl's and duplicate's too (default: each URL's newest)",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write the lines to FILE (default: standard output)"
    )
    parser.set_defaults(run=cmd_items)


def cmd_items(args: argparse.Namespace, settings: Settings) -> int:
    require_broker(settings)
    if args.output is None:
        return _write(args, settings, sys.stdout)
    with Path(args.output).open("w", encoding="utf-8") as output:
        return _write(args, settings, output)


def _write(args: argparse.Namespace, settings: Settings, output: IO[str]) -> int:
    newest: dict[str, items.ExtractedItem] = {}
    counts: Counter[str] = Counter()
    topic = topic_name(settings, items.TOPIC)
    for item in crawl_records_to_end(settings, topic, items.ExtractedItem, args.crawl_id):
        if args.all:
            _line(output, item, counts)
        elif item.url not in newest or item.fetched_at >= newest[item.url].fetched_at:
            newest[item.url] = item
    for item in newest.values():
        _line(output, item, counts)
    note(summary_line(args.crawl_id, counts))
    return 0


def _line(output: IO[str], item: items.ExtractedItem, counts: Counter[str]) -> None:
    output.write(encode(item).decode("utf-8") + "\n")
    counts[items.completeness(item.fields)] += 1


def summary_line(crawl_id: str, counts: Counter[str]) -> str:
    total = sum(counts.values())
    if not total:
        return f"no items of crawl {crawl_id} (was it seeded with --extract?)"
    parts = ", ".join(f"{kind}: {counts[kind]}" for kind in ("complete", "partial", "empty"))
    return f"{total} items of crawl {crawl_id}; fields matched: {parts}"
