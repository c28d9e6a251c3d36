"""The `streamcrawl` command line: the local broker, topics, status, and bringing the stack up.

Every command reads the same `Settings` as the services (`STREAMCRAWL_*` environment variables), so
`STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS=host:9092 streamcrawl status` checks a remote cluster.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from rich.console import Console

from schemas import members, seeds
from schemas.seeds import CrawlRequest
from schemas.serde import decode, encode
from streamcrawl import graph_cli, page_cli
from streamcrawl.apis import ServiceDirectory
from streamcrawl.broker import LocalBroker
from streamcrawl.demo import demo_site
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.kafka import KafkaProducer, admin_config, table_consumer_config
from streamcrawl.membership import is_live
from streamcrawl.settings import Settings
from streamcrawl.stack import ROLES, Stack, stack_env
from streamcrawl.summary import gather_summary, summary_lines
from streamcrawl.table import TopicTable, wait_until
from streamcrawl.testsite import SiteServer
from streamcrawl.topics import check_topics, create_topics, topic_name
from streamcrawl.watch import CrawlWatcher, OutcomeTally

DEFAULT_BROKER_DIR = Path(".streamcrawl/kafka")
STACK_READY_S = 120.0
MAX_RESTARTS = 5


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


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
                    "api": member.api_address,
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


# ----- seed, crawl ---------------------------------------------------------------------------


def crawl_request(args: argparse.Namespace) -> CrawlRequest:
    return CrawlRequest(
        seeds=args.urls,
        max_depth=args.max_depth,
        max_links=args.max_links,
        same_domain=args.same_domain,
        include_pattern=args.include,
        exclude_pattern=args.exclude,
        politeness_delay_ms=args.delay_ms,
        max_retries=args.max_retries,
        priority=args.priority,
        respect_robots=not args.ignore_robots,
    )


def publish_request(settings: Settings, request: CrawlRequest) -> None:
    producer = KafkaProducer.from_settings(settings)
    producer.produce(
        topic_name(settings, seeds.TOPIC), seeds.key(request.crawl_id), encode(request)
    )
    producer.flush(30)


def cmd_seed(args: argparse.Namespace, settings: Settings) -> int:
    request = crawl_request(args)
    publish_request(settings, request)
    _print(request.crawl_id)
    return 0


def follow_crawl(
    settings: Settings, crawl_id: str, timeout_s: float | None, tally: OutcomeTally
) -> int:
    """Show the crawl's progress until it is done, then its summary; 0 only when it finished."""
    console = Console()
    try:
        with CrawlWatcher(settings) as watcher:
            view = watcher.follow(
                crawl_id, _print, timeout_s=timeout_s, console=console, on_tick=tally.poll
            )
        tally.poll(timeout_s=1.0)
    except KeyboardInterrupt:
        _print(f"stopped following crawl {crawl_id}; it goes on (streamcrawl status shows it)")
        return 130
    finally:
        pages_by_status = tally.by_status()
        tally.close()
    with ServiceDirectory(settings) as directory:
        summary = gather_summary(crawl_id, view, pages_by_status, directory)
    for line in summary_lines(summary):
        _print(line)
    if view.status != "done":
        _print(f"the crawl is {view.status or 'not started'}, not done")
    return 0 if view.status == "done" else 1


def submit_and_follow(settings: Settings, request: CrawlRequest, timeout_s: float | None) -> int:
    """Publish the request and follow it; the tally starts first so it sees every outcome."""
    with ServiceDirectory(settings) as directory:
        if not directory.live("frontier"):
            _print("no frontier is running: start the stack first (streamcrawl up)")
            return 2
    tally = OutcomeTally(settings, request.crawl_id)
    publish_request(settings, request)
    _print(f"crawl {request.crawl_id} submitted")
    return follow_crawl(settings, request.crawl_id, timeout_s, tally)


def cmd_crawl(args: argparse.Namespace, settings: Settings) -> int:
    return submit_and_follow(settings, crawl_request(args), args.timeout_s)


# ----- up, demo ------------------------------------------------------------------------------


def ensure_broker(settings: Settings, data_dir: Path) -> LocalBroker | None:
    """The configured broker if it answers, else a local one started here (returned)."""
    if broker_answers(settings):
        _print(f"using the broker at {settings.kafka.bootstrap_servers}")
        return None
    broker = LocalBroker.from_settings(settings, data_dir)
    bootstrap = broker.start()
    _print(f"started the local broker on {bootstrap} in {broker.last_start_s or 0:.1f}s")
    return broker


def start_stack(
    settings: Settings,
    args: argparse.Namespace,
    allow_private: bool,
    stopped: threading.Event | None = None,
) -> Stack:
    """Topics, then every service's processes; returns once each running role is ready."""
    created = create_topics(settings)
    _print(f"topics ready ({len(created)} created)")
    scale = dict(_parse_scale(item) for item in args.scale)
    stack = Stack(stack_env({}), Path(args.data_dir).parent / "logs")
    stack.start(scale, allow_private_networks=allow_private)
    interrupted = stopped or threading.Event()
    ready = wait_until(
        lambda: interrupted.is_set() or bool(stack.failed()) or stack_ready(settings, stack),
        STACK_READY_S,
        interval_s=0.5,
    )
    for instance in stack.failed():
        _print(
            f"{instance.instance_id} exited with {instance.process.poll()}; see {instance.log_path}"
        )
    for role in stack.not_built():
        _print(f"{role}: not built yet, not running")
    if not ready:
        _print(f"not every service was ready within {STACK_READY_S:.0f}s; logs in {stack.log_dir}")
    for role, info in sorted(gather_status(settings).roles.items()):
        instances = info["instances"]
        for item in instances if isinstance(instances, list) else []:
            api = f"  api http://{item['api']}" if item.get("api") else ""
            _print(f"{role:<9} {item['instance']:<12} metrics http://{item['http']}/metrics{api}")
    return stack


