"""Where the test session's Kafka broker comes from, first match wins.

1. `STREAMCRAWL_TEST_BOOTSTRAP`: a broker someone already runs (CI service, docker compose).
2. testcontainers, only when a Docker engine answers a ping.
3. A `LocalBroker` (real Apache Kafka from Maven jars) on free ports in a temp dir.

Each source is a context manager that yields a bootstrap address and tears its broker down.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from streamcrawl.broker import LocalBroker, default_libs_dir, free_ports

BOOTSTRAP_ENV = "STREAMCRAWL_TEST_BOOTSTRAP"

logger = logging.getLogger(__name__)


def docker_answers(timeout_s: float = 2.0) -> bool:
    """Whether a Docker engine answers a ping within `timeout_s`; never raises."""
    try:
        import docker  # type: ignore[import-untyped]  # noqa: PLC0415  (optional dependency)
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=timeout_s)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (docker.errors.DockerException, OSError) as error:
        logger.info("no Docker engine (%s); not using testcontainers", error)
        return False


@contextmanager
def container_broker() -> Iterator[str]:
    """A Confluent cp-kafka container in KRaft mode, removed on exit."""
    try:
        from testcontainers.community.kafka import KafkaContainer  # noqa: PLC0415
    except ImportError:
        from testcontainers.kafka import KafkaContainer  # noqa: PLC0415

    with KafkaContainer().with_kraft() as container:
        yield str(container.get_bootstrap_server())


@contextmanager
def local_broker(data_dir: Path) -> Iterator[str]:
    """A `LocalBroker` on free ports in `data_dir`, stopped on exit.

    The JVM runs in its own session, so no terminal signal reaches it: the stop is registered
    with atexit before the JVM starts, and SIGTERM (`timeout`, a CI cancel) is turned into an
    interrupt, so an interrupted or terminated session still kills the broker's process group.
    """
    port, controller_port = free_ports(2)
    broker = LocalBroker(data_dir, port, controller_port, default_libs_dir())
    atexit.register(broker.stop)
    try:
        with _sigterm_interrupts():
            bootstrap = broker.start()
            logger.info("test broker %s started in %.1f s", bootstrap, broker.last_start_s or 0.0)
            yield bootstrap
    finally:
        broker.stop()
        atexit.unregister(broker.stop)


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Raise KeyboardInterrupt on SIGTERM, which pytest answers by tearing down its fixtures.

    Left alone, SIGTERM ends pytest at once, skipping both fixture teardown and atexit.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield  # someone else handles SIGTERM, or signals cannot be set from this thread
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def session_broker(data_dir: Path) -> Iterator[str]:
    """The bootstrap address of the first broker source that applies (see the module doc)."""
    given = os.environ.get(BOOTSTRAP_ENV)
    if given:
        yield given
    elif docker_answers():
        with container_broker() as bootstrap:
            yield bootstrap
    else:
        with local_broker(data_dir) as bootstrap:
            yield bootstrap
