"""`streamcrawl deadletters [--crawl-id ID] [--stage STAGE] [--limit N] [--json]`.

What the stack could not process, and why: the `deadletter` topic read from its start to the end
it had when the command started (30 days of it, its retention), never followed. Two kinds of
letters land there. A service's poison messages (undecodable or invalid input, with the stage, the
source coordinates and the reason), and the frontier's dead URLs: a 404, a robots.txt denial,
retries exhausted, each with the URL's last FetchOutcome as payload. The second kind is a
crawl's failure log, as Heritrix's crawl.log is for failed URIs.

A letter's crawl and URL come from its payload when that is a JSON object with `crawl_id` and `url`
(every outcome, request and discovery message); `--crawl-id` keeps the letters of one crawl,
`--stage` those of one service. The `--limit` newest matching letters are listed, oldest first,
then a count of all of them by stage and reason (the error up to its first colon). `--json` prints
one JSON object a line instead (the DeadLetter's own fields, the payload in URL-safe base64, plus
`key`, `crawl_id` and `url`), for tools and for replaying a payload.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from schemas import deadletter
from schemas.exceptions import DecodeError
from schemas.serde import decode
from streamcrawl.console import say
from streamcrawl.kafka import read_to_end
from streamcrawl.newest import Newest
from streamcrawl.settings import Settings
from streamcrawl.status import require_broker
from streamcrawl.topics import topic_name

DEFAULT_LIMIT = 50
READ_TIMEOUT_S = 30.0
"""How long the read may go without a record before the command gives up."""


@dataclass(frozen=True)
class Letter:
    """A dead letter with what its payload says about its crawl and URL."""

    letter: deadletter.DeadLetter
    key: str | None
    crawl_id: str | None
    url: str | None

    @property
    def reason(self) -> str:
        """The error's label: what precedes its first colon (`robots_denied`, `undecodable`)."""
        return self.letter.error.split(":", 1)[0].strip() or "unknown"

    def line(self) -> str:
        at = datetime.fromtimestamp(self.letter.at / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
        source = f"{self.letter.topic}[{self.letter.partition}]@{self.letter.offset}"
        subject = self.url or (f"key {self.key!r}" if self.key is not None else source)
        return f"{at}  {self.letter.stage:<9} {subject}  {self.letter.error}"

    def as_json(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.letter.model_dump_json())
        document.update(key=self.key, crawl_id=self.crawl_id, url=self.url)
        return document


def add_command(commands: Any) -> None:
    parser = commands.add_parser(
        "deadletters", help="what the stack could not process: dead URLs and poison messages"
    )
    parser.add_argument("--crawl-id", help="only the letters of this crawl")
    parser.add_argument("--stage", help="only the letters of this service (frontier, parser, ...)")
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help="list the N newest matching letters, 0 for none (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per letter")
    parser.set_defaults(run=cmd_deadletters)


def cmd_deadletters(args: argparse.Namespace, settings: Settings) -> int:
    require_broker(settings)
    newest: Newest[Letter] = Newest(max(args.limit, 0), lambda letter: letter.letter.at)
    counts: Counter[tuple[str, str]] = Counter()
    for letter in read_letters(settings):
        if args.crawl_id is not None and letter.crawl_id != args.crawl_id:
            continue
        if args.stage is not None and letter.letter.stage != args.stage:
            continue
        counts[(letter.letter.stage, letter.reason)] += 1
        if args.json:
            say(json.dumps(letter.as_json()))
        else:
            newest.add(letter)
    if args.json:
        return 0
    shown = newest.oldest_first()
    for letter in shown:
        say(letter.line())
    say(summary_line(counts, len(shown), args.crawl_id))
    return 0


def summary_line(counts: Counter[tuple[str, str]], shown: int, crawl_id: str | None) -> str:
    total = sum(counts.values())
    whose = f" of crawl {crawl_id}" if crawl_id else ""
    if not total:
        return f"no dead letters{whose}"
    by_stage: dict[str, list[str]] = {}
    for (stage, reason), count in sorted(counts.items(), key=lambda item: (item[0][0], -item[1])):
        by_stage.setdefault(stage, []).append(f"{reason}={count}")
    stages = "; ".join(f"{stage}: {', '.join(reasons)}" for stage, reasons in by_stage.items())
    listed = f", the last {shown} listed" if 0 < shown < total else ""
    return f"{total} dead letters{whose}{listed}; {stages}"


def read_letters(settings: Settings) -> Iterator[Letter]:
    """Every letter from the topic's start to the end it had when this started, by partition."""
    topic = topic_name(settings, deadletter.TOPIC)
    for key, value, at in read_to_end(settings, topic, READ_TIMEOUT_S):
        yield _letter(key, value, at)


def _letter(raw_key: bytes | None, value: bytes | None, at: tuple[str, int, int]) -> Letter:
    """The letter; something else written to the topic is shown as a letter of stage `?`,
    from where it lies in the dead-letter topic, so it is seen rather than skipped."""
    key = raw_key.decode("utf-8", "replace") if raw_key is not None else None
    try:
        letter = decode(deadletter.DeadLetter, value)
    except DecodeError as error:
        letter = deadletter.dead_letter("?", *at, f"not a dead letter: {error}", value)
    crawl_id, url = _crawl_and_url(letter.payload)
    return Letter(letter, key, crawl_id, url)


def _crawl_and_url(payload: bytes) -> tuple[str | None, str | None]:
    """The payload's `crawl_id` and `url` when it is a JSON object holding them as strings."""
    if not payload.lstrip().startswith(b"{"):
        return None, None
    try:
        document = json.loads(payload)
    except ValueError:  # a cut payload, or not JSON after all
        return None, None
    if not isinstance(document, dict):
        return None, None
    crawl_id, url = document.get("crawl_id"), document.get("url")
    return (
        crawl_id if isinstance(crawl_id, str) else None,
        url if isinstance(url, str) else None,
    )
