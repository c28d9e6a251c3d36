"""Whether the stack answers: the broker, the topics against the registry, and who is in `members`.

`streamcrawl status`, `up` (is every service ready yet?) and `demo` read it the same way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from schemas import members
from schemas.serde import decode
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.kafka import admin_config, table_consumer_config
from streamcrawl.membership import is_live
from streamcrawl.settings import Settings
from streamcrawl.stack import ROLES
from streamcrawl.table import TopicTable
from streamcrawl.topics import check_topics, topic_name

_PROBE_LOG = logging.getLogger("streamcrawl.cli.probe")
_PROBE_LOG.addHandler(logging.NullHandler())
_PROBE_LOG.propagate = False


def broker_answers(settings: Settings, timeout_s: float = 3.0) -> bool:
    """Whether the configured broker answers; a refused connection is an answer, not an error
    to print, so the probe's client logs nowhere."""
    try:
        admin = AdminClient(admin_config(settings), logger=_PROBE_LOG)
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException:
        return False
    return bool(metadata.brokers)


def require_broker(settings: Settings) -> None:
    """Raise a `StreamcrawlError` at once when no broker answers: what a command that talks to
    the stack checks first, instead of a client retrying the connection (and librdkafka logging
    each refusal) until some wait of the command runs out."""
    if not broker_answers(settings):
        raise StreamcrawlError(
            f"no Kafka broker answers at {settings.kafka.bootstrap_servers}: start the stack "
            "(streamcrawl up) or set STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS"
        )


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
                    "api": member.api_address,
                    "ready": member.ready,
                    "partitions": member.partitions,
                }
            )
        if member.ready:
            role["ready_instances"] = int(str(role["ready_instances"])) + 1
    return report


def instance_lines(report: StatusReport) -> list[str]:
    """One aligned line per live instance: role, instance, ready or starting, and its addresses
    (`status` and `up` print them). A role that is no stage (the link graph's ranker, which an
    instance of `linkgraph` holds while it leads) has only its API: its metrics are its stage's."""
    rows = [
        (role, item)
        for role, info in sorted(report.roles.items())
        for item in (info["instances"] if isinstance(info["instances"], list) else [])
    ]
    role_width = max((len(role) for role, _ in rows), default=0)
    instance_width = max((len(str(item["instance"])) for _, item in rows), default=0)
    lines = []
    for role, item in rows:
        state = "ready" if item["ready"] else "starting"
        addresses = [f"metrics http://{item['http']}/metrics"] if role in ROLES else []
        if item.get("api"):
            addresses.append(f"api http://{item['api']}")
        lines.append(
            f"{role:<{role_width}}  {item['instance']:<{instance_width}}  {state:<8}  "
            + "  ".join(addresses)
        )
    return lines
