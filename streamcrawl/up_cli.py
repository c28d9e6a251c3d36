"""`streamcrawl up` (the broker unless one is configured, topics, every service, supervised until
Ctrl-C) and `streamcrawl demo` (the same around a generated local site, crawled end to end)."""

from __future__ import annotations

import argparse
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schemas.base import now_millis
from streamcrawl.apis import ServiceDirectory
from streamcrawl.broker import LocalBroker
from streamcrawl.console import say
from streamcrawl.crawl_cli import (
    add_crawl_options,
    add_follow_option,
    crawl_request,
    submit_and_follow,
)
from streamcrawl.demo import demo_site
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.membership import stale_at_ms
from streamcrawl.settings import Settings
from streamcrawl.stack import ROLES, Stack, stack_env
from streamcrawl.status import broker_answers, gather_status, instance_lines
from streamcrawl.table import wait_until
from streamcrawl.testsite import SiteServer
from streamcrawl.topics import create_topics

DEFAULT_BROKER_DIR = Path(".streamcrawl/kafka")
STACK_READY_S = 120.0
MAX_RESTARTS = 5
RESTART_WINDOW_S = 600.0


def add_commands(commands: Any) -> None:
    """`up` and `demo` on the CLI's subcommands."""
    up = commands.add_parser("up", help="broker (unless configured), topics and every service")
    add_stack_options(up)
    up.add_argument(
        "--allow-private-networks",
        action="store_true",
        help="let the fetchers reach loopback and private (RFC 1918) addresses",
    )
    up.set_defaults(run=cmd_up)

    demo = commands.add_parser("demo", help="crawl a local demo site end to end, then stop")
    add_stack_options(demo)
    add_crawl_options(demo, seeds_given=False)
    add_follow_option(demo)
    demo.set_defaults(run=cmd_demo, max_depth=3, delay_ms=100)


def add_stack_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--data-dir",
        default=str(DEFAULT_BROKER_DIR),
        help="the local broker's data, when one is started (default: %(default)s)",
    )
    command.add_argument(
        "--scale",
        action="append",
        default=[],
        metavar="ROLE=N",
        help=f"run N instances of ROLE, one of {', '.join(ROLES)} (repeatable; default: one each)",
    )


def ensure_broker(settings: Settings, data_dir: Path) -> LocalBroker | None:
    """The configured broker if it answers, else a local one started here (returned)."""
    if broker_answers(settings):
        say(f"using the broker at {settings.kafka.bootstrap_servers}")
        return None
    broker = LocalBroker.from_settings(settings, data_dir)
    bootstrap = broker.start()
    say(f"started the local broker on {bootstrap} in {broker.last_start_s or 0:.1f}s")
    return broker


def start_stack(
    settings: Settings,
    args: argparse.Namespace,
    allow_private: bool,
    stopped: threading.Event | None = None,
) -> Stack:
    """Topics, then every service's processes; returns once each running role is ready."""
    created = create_topics(settings)
    say(f"topics ready ({len(created)} created)")
    scale = dict(_parse_scale(item) for item in args.scale)
    refuse_a_running_stack(settings)
    stack = Stack(stack_env({}), Path(args.data_dir).parent / "logs")
    stack.start(scale, allow_private_networks=allow_private)
    interrupted = stopped or threading.Event()
    ready = wait_until(
        lambda: interrupted.is_set() or bool(stack.failed()) or stack_ready(settings, stack),
        STACK_READY_S,
        interval_s=0.5,
    )
    for instance in stack.failed():
        say(
            f"{instance.instance_id} exited with {instance.process.poll()}; see {instance.log_path}"
        )
    for role in stack.not_built():
        say(f"{role}: not built yet, not running")
    if not ready:
        say(f"not every service was ready within {STACK_READY_S:.0f}s; logs in {stack.log_dir}")
    for line in instance_lines(gather_status(settings)):
        say(line)
    return stack


