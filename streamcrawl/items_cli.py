"""`streamcrawl items CRAWL_ID [--all] [--csv] [-o FILE]`: a crawl's extracted items.

What a Scrapy user gets from ``scrapy crawl spider -o items.jsonl``: one JSON object a line, the
crawl's `ExtractedItem`s (`schemas.items`) read from the `items` topic, from its start to the end
it had when the command started. Delivery is at least once and a recrawl extracts a page again, so
by default each URL's newest item is written, once (in the order the URLs were first met); with
``--all`` every item read is written as it comes, duplicates and older versions included, in
memory bounded whatever the crawl's size. ``--csv`` writes a table instead, as Scrapy's CSV
exporter does: a row an item (url, fetched_at, status, then a column a field, several values
joined by commas, then truncated). A line of counts follows on standard error: items written, and
how many had every field, some, or none.
"""

from __future__ import annotations

import argparse
import csv
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
        "--csv", action="store_true", help="a CSV table, a column a field (default: JSON lines)"
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE (default: standard output)"
    )
    parser.set_defaults(run=cmd_items)


def cmd_items(args: argparse.Namespace, settings: Settings) -> int:
    require_broker(settings)
    if args.output is None:
        return _write(args, settings, sys.stdout)
    with Path(args.output).open("w", encoding="utf-8", newline="") as output:
        return _write(args, settings, output)


def _write(args: argparse.Namespace, settings: Settings, output: IO[str]) -> int:
    writer = CsvItems(output) if args.csv else JsonItems(output)
    newest: dict[str, items.ExtractedItem] = {}
    topic = topic_name(settings, items.TOPIC)
    for item in crawl_records_to_end(settings, topic, items.ExtractedItem, args.crawl_id):
        if args.all:
            writer.write(item)
        elif item.url not in newest or item.fetched_at >= newest[item.url].fetched_at:
            newest[item.url] = item
    for item in newest.values():
        writer.write(item)
    note(summary_line(args.crawl_id, writer.counts))
    return 0


class JsonItems:
    """Each item as its JSON, a line each."""

    def __init__(self, output: IO[str]) -> None:
        self._output = output
        self.counts: Counter[str] = Counter()

    def write(self, item: items.ExtractedItem) -> None:
        self._output.write(encode(item).decode("utf-8") + "\n")
        self.counts[items.completeness(item.fields)] += 1


class CsvItems:
    """Each item as a CSV row, the header written with the first (a crawl's items all have the
    same fields)."""

    def __init__(self, output: IO[str]) -> None:
        self._rows = csv.writer(output)
        self._fields: list[str] | None = None
        self.counts: Counter[str] = Counter()

    def write(self, item: items.ExtractedItem) -> None:
        if self._fields is None:
            self._fields = list(item.fields)
            self._rows.writerow(["url", "fetched_at", "status", *self._fields, "truncated"])
        values = [",".join(item.fields.get(name, [])) for name in self._fields]
        self._rows.writerow([item.url, item.fetched_at, item.status, *values, item.truncated])
        self.counts[items.completeness(item.fields)] += 1


def summary_line(crawl_id: str, counts: Counter[str]) -> str:
    total = sum(counts.values())
    if not total:
        return f"no items of crawl {crawl_id} (was it seeded with --extract?)"
    parts = ", ".join(f"{kind}: {counts[kind]}" for kind in ("complete", "partial", "empty"))
    return f"{total} items of crawl {crawl_id}; fields matched: {parts}"
