"""Prometheus targets for a stack without service discovery, from the `members` topic.

    python3 deploy/prometheus/file_sd.py targets.json          # keeps the file current
    python3 deploy/prometheus/file_sd.py --once targets.json   # writes it once and exits

Every instance publishes its side server's address in `members` (`streamcrawl up` puts them on
free ports), so a Prometheus with `file_sd_configs: [{files: [targets.json]}]` scrapes whatever
runs. One target group per live instance of a stage, job `streamcrawl-<role>` (the name the
alerts expect), label `instance` = the instance id. Not-ready instances stay in: the
StreamcrawlInstanceNotReady alert needs them. The file is replaced atomically, only on change.
Reads the same `STREAMCRAWL_*` settings as the services.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from schemas import members
from schemas.serde import decode
from streamcrawl.kafka import table_consumer_config
from streamcrawl.membership import is_live
from streamcrawl.settings import Settings
from streamcrawl.stack import ROLES
from streamcrawl.table import TopicTable
from streamcrawl.topics import topic_name

REFRESH_S = 2.0
TABLE_READY_S = 30.0


def target_groups(live: Iterable[members.Member]) -> list[dict[str, Any]]:
    """file_sd groups of the stage roles' instances; other roles (the ranker) serve no /metrics."""
    return [
        {
            "targets": [member.http_address],
            "labels": {"job": f"streamcrawl-{member.role}", "instance": member.instance},
        }
        for member in sorted(live, key=lambda m: (m.role, m.instance))
        if member.role in ROLES
    ]


def write_if_changed(path: Path, groups: list[dict[str, Any]]) -> bool:
    text = json.dumps(groups, indent=2) + "\n"
    if path.exists() and path.read_text() == text:
        return False
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(text)
    os.replace(partial, path)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--once", action="store_true", help="write the file once and exit")
    args = parser.parse_args(argv)
    settings = Settings()
    table: TopicTable[members.Member] = TopicTable(
        table_consumer_config(settings),
        topic_name(settings, members.TOPIC),
        lambda raw: decode(members.Member, raw),
    )
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    table.start()
    try:
        if not table.wait_ready(TABLE_READY_S):
            sys.stderr.write(f"file_sd: could not read {topic_name(settings, members.TOPIC)}\n")
            return 2
        while True:
            live = [m for m in table.snapshot().values() if is_live(m)]
            if write_if_changed(args.output, target_groups(live)):
                sys.stdout.write(f"file_sd: {len(live)} members -> {args.output}\n")
                sys.stdout.flush()
            if args.once or stopped.wait(REFRESH_S):
                return 0
    finally:
        table.stop()


if __name__ == "__main__":
    sys.exit(main())
