"""The open state partitions of one service loop, each restored from its changelog when opened.

A state partition p opens only when the instance holds partition p of every input (co-partitioned
inputs, DESIGN section 4); until then the loop keeps those inputs paused. Closing keeps the RocksDB
directory on disk, so reopening replays only the changelog's tail.
"""

from __future__ import annotations

from pathlib import Path

from streamcrawl.metrics import LoopMetrics
from streamcrawl.recovery import ChangelogRestorer, Derivation, RestoreReport
from streamcrawl.spec import ServiceSpec
from streamcrawl.state import PartitionStore, StoreOptions


class StateStores:
    def __init__(
        self,
        spec: ServiceSpec,
        restorer: ChangelogRestorer,
        options: StoreOptions,
        state_dir: Path,
        metrics: LoopMetrics,
    ) -> None:
        if spec.changelog_topic is None:
            raise ValueError("state stores need the service's changelog topic")
        self._spec = spec
        self._changelog_topic = spec.changelog_topic
        self._restorer = restorer
        self._options = options
        self._state_dir = state_dir
        self._metrics = metrics
        self._open: dict[int, PartitionStore] = {}
        self.reports: list[RestoreReport] = []

    @property
    def open_partitions(self) -> set[int]:
        return set(self._open)

    def get(self, partition: int) -> PartitionStore | None:
        return self._open.get(partition)

    def openable(self, assigned: set[tuple[str, int]]) -> set[int]:
        """State partitions whose every input partition is among `assigned`."""
        topics = [i.topic for i in self._spec.inputs]
        held = {p for _, p in assigned}
        return {p for p in held if all((t, p) in assigned for t in topics)}

    def open(
        self,
        partition: int,
        committed: dict[tuple[str, int], int],
        derivation: Derivation | None = None,
    ) -> PartitionStore:
        store, report = self._restorer.open(
            self._state_dir / self._spec.role / f"partition-{partition}",
            self._spec.tables,
            self._options,
            self._changelog_topic,
            partition,
            committed,
            derivation,
        )
        self._open[partition] = store
        self.reports.append(report)
        self._metrics.restored_records.inc(report.records_read)
        self._metrics.restore_seconds.observe(report.seconds)
        return store

    def close(self, partition: int) -> bool:
        """Close one partition's store (kept on disk); False when it was not open."""
        store = self._open.pop(partition, None)
        if store is None:
            return False
        store.close()
        return True

    def close_all(self) -> list[int]:
        closed = sorted(self._open)
        for partition in closed:
            self.close(partition)
        self._restorer.close()
        return closed