def stack_ready(settings: Settings, stack: Stack) -> bool:
    """Whether every running instance of the stack has published itself ready in `members`."""
    running: dict[str, int] = {}
    for instance in stack.live():
        if instance.running:
            running[instance.role] = running.get(instance.role, 0) + 1
    roles = gather_status(settings, timeout_s=5).roles
    return all(
        int(str(roles.get(role, {}).get("ready_instances", 0))) >= count
        for role, count in running.items()
    )


def _parse_scale(item: str) -> tuple[str, int]:
    role, _, count = item.partition("=")
    if role not in ROLES or not count.isdigit() or int(count) < 1:
        raise StreamcrawlError(f"--scale takes ROLE=N with ROLE one of {', '.join(ROLES)}")
    return role, int(count)


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    """Broker (unless configured), topics, one process per service; Ctrl-C stops them all.

    The services keep their state (and the broker its data) on disk under stable instance ids,
    so `up` after a stop resumes every crawl where it stood.
    """
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    broker = ensure_broker(settings, Path(args.data_dir))
    try:
        stack = start_stack(settings, args, args.allow_private_networks, stopped)
        try:
            if not stopped.is_set():
                _print("running; Ctrl-C stops every service (the broker keeps its data)")
            supervise(stack, stopped)
        finally:
            _print("stopping every service")
            codes = stack.stop()
            _print("stopped: " + ", ".join(f"{k}={v}" for k, v in sorted(codes.items())))
    finally:
        if broker is not None:
            broker.stop()
            _print("stopped the local broker")
    return 0


def supervise(stack: Stack, stopped: threading.Event) -> None:
    """Until `stopped`: start again any instance that exits with an error, at most
    `MAX_RESTARTS` times each, since a service that keeps dying needs a person, not a loop."""
    restarts: dict[str, int] = {}
    while not stopped.wait(1.0):
        for instance in stack.failed():
            count = restarts.get(instance.instance_id, 0)
            if count >= MAX_RESTARTS:
                continue
            restarts[instance.instance_id] = count + 1
            _print(
                f"{instance.instance_id} exited with {instance.process.poll()} (log "
                f"{instance.log_path}); restarting ({count + 1}/{MAX_RESTARTS})"
            )
            stack.restart(instance.instance_id)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    """The README's crawl: the generated demo site crawled end to end, then everything stopped."""
    broker = ensure_broker(settings, Path(args.data_dir))
    site = SiteServer(demo_site()).start()
    try:
        stack = start_stack(settings, args, allow_private=True)
        try:
            hosts = ", ".join(site.site.origin(h) for h in range(site.graph.hosts))
            _print(f"demo site: {site.site.seed_url} (hosts {hosts})")
            args.urls = [site.site.seed_url]
            if args.same_domain == "host":  # the demo's hosts are ports of one address
                args.same_domain = "registered_domain"
            return submit_and_follow(settings, crawl_request(args), args.timeout_s)
        finally:
            stack.stop()
    finally:
        site.stop()
        if broker is not None:
            broker.stop()


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

    seed = commands.add_parser("seed", help="publish a crawl request; prints the crawl id")
    seed.add_argument("urls", nargs="+")
    add_crawl_options(seed)
    seed.set_defaults(run=cmd_seed)

    crawl = commands.add_parser("crawl", help="publish a crawl request and follow it until done")
    crawl.add_argument("urls", nargs="+")
    add_crawl_options(crawl)
    crawl.set_defaults(run=cmd_crawl)

    up = commands.add_parser("up", help="broker (unless configured), topics and every service")
    add_stack_options(up)
    up.add_argument("--allow-private-networks", action="store_true")
    up.set_defaults(run=cmd_up)

    demo = commands.add_parser("demo", help="crawl a local demo site end to end, then stop")
    add_stack_options(demo)
    add_crawl_options(demo, max_depth=3, delay_ms=100)
    demo.set_defaults(run=cmd_demo)

    graph_cli.add_graph_command(commands)
    page_cli.add_commands(commands)  # page, storage
    return parser


def add_stack_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--data-dir", default=str(DEFAULT_BROKER_DIR))
    command.add_argument("--scale", action="append", default=[], metavar="ROLE=N")


def add_crawl_options(
    command: argparse.ArgumentParser, max_depth: int = 2, delay_ms: int = 1000
) -> None:
    command.add_argument("--max-depth", type=int, default=max_depth)
    command.add_argument("--max-links", type=int, default=-1)
    command.add_argument(
        "--same-domain", choices=["host", "registered_domain", "any"], default="host"
    )
    command.add_argument("--include")
    command.add_argument("--exclude")
    command.add_argument("--delay-ms", type=int, default=delay_ms)
    command.add_argument("--max-retries", type=int, default=3)
    command.add_argument(
        "--priority", choices=["bfs", "score", "pagerank", "novelty"], default="bfs"
    )
    command.add_argument("--ignore-robots", action="store_true")
    command.add_argument(
        "--timeout-s",
        type=float,
        default=None,
        help="stop following after this long (the crawl goes on)",
    )


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
