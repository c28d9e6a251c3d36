"""Test helpers: per-test deployments (settings, topics), service processes, topic readers.

Every wait has a deadline and polls a condition; nothing sleeps and hopes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition

from schemas import crawls, deadletter, members
from schemas.registry import ALL_TOPICS, changelog_topic
from schemas.seeds import CrawlRequest
from schemas.serde import decode, encode
from schemas.topic import TopicSpec
from streamcrawl.children import stopped_with_this_process
from streamcrawl.kafka import table_consumer_config
from streamcrawl.membership import is_live
from streamcrawl.settings import Settings
from streamcrawl.table import TopicTable
from streamcrawl.topics import create_topics

REPO = Path(__file__).resolve().parents[1]


CRAWLER_ENV = {"fetcher": {"STREAMCRAWL_FETCHER__ALLOWED_NETWORKS": '["127.0.0.0/8"]'}}
"""What `Deployment.start_crawler` gives each role: the fetcher reaches the tests' local sites."""


@dataclass
class Deployment:
    """One isolated deployment on the session broker: its own topic prefix and state dirs."""

    bootstrap: str
    root: Path
    partitions: int = 1
    prefix: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:10]}.")

    def env(self, instance: str, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMCRAWL_")}
        env.update(
            {
                "STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS": self.bootstrap,
                "STREAMCRAWL_KAFKA__TOPIC_PREFIX": self.prefix,
                "STREAMCRAWL_KAFKA__PARTITIONS": str(self.partitions),
                "STREAMCRAWL_INSTANCE_ID": instance,
                "STREAMCRAWL_STATE__DIRECTORY": str(self.root / "state"),
                "STREAMCRAWL_LOOP__SESSION_TIMEOUT_MS": "6000",
                "STREAMCRAWL_LOOP__HEARTBEAT_INTERVAL_MS": "500",
                "STREAMCRAWL_LOOP__POLL_TIMEOUT_S": "0.05",
                "STREAMCRAWL_LOOP__REJOIN_TIMEOUT_S": "20",
                "STREAMCRAWL_LOG_LEVEL": "INFO",
                "STREAMCRAWL_FRONTIER__API_PORT": "0",
                "PYTHONPATH": str(REPO),
            }
        )
        env.update(extra)
        return env

    def settings(self, instance: str = "test") -> Settings:
        return Settings(
            kafka={
                "bootstrap_servers": self.bootstrap,
                "topic_prefix": self.prefix,
                "partitions": self.partitions,
            },
            state={"directory": self.root / "state"},
            loop={"session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "poll_timeout_s": 0.05},
            instance_id=instance,
        )

    def topic(self, suffix: str) -> str:
        return f"{self.prefix}{suffix}"

    def create(self, specs: tuple[TopicSpec, ...]) -> None:
        create_topics(self.settings(), specs)

    def start(self, role: str, logs: Path, **extra: str) -> ServiceProcess:
        """The role's service as instance `ROLE-1`, its output in `logs/ROLE.log`."""
        return ServiceProcess(role, self.env(f"{role}-1", **extra), logs / f"{role}.log").start()

    def start_crawler(self, logs: Path, **extra: dict[str, str]) -> list[ServiceProcess]:
        """A frontier, a fetcher allowed to reach 127.0.0.1 (the tests' sites) and a parser, as
        `start` starts them; ``extra`` is each role's further environment (``fetcher={...}``)."""
        return [
            self.start(role, logs, **{**CRAWLER_ENV.get(role, {}), **extra.get(role, {})})
            for role in ("frontier", "fetcher", "parser")
        ]

    def publish_crawl(self, request: CrawlRequest) -> None:
        """The request on `seeds`, keyed by its crawl id, as `streamcrawl seed` sends it."""
        produce_json(
            self.bootstrap, self.topic("seeds"), [(request.crawl_id, encode(request))], raw=True
        )

    def cli(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        """``streamcrawl ARGS`` run against this deployment, its output captured as text."""
        return subprocess.run(
            [sys.executable, "-m", "streamcrawl.cli", *args],
            cwd=REPO,
            env=self.env("cli"),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    def live_members(self, role: str) -> list[members.Member]:
        """The live records of `role` in `members` now."""
        table: TopicTable[members.Member] = TopicTable(
            table_consumer_config(self.settings("test-members")),
            self.topic("members"),
            lambda raw: decode(members.Member, raw),
        )
        table.start()
        try:
            table.wait_ready(10)
            return [m for m in table.snapshot().values() if m.role == role and is_live(m)]
        finally:
            table.stop()

    def create_for_role(self, role: str, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> None:
        """The role's input and output topics, its changelog, and the registry's shared topics."""
        specs = [TopicSpec(suffix=name, key="test") for name in (*inputs, *outputs)]
        self.create((*specs, changelog_topic(role), deadletter.TOPIC, members.TOPIC))


class ServiceProcess:
    """A service run as `python -m MODULE` in its own process group, output to a file."""

    def __init__(self, module: str, env: dict[str, str], log_path: Path) -> None:
        self.module = module
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ServiceProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            stopped_with_this_process([sys.executable, "-m", self.module]),
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        return self

    def wait(self, timeout_s: float) -> int:
        if self.process is None:
            raise RuntimeError("not started")
        return self.process.wait(timeout=timeout_s)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=30)

    def _signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it exited between poll and kill
                os.killpg(self.process.pid, signum)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def produce_json(
    bootstrap: str, topic: str, records: list[tuple[str, Any]], raw: bool = False
) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5}
    )
    for key, value in records:
        payload = value if raw else json.dumps(value).encode()
        producer.produce(topic, key=key, value=payload)
    remaining = producer.flush(30)
    if remaining:
        raise TimeoutError(f"{remaining} test messages not delivered")


class TopicReader:
    """Reads a whole topic from the beginning and keeps everything it saw."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.messages: list[Message] = []
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"reader-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        metadata = self._consumer.list_topics(topic, timeout=30)
        partitions = metadata.topics[topic].partitions
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])

    def read_until(
        self, condition: Callable[[list[Message]], bool], timeout_s: float, describe: str = ""
    ) -> list[Message]:
        deadline = time.monotonic() + timeout_s
        while not condition(self.messages):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.topic}: {describe or 'condition'} not met in {timeout_s}s "
                    f"({len(self.messages)} messages read)"
                )
            for message in self._consumer.consume(500, 0.2):
                if message.error() is None:
                    self.messages.append(message)
        return self.messages

    def poll(self, timeout_s: float = 0.05) -> list[Message]:
        """Read whatever is available now; returns everything seen so far."""
        for message in self._consumer.consume(500, timeout_s):
            if message.error() is None:
                self.messages.append(message)
        return self.messages

    def values(self) -> list[Any]:
        return [json.loads(m.value()) for m in self.messages if m.value() is not None]

    def close(self) -> None:
        self._consumer.close()


def crawl_done(messages: list[Message]) -> bool:
    """Whether the newest CrawlState read from `crawls` is done (a deployment with one crawl)."""
    states = [m.value() for m in messages if m.value() is not None]
    return bool(states) and decode(crawls.CrawlState, states[-1]).status == "done"


def wait_crawl_done(
    deployment: Deployment, services: list[ServiceProcess], timeout_s: float
) -> None:
    """Until the deployment's one crawl is done in `crawls`; the services' log tails are printed
    when it is not."""
    states = TopicReader(deployment.bootstrap, deployment.topic("crawls"))
    try:
        states.read_until(crawl_done, timeout_s, "the crawl done")
    except TimeoutError:
        for process in services:
            print(process.module, process.log_tail(15))
        raise
    finally:
        states.close()


def crawl_to_the_end(
    bootstrap: str,
    root: Path,
    started: list[ServiceProcess],
    request: CrawlRequest,
    timeout_s: float = 120,
) -> Deployment:
    """Topics, a frontier, a fetcher and a parser (two partitions, logs under ``root``) that
    crawl ``request`` until it is done; the services go into ``started`` (the caller stops them)
    and stay up for the CLI."""
    deployment = Deployment(bootstrap, root, partitions=2)
    deployment.create(ALL_TOPICS)
    started.extend(deployment.start_crawler(root / "logs"))
    deployment.publish_crawl(request)
    wait_crawl_done(deployment, started, timeout_s)
    return deployment


def wait_for(condition: Callable[[], bool], timeout_s: float, describe: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{describe} not reached in {timeout_s}s")
        time.sleep(0.05)


class LocalSite:
    """An aiohttp site on 127.0.0.1 served from a thread, recording when each path was asked for.

    Routes map a path to (status, headers, body); paths not listed answer 404. With ``delay_s``
    every listed path but /robots.txt answers that much later (a fetch stays in flight).
    """

    def __init__(
        self, routes: dict[str, tuple[int, dict[str, str], bytes]], delay_s: float = 0.0
    ) -> None:
        self.routes = routes
        self.delay_s = delay_s
        self.requests: list[tuple[float, str]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"http://{self.host}{path}"

    def start(self) -> LocalSite:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=10)
        return self

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._answer)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def _answer(self, request: web.Request) -> web.Response:
        self.requests.append((time.monotonic(), request.path_qs))
        if self.delay_s and request.path_qs in self.routes and request.path != "/robots.txt":
            await asyncio.sleep(self.delay_s)
        status, headers, body = self.routes.get(request.path_qs, (404, {}, b"not found"))
        return web.Response(status=status, headers=headers, body=body)

    def paths(self) -> list[str]:
        return [path for _, path in self.requests]

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
