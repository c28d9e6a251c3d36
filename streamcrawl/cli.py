"""The `streamcrawl` command line: the local broker, topics, status, and bringing the stack up.

Every command reads the same `Settings` as the services (`STREAMCRAWL_*` environment variables), so
`STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS=host:9092 streamcrawl status` checks a remote cluster.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from schemas import members
from schemas.serde import decode
from streamcrawl.broker import LocalBroker
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.kafka import admin_config, table_consumer_config
from streamcrawl.membership import is_live
from streamcrawl.settings import Settings
from streamcrawl.table import TopicTable
from streamcrawl.topics import check_topics, create_topics, topic_name

DEFAULT_BROKER_DIR = Path(".streamcrawl/kafka")


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def broker_answers(settings: Settings, timeout_s: float = 3.0) -> bool:
    try:
        metadata = AdminClient(admin_config(settings)).list_topics(timeout=timeout_s)
    except KafkaException:
        return False
    return bool(metadata.brokers)


# ----- kafka ---------------------------------------------------------------------------------


def cmd_kafka(args: argparse.Namespace, settings: Settings) -> int:
    broker = LocalBroker.from_settings(settings, Path(args.data_dir))
    if args.action == "jars":
        _print(f"broker jars in {broker.ensure_jars()}")
        return 0
    if args.action == "start":
        bootstrap = broker.start()
        _print(f"kafka started on {bootstrap} in {broker.last_start_s or 0:.1f}s")
        _print(f"bootstrap: {bootstrap}")
        return 0
    if args.action == "stop":
        broker.stop()
        _print("kafka stopped")
        return 0
    status = broker.status()
    _print(f"kafka {'running' if status.running else 'not running'}; bootstrap: {status.bootstrap}")
    return 0 if status.running else 1


# ----- topics --------------------------------------------------------------------------------


def cmd_topics(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "create":
        created = create_topics(settings)
        _print(f"created {len(created)} topics" + (": " + ", ".join(created) if created else ""))
        report = check_topics(settings)
    else:
        report = check_topics(settings)
    for line in report.lines():
        _print(line)
    _print("topics match the registry" if report.ok else "topics drift from the registry")
    return 0 if report.ok else 1


# ----- status --------------------------------------------------------------------------------


@dataclass
class StatusReport:
    broker: bool
    topics_ok: bool = False
    topic_problems: list[str] = field(default_factory=list)
    roles: dict[str, dict[str, object]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        every_role_ready = all(role["ready_instances"] for role in self.roles.values())
        return self.broker and self.topics_ok and every_role_ready


def gather_status(settings: Settings, timeout_s: float = 10.0) -> StatusReport:
    if not broker_answers(settings):
        return StatusReport(broker=False)
    report = StatusReport(broker=True)
    topics = check_topics(settings)
    report.topics_ok = topics.ok
    report.topic_problems = topics.lines()
    members_topic = topic_name(settings, members.TOPIC)
    if members_topic in topics.missing:
        return report
    table: TopicTable[members.Member] = TopicTable(
        table_consumer_config(settings),
        members_topic,
        lambda raw: decode(members.Member, raw),
    )
    table.start()
    try:
        if not table.wait_ready(timeout_s):
            raise StreamcrawlError(f"could not read {members_topic} within {timeout_s}s")
        live = [m for m in table.snapshot().values() if is_live(m)]
    finally:
        table.stop()
    for member in sorted(live, key=lambda m: (m.role, m.instance)):
        role = report.roles.setdefault(member.role, {"instances": [], "ready_instances": 0})
        instances = role["instances"]
        if isinstance(instances, list):
            instances.append(
                {
                    "instance": member.instance,
                    "http": member.http_address,
                    "ready": member.ready,
                    "partitions": member.partitions,
                }
            )
        if member.ready:
            role["ready_instances"] = int(str(role["ready_instances"])) + 1
    return report


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    report = gather_status(settings)
    if args.json:
        _print(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
        return 0 if report.ok else 1
    _print(
        f"broker   {'answers' if report.broker else 'does not answer'} at "
        f"{settings.kafka.bootstrap_servers}"
    )
    if report.broker:
        _print(f"topics   {'match the registry' if report.topics_ok else 'drift:'}")
        for line in report.topic_problems:
            _print(f"         {line}")
        if not report.roles:
            _print("services none running")
        for role, info in sorted(report.roles.items()):
            instances = info["instances"]
            count = len(instances) if isinstance(instances, list) else 0
            _print(f"{role:<9}{info['ready_instances']}/{count} ready")
    _print("ok" if report.ok else "not ok")
    return 0 if report.ok else 1


# ----- up ------------------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    """Start the local broker unless the configured one answers, then create the topics."""
    broker: LocalBroker | None = None
    if broker_answers(settings):
        _print(f"using the broker at {settings.kafka.bootstrap_servers}")
    else:
        broker = LocalBroker.from_settings(settings, Path(args.data_dir))
        bootstrap = broker.start()
        _print(f"started the local broker on {bootstrap} in {broker.last_start_s or 0:.1f}s")
    created = create_topics(settings)
    _print(f"topics ready ({len(created)} created)")
    return 0


# ----- entry point ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="streamcrawl", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    kafka = commands.add_parser("kafka", help="the local Apache Kafka broker (no Docker)")
    kafka.add_argument("action", choices=["start", "stop", "status", "jars"])
    kafka.add_argument("--data-dir", default=str(DEFAULT_BROKER_DIR))
    kafka.set_defaults(run=cmd_kafka)

    topics = commands.add_parser("topics", help="create the registry's topics or check drift")
    topics.add_argument("action", choices=["create", "check"])
    topics.set_defaults(run=cmd_topics)

    status = commands.add_parser("status", help="broker, topics and running services")
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=cmd_status)

    up = commands.add_parser("up", help="start the broker (unless configured) and create topics")
    up.add_argument("--data-dir", default=str(DEFAULT_BROKER_DIR))
    up.set_defaults(run=cmd_up)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = Settings()
    run: Callable[[argparse.Namespace, Settings], int] = args.run
    try:
        return run(args, settings)
    except (StreamcrawlError, KafkaException, TimeoutError) as error:
        sys.stderr.write(f"streamcrawl: {error}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
