"""Running one service process: settings in, a loop with its side server and membership out.

`run_service` is what every service's `__main__` calls. It wires the kernel pieces (producer,
consumer, changelog restorer, side server, members heartbeat, signal handling) around the
service's spec and handler, and returns the exit status: 0 after a SIGTERM/SIGINT drain.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

from confluent_kafka import Consumer

from schemas import deadletter, members
from schemas.registry import changelog_topic
from streamcrawl.allocator import GiveBack
from streamcrawl.crashpoints import CrashPoints
from streamcrawl.handler import Handler
from streamcrawl.heap import settle_heap
from streamcrawl.kafka import KafkaProducer, consumer_config, table_consumer_config
from streamcrawl.logs import configure_logging
from streamcrawl.loop import ServiceLoop
from streamcrawl.membership import MemberPublisher
from streamcrawl.metrics import LoopMetrics
from streamcrawl.recovery import ChangelogRestorer
from streamcrawl.settings import Settings, default_instance_id
from streamcrawl.sideserver import SideServer
from streamcrawl.spec import Input, ServiceSpec
from streamcrawl.state import StoreOptions
from streamcrawl.stores import StateStores
from streamcrawl.topics import topic_name

log = logging.getLogger(__name__)

LAG_REFRESH_S = 5.0
STALL_AFTER_S = 120.0
"""/healthz fails when no cycle completed for this long: the loop is wedged."""


def service_spec(
    settings: Settings,
    role: str,
    inputs: tuple[Input, ...],
    *,
    tables: tuple[str, ...] = (),
    co_partitioned: bool = False,
    group_id: str | None = None,
) -> ServiceSpec:
    """The spec of a role with the deployment's topic names filled in."""
    prefix = settings.kafka.topic_prefix
    return ServiceSpec(
        role=role,
        group_id=group_id or f"{prefix}{role}",
        inputs=inputs,
        dead_letter_topic=topic_name(settings, deadletter.TOPIC),
        tables=tables,
        changelog_topic=topic_name(settings, changelog_topic(role)) if tables else None,
        co_partitioned=co_partitioned,
    )


def state_stores(spec: ServiceSpec, settings: Settings) -> StateStores:
    return StateStores(
        spec,
        ChangelogRestorer(table_consumer_config(settings)),
        StoreOptions(settings.state),
        settings.state.directory / settings.instance_id,
        LoopMetrics.for_role(spec.role),
    )


def build_loop(spec: ServiceSpec, handler: Handler, settings: Settings) -> ServiceLoop:
    consumer = Consumer(
        consumer_config(
            settings,
            spec.group_id,
            assignor=spec.assignor,
            static_member=settings.static_member,
        )
    )
    return ServiceLoop(
        spec=spec,
        handler=handler,
        consumer=consumer,
        producer=KafkaProducer.from_settings(settings),
        stores=state_stores(spec, settings) if spec.stateful else None,
        settings=settings.loop,
        metrics=LoopMetrics.for_role(spec.role),
        crash_points=CrashPoints(settings.crash_at),
    )


def run_service(
    spec: ServiceSpec,
    handler: Handler,
    settings: Settings,
    on_ready: Callable[[ServiceLoop], None] | None = None,
    api_address: str | None = None,
) -> int:
    """Run `handler` under `spec` until SIGTERM; `api_address` is published in `members`."""
    configure_logging(spec.role, settings.instance_id, settings.log_level)
    loop = build_loop(spec, handler, settings)
    side = SideServer(
        settings.http.host,
        settings.http.port,
        healthy=lambda: time.monotonic() - loop.last_cycle_at < STALL_AFTER_S,
        ready=lambda: loop.ready,
    )
    address = side.start()
    log.info("%s %s serving metrics on http://%s", spec.role, settings.instance_id, address)
    membership = MemberPublisher(
        KafkaProducer.from_settings(settings),
        topic_name(settings, members.TOPIC),
        spec.role,
        settings.instance_id,
        address,
        api_address=api_address,
    )

    def request_stop(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: draining", signum)
        loop.stop()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    last_lag = 0.0
    announced_ready = False
    give_back = GiveBack()  # streamcrawl.allocator

    def on_cycle() -> None:
        nonlocal last_lag, announced_ready
        membership.publish(loop.assignment(), loop.ready)
        now = time.monotonic()
        if now - last_lag > LAG_REFRESH_S:
            loop.update_lag()
            last_lag = now
        give_back.when_due()
        if loop.ready and not announced_ready:
            announced_ready = True
            if on_ready is not None:
                on_ready(loop)

    settle_heap()
    try:
        loop.run(on_cycle=on_cycle, before_close=membership.leave)
    finally:
        membership.close()
        side.stop()
    log.info("%s %s stopped", spec.role, settings.instance_id)
    return 0


def run_main(role: str, main: Callable[[], int]) -> NoReturn:
    """A service's `python -m ROLE`: exit with `main`'s status. An error `main` lets through (a
    fenced consumer, a broker that refuses an output for good) is logged as one JSON line with its
    traceback in `exc`, not printed bare among the JSON lines, and the status is 1, as Python's
    own would be; the supervisor (`up`, Kubernetes) starts the instance again."""
    try:
        code = main()
    except Exception:
        if not logging.getLogger().handlers:  # it failed before it configured its logs
            instance = os.environ.get("STREAMCRAWL_INSTANCE_ID") or default_instance_id()
            configure_logging(role, instance)
        log.exception("%s stopped by an error", role)
        code = 1
    sys.exit(code)
