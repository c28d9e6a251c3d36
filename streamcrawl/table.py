"""A compacted topic read whole into memory, outside any consumer group (`crawls`, `members`).

Every instance needs the full table, not a share of it, so the reader assigns itself every partition
from the beginning and never commits. It is ready once it has reached the high watermarks that
existed when it started; after that it keeps following on its own thread. A tombstone deletes a key.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from schemas.exceptions import DecodeError
from streamcrawl.kafka import check_consumer_error, coordinates, watermarks

log = logging.getLogger(__name__)

V = TypeVar("V")


class TopicTable(Generic[V]):
    def __init__(
        self,
        consumer_config: dict[str, Any],
        topic: str,
        decode: Callable[[bytes | None], V],
        on_change: Callable[[str, V | None], None] | None = None,
    ) -> None:
        self._config = consumer_config
        self._topic = topic
        self._decode = decode
        self._on_change = on_change
        self._values: dict[str, V] = {}
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True, name=f"table-{topic}")
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until the table caught up; False on timeout or when the reader failed."""
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(0.05):
            if self.error is not None or time.monotonic() > deadline:
                return False
        return True

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def get(self, key: str) -> V | None:
        with self._lock:
            return self._values.get(key)

    def snapshot(self) -> dict[str, V]:
        with self._lock:
            return dict(self._values)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _follow(self) -> None:
        consumer = Consumer(self._config)
        try:
            metadata = consumer.list_topics(self._topic, timeout=30)
            partitions = sorted(metadata.topics[self._topic].partitions)
            targets: dict[int, int] = {}
            for partition in partitions:
                low, high = watermarks(consumer, TopicPartition(self._topic, partition), 30.0)
                if high > low:
                    targets[partition] = high
            consumer.assign([TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in partitions])
            if not targets:
                self._ready.set()
            while not self._stop.is_set():
                for message in consumer.consume(1000, 0.2):
                    error = message.error()
                    if error is not None:
                        check_consumer_error(error)
                        continue
                    _, partition, offset = coordinates(message)
                    self._apply(message.key(), message.value())
                    target = targets.get(partition)
                    if target is not None and offset >= target - 1:
                        del targets[partition]
                        if not targets:
                            self._ready.set()
        except BaseException as error:  # recorded for the owner; the table is then never ready
            log.exception("table reader of %s failed", self._topic)
            self.error = error
        finally:
            consumer.close()

    def _apply(self, raw_key: bytes | None, raw_value: bytes | None) -> None:
        if raw_key is None:
            return
        key = raw_key.decode("utf-8", "replace")
        if raw_value is None:
            with self._lock:
                self._values.pop(key, None)
            if self._on_change is not None:
                self._on_change(key, None)
            return
        try:
            value = self._decode(raw_value)
        except DecodeError as error:
            log.warning("table %s: skipping undecodable value for %s: %s", self._topic, key, error)
            return
        with self._lock:
            self._values[key] = value
        if self._on_change is not None:
            self._on_change(key, value)


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.05) -> bool:
    """Poll a condition until it holds or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval_s)
    return condition()
