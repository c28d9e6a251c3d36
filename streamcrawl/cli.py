"""The `streamcrawl` command line: the local broker, topics and status here; seed and crawl in
`crawl_cli`, up and demo in `up_cli`, the graph, page and URL queries in `graph_cli`, `page_cli`
and `url_cli`.

Every command reads the same `Settings` as the services (`STREAMCRAWL_*` environment variables), so
`STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS=host:9092 streamcrawl status` checks a remote cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from confluent_kafka import KafkaException

from streamcrawl import (
    broken_cli,
    crawl_cli,
    crawllog_cli,
    deadletter_cli,
    duplicates_cli,
    graph_cli,
    items_cli,
    page_cli,
    up_cli,
    url_cli,
)
from streamcrawl.broker import LocalBroker
from streamcrawl.console import say
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.settings import Settings
from streamcrawl.status import gather_status, instance_lines, require_broker
from streamcrawl.topics import check_topics, create_topics
from streamcrawl.up_cli import DEFAULT_BROKER_DIR

DESCRIPTION = """A web crawler built as Kafka streaming services. Every command reads the same
settings as the services (STREAMCRAWL_* environment variables), so
STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS=host:9092 streamcrawl status checks a remote cluster."""
CLIENT_LOG_LEVEL = "3"
"""librdkafka's log level for the command line's own clients: errors only. Its informational
lines (a broker closing the connection as the demo stops it, events purged at a client's close)
would land on the user's terminal; errors still reach the clients' callbacks. A `log_level` in
`STREAMCRAWL_KAFKA__CONFIG` wins."""


def cli_settings() -> Settings:
    """The services' settings, with `CLIENT_LOG_LEVEL` unless one is configured."""
    settings = Settings()
    if "log_level" in settings.kafka.config:
        return settings
    config = {**settings.kafka.config, "log_level": CLIENT_LOG_LEVEL}
    kafka = settings.kafka.model_copy(update={"config": config})
    return settings.model_copy(update={"kafka": kafka})


# ----- kafka ---------------------------------------------------------------------------------


def cmd_kafka(args: argparse.Namespace, settings: Settings) -> int:
    broker = LocalBroker.from_settings(settings, Path(args.data_dir))
    if args.action == "jars":
        say(f"broker jars in {broker.ensure_jars()}")
        return 0
    if args.action == "start":
        bootstrap = broker.start(detached=True)
        say(f"kafka started on {bootstrap} in {broker.last_start_s or 0:.1f}s")
        say(f"bootstrap: {bootstrap}")
        return 0
    if args.action == "stop":
        broker.stop()
        say("kafka stopped")
        return 0
    status = broker.status()
    say(f"kafka {'running' if status.running else 'not running'}; bootstrap: {status.bootstrap}")
    return 0 if status.running else 1


# ----- topics --------------------------------------------------------------------------------


def cmd_topics(args: argparse.Namespace, settings: Settings) -> int:
    require_broker(settings)
    if args.action == "create":
        created = create_topics(settings)
        say(f"created {len(created)} topics" + (": " + ", ".join(created) if created else ""))
        report = check_topics(settings)
    else:
        report = check_topics(settings)
    for line in report.lines():
        say(line)
    say("topics match the registry" if report.ok else "topics drift from the registry")
    return 0 if report.ok else 1


# ----- status --------------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    report = gather_status(settings)
    if args.json:
        say(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
        return 0 if report.ok else 1
    say(
        f"broker   {'answers' if report.broker else 'does not answer'} at "
        f"{settings.kafka.bootstrap_servers}"
    )
    if report.broker:
        say(f"topics   {'match the registry' if report.topics_ok else 'drift:'}")
        for line in report.topic_problems:
            say(f"         {line}")
        if not report.roles:
            say("services none running")
        for line in instance_lines(report):
            say(line)
    say("ok" if report.ok else "not ok")
    return 0 if report.ok else 1


# ----- entry point ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="streamcrawl", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    kafka = commands.add_parser("kafka", help="the local Apache Kafka broker (no Docker)")
    kafka.add_argument(
        "action",
        choices=["start", "stop", "status", "jars"],
        help="start or stop the broker, say whether it runs, or only fetch its jars (Maven)",
    )
    kafka.add_argument(
        "--data-dir",
        default=str(DEFAULT_BROKER_DIR),
        help="the broker's data and logs (default: %(default)s)",
    )
    kafka.set_defaults(run=cmd_kafka)

    topics = commands.add_parser("topics", help="create the registry's topics or check drift")
    topics.add_argument(
        "action",
        choices=["create", "check"],
        help="create the missing topics, or report those whose settings drifted",
    )
    topics.set_defaults(run=cmd_topics)

    status = commands.add_parser("status", help="broker, topics and running services")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(run=cmd_status)

    crawl_cli.add_commands(commands)  # seed, crawl, pause, resume, cancel
    up_cli.add_commands(commands)  # up, demo
    graph_cli.add_graph_command(commands)
    page_cli.add_commands(commands)  # page, storage
    url_cli.add_command(commands)
    deadletter_cli.add_command(commands)
    items_cli.add_command(commands)
    crawllog_cli.add_command(commands)
    broken_cli.add_command(commands)
    duplicates_cli.add_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = cli_settings()
    run: Callable[[argparse.Namespace, Settings], int] = args.run
    try:
        return run(args, settings)
    except (StreamcrawlError, KafkaException, TimeoutError) as error:
        sys.stderr.write(f"streamcrawl: {error}\n")
        return 2
    except BrokenPipeError:
        # The reader left (`| head`): stop quietly, and keep Python's exit flush from failing too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
