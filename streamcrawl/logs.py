"""Structured JSON logs, one object per line, so a log shipper needs no parsing rules.

The Kafka clients' own messages (librdkafka's, and the errors it reports) come through the
``streamcrawl.kafka.client`` logger (`streamcrawl.kafka.CLIENT_LOG`), so they are JSON lines too,
and a :class:`RepeatFilter` on it keeps a broker outage, which makes every client report the same
failure several times a second, to a few lines a minute.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable

REPEAT_WINDOW_S = 30.0
REMEMBERED_KINDS = 1_000
_NUMBERS = re.compile(r"\d+")
LIBRDKAFKA_FORMAT = "%s [%s] %s"
"""How confluent-kafka logs a librdkafka message: facility, client name, text."""


class JsonFormatter(logging.Formatter):
    def __init__(self, role: str, instance: str) -> None:
        super().__init__()
        self._role = role
        self._instance = instance

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "role": self._role,
            "instance": self._instance,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(role: str, instance: str, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(role, instance))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class RepeatFilter(logging.Filter):
    """Let the first message of a kind through, then at most one a ``window_s``, which says how
    many like it were held back. A kind is the level and the message with its numbers taken out;
    for librdkafka's messages (:data:`LIBRDKAFKA_FORMAT`) the client name is left out too, so the
    same failure reported by each client of a process is one kind. Clients log from several
    threads (the tables' consumers have their own), hence the lock."""

    def __init__(
        self, window_s: float = REPEAT_WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self._window_s = window_s
        self._clock = clock
        self._kinds: dict[str, tuple[float, int]] = {}
        """Per kind: when one was last let through, and how many were held back since."""
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        kind = f"{record.levelno} {_NUMBERS.sub('#', _text_of_kind(record))}"
        with self._lock:
            now = self._clock()
            last = self._kinds.get(kind)
            if last is not None and now - last[0] < self._window_s:
                self._kinds[kind] = (last[0], last[1] + 1)
                return False
            if len(self._kinds) >= REMEMBERED_KINDS:
                self._forget_before(now - self._window_s)
            self._kinds[kind] = (now, 0)
        if last is not None and last[1]:
            record.msg = f"{record.getMessage()} ({last[1]} more like it in {now - last[0]:.0f}s)"
            record.args = ()
        return True

    def _forget_before(self, moment: float) -> None:
        self._kinds = {kind: last for kind, last in self._kinds.items() if last[0] >= moment}
        if len(self._kinds) >= REMEMBERED_KINDS:
            self._kinds.clear()


def _text_of_kind(record: logging.LogRecord) -> str:
    args = record.args
    if record.msg == LIBRDKAFKA_FORMAT and isinstance(args, tuple) and len(args) == 3:
        facility, _client, text = args
        return f"{facility} {text}"
    return record.getMessage()