def refuse_a_running_stack(settings: Settings) -> None:
    """`StreamcrawlError` when services already run on this broker under this topic prefix. A
    second stack would start its instances under the same ids (`fetcher-0`, ...): each would fence
    its namesake out of the consumer group (static membership), and the two stacks' supervisors
    would restart them in turn until both gave up. Members of a stack killed a moment ago (no
    tombstones) are waited for until they go stale; one that beats meanwhile is running."""
    with ServiceDirectory(settings) as directory:
        live = directory.live()
        if not live:
            return
        names = ", ".join(sorted({member.instance for member in live}))
        beats = {(member.role, member.instance): member.updated_at for member in live}
        stale_in_s = (max(stale_at_ms(member) for member in live) - now_millis()) / 1000 + 1.0
        say(
            f"services are live on this broker ({names}); waiting for a heartbeat or for them to go"
        )

        def settled() -> bool:
            now_live = directory.live()
            return not now_live or any(
                member.updated_at > beats.get((member.role, member.instance), -1)
                for member in now_live
            )

        wait_until(settled, stale_in_s, interval_s=0.5)
        if not directory.live():
            return
    raise StreamcrawlError(
        f"another stack runs on {settings.kafka.bootstrap_servers} ({names}): crawl with it "
        "(streamcrawl crawl URL), or stop it first (Ctrl-C where its `streamcrawl up` runs); a "
        "second stack would fence its services out of their groups"
    )


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
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: its terminal closed
        signal.signal(signum, lambda *_: stopped.set())
    broker = ensure_broker(settings, Path(args.data_dir))
    try:
        stack = start_stack(settings, args, args.allow_private_networks, stopped)
        try:
            if not stopped.is_set():
                say("running; Ctrl-C stops every service (the broker keeps its data)")
            supervise(stack, stopped, broker)
        finally:
            say("stopping every service")
            codes = stack.stop()
            say("stopped: " + ", ".join(f"{k}={v}" for k, v in sorted(codes.items())))
    finally:
        if broker is not None:
            broker.stop()
            say("stopped the local broker")
    return 0


class RestartBudget:
    """At most `limit` restarts of one process within `window_s`, as systemd's start limit: a
    crash now and then over a crawl of days is restarted every time, a process that keeps dying
    needs a person, not a loop. Once refused, a process stays refused."""

    def __init__(
        self,
        limit: int = MAX_RESTARTS,
        window_s: float = RESTART_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._restarts: dict[str, deque[float]] = {}
        self.refused: set[str] = set()

    def allow(self, name: str) -> bool:
        """Whether `name` may be restarted now; counts the restart when it may."""
        if name in self.refused:
            return False
        now = self._clock()
        recent = self._restarts.setdefault(name, deque())
        while recent and now - recent[0] >= self.window_s:
            recent.popleft()
        if len(recent) >= self.limit:
            self.refused.add(name)
            return False
        recent.append(now)
        return True

    def recent(self, name: str) -> int:
        return len(self._restarts.get(name, ()))


def supervise(
    stack: Stack,
    stopped: threading.Event,
    broker: LocalBroker | None = None,
    budget: RestartBudget | None = None,
    interval_s: float = 1.0,
) -> None:
    """Until `stopped`: start again the local broker `up` started when it exits, and any
    instance that exits with an error, within the `budget` (`RestartBudget`), saying each time
    and saying when a process is left stopped."""
    budget = budget or RestartBudget()
    window = f"{budget.window_s / 60:.0f} min"
    while not stopped.wait(interval_s):
        code = None if broker is None else broker.exited()
        if broker is not None and code is not None:
            if budget.allow("broker"):
                say(
                    f"the local broker exited with {code} (logs {broker.logs_dir}); starting it "
                    f"again ({budget.recent('broker')}/{budget.limit} in {window})"
                )
                broker.start()
                say(f"the local broker is back on {broker.bootstrap}")
            elif "broker" in budget.refused:
                say(f"the local broker keeps exiting; stopping (logs {broker.logs_dir})")
                return
        for instance in stack.failed():
            name = instance.instance_id
            if name in budget.refused:
                continue
            if budget.allow(name):
                say(
                    f"{name} exited with {instance.process.poll()} (log {instance.log_path}); "
                    f"restarting ({budget.recent(name)}/{budget.limit} in {window})"
                )
                stack.restart(name)
            else:
                say(
                    f"{name} exited {budget.limit + 1} times in {window}; left stopped, see "
                    f"{instance.log_path}"
                )


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    """The README's crawl: the generated demo site crawled end to end, then everything stopped."""
    broker = ensure_broker(settings, Path(args.data_dir))
    site = SiteServer(demo_site()).start()
    try:
        stack = start_stack(settings, args, allow_private=True)
        try:
            hosts = ", ".join(site.site.origin(h) for h in range(site.graph.hosts))
            say(f"demo site: {site.site.seed_url} (hosts {hosts})")
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
