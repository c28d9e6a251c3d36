"""A real single-node Apache Kafka broker (KRaft) on this machine, without Docker.

Used by `streamcrawl kafka start|stop|status` and by the test session. The jars come from Maven
Central through `deploy/local/pom.xml` into a cache outside git (`ensure_jars`). The data dir holds
`server.properties`, the KRaft log dirs (formatted once, so topics survive restarts), the broker's
logs and a pid file; the pid file lets another process stop the broker. The JVM runs in its own
process group with its output in a file, and is ready when an AdminClient metadata request lists a
broker.
"""

from __future__ import annotations

import base64
import fcntl
import logging
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streamcrawl.children import stopped_with_this_process
from streamcrawl.exceptions import BrokerError
from streamcrawl.settings import Settings

KAFKA_VERSION = "4.1.1"
LIBS_ENV = "STREAMCRAWL_KAFKA_LIBS"
DEPLOY_DIR = Path(__file__).resolve().parent.parent / "deploy" / "local"
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
_JARS_MARKER = ".streamcrawl-complete"
_CLEAN_EXIT_CODES = (0, 143, -signal.SIGTERM)
_TAIL_BYTES = 6000
# The JVM's flags; KAFKA_JVM_PERFORMANCE_OPTS, the variable Kafka's scripts read, replaces them.
# The serial collector, not the G1 of bin/kafka-server-start.sh: this broker has a fixed heap of
# a few hundred MiB and shares a small machine with the services. Measured together with
# `_request_threads` in make bench, three runs each against Kafka's defaults: broker CPU 8-15 %
# lower, pages/s 4-12 % higher, broker peak RSS 643-660 MiB against 715-1,024. (C1 only,
# -XX:TieredStopAtLevel=1, was measured and not adopted: it saves C2's compiling in a short
# crawl, 101 -> 74 broker CPU s over 5,000 pages, but costs more over make bench's 21,000:
# 140 -> 173 CPU s, 97.9 -> 89.0 pages/s.)
_JVM_FLAGS = ("-server", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
JVM_FLAGS_ENV = "KAFKA_JVM_PERFORMANCE_OPTS"

logger = logging.getLogger(__name__)
# librdkafka's own log lines (connection refused while the broker boots) go here, not to stderr.
_client_log = logging.getLogger(f"{__name__}.client")


def default_libs_dir() -> Path:
    """Where the broker jars are cached: `$STREAMCRAWL_KAFKA_LIBS`, else under `~/.cache`."""
    override = os.environ.get(LIBS_ENV)
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "streamcrawl" / f"kafka-{KAFKA_VERSION}" / "libs"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it); for tests."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: all are held open until each is picked, so none repeats."""
    with ExitStack() as stack:
        probes = [
            stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            for _ in range(count)
        ]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, no leading '-'."""
    while True:
        cluster_id = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _request_threads(cores: int) -> dict[str, str]:
    """Threads for requests sized to the machine: Kafka's defaults (8 I/O, 3 network) are for a
    server of its own, and on 2 cores they only contend with each other and with the services."""
    return {
        "num.io.threads": str(min(8, max(2, cores))),
        "num.network.threads": str(min(3, max(2, cores // 2))),
    }


def server_properties(
    data_dir: Path, port: int, controller_port: int, overrides: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The broker configuration: one node that is broker and controller, loopback only.

    Replication factors are 1 because there is one broker; group timeouts are lowered so that
    tests can use short session timeouts and a restarted consumer rejoins quickly.
    """
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data_dir / "data"),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "1000",
        "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.min.heartbeat.interval.ms": "500",
        **_request_threads(os.cpu_count() or 1),
    }
    properties.update(overrides or {})
    return properties


@dataclass(frozen=True)
class BrokerStatus:
    """What `LocalBroker.status()` found: a live broker process that answers metadata requests."""

    running: bool
    pid: int | None
    bootstrap: str


class LocalBroker:
    """One Kafka broker process whose config, data, logs and pid file live in `data_dir`."""

    def __init__(
        self,
        data_dir: Path,
        port: int,
        controller_port: int,
        libs_dir: Path,
        *,
        heap: str = "512m",
        deploy_dir: Path = DEPLOY_DIR,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.port = port
        self.controller_port = controller_port
        self.libs_dir = libs_dir.expanduser().resolve()
        self.heap = heap
        self.deploy_dir = deploy_dir
        self.overrides = dict(overrides or {})
        self.last_start_s: float | None = None
        self.ignored_settings: list[str] = []
        self._process: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_settings(
        cls, settings: Settings, data_dir: Path = Path(".streamcrawl/kafka")
    ) -> LocalBroker:
        """The broker that `settings.kafka.bootstrap_servers` points at; controller on port + 1."""
        first = settings.kafka.bootstrap_servers.split(",")[0].strip()
        host, _, port_text = first.rpartition(":")
        if host not in ("127.0.0.1", "localhost") or not port_text.isdigit():
            raise BrokerError(f"a local broker needs a 127.0.0.1:PORT bootstrap, not {first!r}")
        port = int(port_text)
        return cls(data_dir, port, port + 1, default_libs_dir())

    @property
    def bootstrap(self) -> str:
        """The address clients connect to."""
        return f"127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        """The `server.properties` this broker runs with."""
        return self.data_dir / "server.properties"

    @property
    def logs_dir(self) -> Path:
        """The broker's own logs (`server.log`) and its console output (`console.out`)."""
        return self.data_dir / "logs"

    @property
    def pid_path(self) -> Path:
        """The running broker's process id (also its process group id)."""
        return self.data_dir / "broker.pid"

    def __enter__(self) -> LocalBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def ensure_jars(self) -> Path:
        """Copy the broker jars from Maven into `libs_dir`, unless a completed copy is there."""
        marker = self.libs_dir / _JARS_MARKER
        if marker.is_file():
            return self.libs_dir
        self.libs_dir.mkdir(parents=True, exist_ok=True)
        # Two test sessions may start at once; the second waits and then finds the marker.
        with open(self.libs_dir.parent / f".{self.libs_dir.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not marker.is_file():
                self._copy_jars()
                marker.write_text(f"kafka_2.13 {KAFKA_VERSION}\n")
        return self.libs_dir

    def _copy_jars(self) -> None:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise BrokerError("Maven (mvn) is not on PATH; it is needed to fetch the Kafka jars")
        pom = self.deploy_dir / "pom.xml"
        target = [f"-DoutputDirectory={self.libs_dir}", "-DincludeScope=runtime"]
        command = [mvn, "-B", "-q", "-f", str(pom), _DEPENDENCY_PLUGIN, *target]
        started = time.monotonic()
        result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
        if result.returncode != 0:
            output = (result.stdout + result.stderr)[-_TAIL_BYTES:]
            raise BrokerError(f"fetching the Kafka jars with Maven failed:\n{output}")
        jars = len(list(self.libs_dir.glob("*.jar")))
        logger.info(
            "copied %d Kafka jars to %s in %.1f s", jars, self.libs_dir, time.monotonic() - started
        )

    def write_config(self) -> Path:
        """Write `server.properties` for this broker's ports and data dir; return its path."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(exist_ok=True)
        properties = server_properties(
            self.data_dir, self.port, self.controller_port, self.overrides
        )
        lines = [f"{key}={value}" for key, value in properties.items()]
        self.config_path.write_text("\n".join(lines) + "\n")
        return self.config_path

    def is_formatted(self) -> bool:
        """Whether the KRaft log dir already holds a cluster (so it must not be formatted again)."""
        return (self.data_dir / "data" / "meta.properties").is_file()

    def format_storage(self) -> None:
        """Format the log dir with a new cluster id, once; later starts reuse the data."""
        if self.is_formatted():
            return
        cluster_id = new_cluster_id()
        tool = ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.config_path)]
        command = [*self._java("256m"), *tool]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            output = (result.stdout + result.stderr)[-_TAIL_BYTES:]
            raise BrokerError(f"formatting {self.data_dir / 'data'} failed:\n{output}")
        logger.info("formatted %s as cluster %s", self.data_dir / "data", cluster_id)

    def start(self, wait_s: float = 60.0, *, detached: bool = False) -> str:
        """Start the broker (or find it running) and wait until it answers; return the bootstrap.
        It stops when this process does, unless `detached` (`streamcrawl kafka start`)."""
        pid = self._live_pid()
        if pid is not None:
            logger.info("Kafka broker already running (pid %d)", pid)
            self._wait_ready(pid, time.monotonic(), wait_s)
            return self.bootstrap
        self.ensure_jars()
        self.write_config()
        self.format_storage()
        log_offset = _size(self.logs_dir / "server.log")
        started = time.monotonic()
        with open(self.logs_dir / "console.out", "ab") as console:
            console.write(f"--- starting at {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            console.flush()
            command = [*self._java(self.heap), "kafka.Kafka", str(self.config_path)]
            self._process = subprocess.Popen(
                command if detached else stopped_with_this_process(command),
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
            )
        pid = self._process.pid
        self.pid_path.write_text(f"{pid}\n")
        self._wait_ready(pid, started, wait_s)
        self.last_start_s = time.monotonic() - started
        logger.info(
            "Kafka broker ready at %s in %.1f s (pid %d)", self.bootstrap, self.last_start_s, pid
        )
        self._check_settings_known(log_offset)
        return self.bootstrap

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM the broker's process group, SIGKILL it after `timeout_s`; remove the pid file."""
        pid = self._live_pid()
        if pid is None:
            self.pid_path.unlink(missing_ok=True)
            return
        _signal_group(pid, signal.SIGTERM)
        code = self._wait_exit(pid, timeout_s)
        if code is None and _pid_alive(pid):
            logger.warning(
                "Kafka broker (pid %d) ignored SIGTERM for %.0f s; killing it", pid, timeout_s
            )
            _signal_group(pid, signal.SIGKILL)
            code = self._wait_exit(pid, 10.0)
        if _pid_alive(pid):
            raise BrokerError(f"Kafka broker (pid {pid}) did not exit after SIGKILL")
        if code is not None and code not in _CLEAN_EXIT_CODES:
            logger.warning("Kafka broker (pid %d) exited with %d", pid, code)
        self._process = None
        self.pid_path.unlink(missing_ok=True)
        logger.info("Kafka broker (pid %d) stopped", pid)

    def exited(self) -> int | None:
        """The exit status of the broker this object started, once it has ended; None while it
        runs, and for a broker another process started (`streamcrawl kafka start`)."""
        return None if self._process is None else self._process.poll()

    def status(self, timeout_s: float = 5.0) -> BrokerStatus:
        """Whether the broker process is alive and answers a metadata request."""
        pid = self._live_pid()
        running = pid is not None and self._answers(_admin(self.bootstrap), timeout_s)
        return BrokerStatus(running=running, pid=pid, bootstrap=self.bootstrap)

    def log_tail(self) -> str:
        """The last lines of the broker's console output and `server.log`, for error messages."""
        parts = []
        for path in (self.logs_dir / "console.out", self.logs_dir / "server.log"):
            if path.is_file():
                with open(path, "rb") as log:
                    log.seek(max(0, path.stat().st_size - _TAIL_BYTES))
                    text = log.read().decode(errors="replace")
                parts.append(f"--- {path}:\n{text}")
        return "\n".join(parts) or "(no broker output)"

    def _check_settings_known(self, log_offset: int) -> None:
        """Warn about settings the broker does not know: it ignores them instead of failing.

        Kafka rejects a bad value at start, but a misspelt name is silently dropped; the
        `KafkaConfig values:` dump it logs at start lists every name it knows.
        """
        known = _logged_config_names(self.logs_dir / "server.log", log_offset)
        if not known:
            logger.debug("no KafkaConfig dump in server.log; cannot check setting names")
            return
        written = server_properties(self.data_dir, self.port, self.controller_port, self.overrides)
        self.ignored_settings = sorted(name for name in written if name not in known)
        if self.ignored_settings:
            logger.warning(
                "Kafka ignored settings it does not know: %s", ", ".join(self.ignored_settings)
            )

    def _java(self, heap: str) -> list[str]:
        java_home = os.environ.get("JAVA_HOME")
        java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
        if java is None:
            raise BrokerError("java is not on PATH and JAVA_HOME is unset; Kafka needs Java 17+")
        logging_flags = [
            f"-Dlog4j2.configurationFile={self.deploy_dir / 'log4j2.yaml'}",
            f"-Dkafka.logs.dir={self.logs_dir}",
        ]
        heap_flags = [f"-Xms{heap}", f"-Xmx{heap}"]
        custom = os.environ.get(JVM_FLAGS_ENV)
        jvm_flags = shlex.split(custom) if custom else list(_JVM_FLAGS)
        return [java, *heap_flags, *jvm_flags, *logging_flags, "-cp", str(self.libs_dir / "*")]

    def _wait_ready(self, pid: int, started: float, wait_s: float) -> None:
        deadline = started + wait_s
        admin = _admin(self.bootstrap)
        while not self._answers(admin, timeout_s=1.0):
            if self._wait_exit(pid, 0.2) is not None or not _pid_alive(pid):
                self.pid_path.unlink(missing_ok=True)
                raise BrokerError(f"Kafka broker exited before it was ready:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerError(
                    f"Kafka broker not ready after {wait_s:.0f} s:\n{self.log_tail()}"
                )

    def _answers(self, admin: AdminClient, timeout_s: float) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout_s):
                pass
        except OSError:
            return False  # not listening yet: skip the client, which would log the refusal
        try:
            return bool(admin.list_topics(timeout=timeout_s).brokers)
        except KafkaException:
            return False

    def _wait_exit(self, pid: int, timeout_s: float) -> int | None:
        """The exit code if our child ended within `timeout_s`; None if it runs or is not ours."""
        if self._process is not None and self._process.pid == pid:
            try:
                return self._process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return None
        deadline = time.monotonic() + timeout_s
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)  # not our child: there is nothing to block on but the pid
        return None

    def _live_pid(self) -> int | None:
        """The pid from the pid file if that process is alive and is this broker."""
        try:
            pid = int(self.pid_path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if not _pid_alive(pid):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:
            return None if Path("/proc/self").exists() else pid
        if b"kafka.Kafka" in cmdline and str(self.config_path).encode() in cmdline:
            return pid
        return None  # the pid was reused by another process


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True  # no /proc (macOS): kill(0) is all there is
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie has exited


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


def _logged_config_names(server_log: Path, offset: int) -> set[str]:
    """The setting names of the first `KafkaConfig values:` dump at or after `offset`."""
    if not server_log.is_file():
        return set()
    if _size(server_log) < offset:
        offset = 0  # the log was rotated since
    with open(server_log, "rb") as log:
        log.seek(offset)
        lines = log.read().decode(errors="replace").splitlines()
    names: set[str] = set()
    in_dump = False
    for line in lines:
        if in_dump and line.startswith("\t") and " = " in line:
            names.add(line.strip().partition(" = ")[0])
        elif in_dump:
            break
        elif line.rstrip().endswith("KafkaConfig values:"):
            in_dump = True
    return names


def _signal_group(pid: int, signum: signal.Signals) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except ProcessLookupError:
        pass  # exited between the check and the signal: that is what we wanted


def _admin(bootstrap: str) -> AdminClient:
    # Short reconnect backoff: the default grows to 10 s while the broker is still booting.
    config: dict[str, str | int | float | bool] = {
        "bootstrap.servers": bootstrap,
        "reconnect.backoff.max.ms": 500,
    }
    return AdminClient(
        config,
        logger=_client_log,
        error_cb=lambda error: _client_log.debug("admin client: %s", error),
    )
