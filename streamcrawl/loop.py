"""The service loop: poll, decode, handle, produce, wait for delivery, commit, write state.

One cycle (DESIGN section 4):
  1. consume a batch; rebalance callbacks run here (revoked partitions hand their queued deferred
     work back, wait up to ``revoke_wait_s`` for what is in flight and deliver it, commit and
     close their stores; assigned ones are opened and restored before their records are handled);
  2. decode each record (failures go to the dead-letter topic and the partition moves on), hand it
     to the handler with its partition's tables, collect outputs and state writes (a
     `BatchHandler` gets each state partition's decoded records together, `streamcrawl.batch`);
  3. run the handler's timer work per open state partition, and collect deferred completions;
  4. produce the outputs and the changelog records, and wait until all are delivered;
  5. commit the contiguous watermark of each partition (synchronously when state is kept, else
     asynchronously and at most every commit interval);
  6. write each state partition's changes and changelog offset in one WriteBatch.
Named crash points sit between the steps. A crash anywhere yields duplicates, never a loss.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition
from prometheus_client import Counter, Histogram

from schemas.deadletter import dead_letter
from schemas.exceptions import DecodeError
from schemas.serde import encode
from streamcrawl.batch import BatchHandler, Rows, apply_batch
from streamcrawl.crashpoints import CrashPoints
from streamcrawl.exceptions import FatalKafkaError
from streamcrawl.handler import BaseHandler, Context, Deferred, Handler, Output, Record
from streamcrawl.kafka import (
    DeliveryReport,
    KafkaProducer,
    check_consumer_error,
    coordinates,
    message_headers,
)
from streamcrawl.metrics import LoopMetrics
from streamcrawl.offsets import PartitionOffsets
from streamcrawl.recovery import SOURCE_HEADER, Derivation, RestoreReport, source_header
from streamcrawl.settings import LoopSettings
from streamcrawl.spec import Decoder, KeyedDecoder, ServiceSpec
from streamcrawl.state import PartitionStore, Transaction, changelog_key
from streamcrawl.stores import StateStores

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]


@dataclass
class _Cycle:
    """What one cycle collected before it talks to Kafka."""

    outputs: list[Output] = field(default_factory=list)
    rows: list[tuple[str, Rows]] = field(default_factory=list)
    """Batch handlers' bulk outputs (`Batch.produce_rows`), sent after `outputs`."""
    finished: list[tuple[str, int, int]] = field(default_factory=list)
    transactions: dict[int, Transaction] = field(default_factory=dict)
    batches: dict[int, tuple[list[Record], list[Message]]] = field(default_factory=dict)
    """A batch handler's decoded records per state partition, with their messages."""

    def empty(self) -> bool:
        return not (
            self.outputs
            or self.finished
            or any(rows for _, rows in self.rows)
            or any(t.writes for t in self.transactions.values())
        )


class ServiceLoop:
    """Runs one handler over its inputs until stopped; see the module docstring for a cycle."""

    def __init__(
        self,
        spec: ServiceSpec,
        handler: Handler,
        consumer: Consumer,
        producer: KafkaProducer,
        stores: StateStores | None,
        settings: LoopSettings,
        metrics: LoopMetrics,
        crash_points: CrashPoints,
    ) -> None:
        self.spec = spec
        self.handler = handler
        self._consumer = consumer
        self._producer = producer
        self._stores = stores
        self._settings = settings
        self._metrics = metrics
        self._crash = crash_points
        self._decoders = {i.topic: cast(Decoder, i.decode) for i in spec.inputs if not i.keyed}
        self._keyed_decoders = {
            i.topic: cast(KeyedDecoder, i.decode) for i in spec.inputs if i.keyed
        }
        self._batched: BatchHandler | None = (
            handler if isinstance(handler, BatchHandler) and spec.stateful else None
        )
        self._derivation = (
            Derivation(self._batched.derived_tables, self._batched.derive)
            if self._batched is not None and self._batched.derived_tables
            else None
        )
        """A batch handler's derived tables: no changelog records, rebuilt on restore."""
        self._assigned: set[TopicPartitionKey] = set()
        self._offsets: dict[TopicPartitionKey, PartitionOffsets] = {}
        self._committed: dict[TopicPartitionKey, int] = {}
        self._blocked: set[TopicPartitionKey] = set()
        self._throttled: set[TopicPartitionKey] = set()
        self._paused: set[TopicPartitionKey] = set()
        self._finished_deferred: queue.SimpleQueue[Deferred] = queue.SimpleQueue()
        self._abandoned: set[tuple[str, int, int]] = set()
        self._per_topic: dict[str, tuple[Counter, Histogram]] = {}
        self._commit_pending: set[TopicPartitionKey] = set()
        self._lost_at: float | None = None
        self._next_commit_at = 0.0
        self._stop = threading.Event()
        self._joined = False
        self.last_cycle_at = time.monotonic()

    # ----- lifecycle -------------------------------------------------------------------------

    def subscribe(self) -> None:
        self._consumer.subscribe(
            [i.topic for i in self.spec.inputs],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def stop(self) -> None:
        """Ask the loop to drain and exit; safe from a signal handler or another thread."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def ready(self) -> bool:
        restoring = self._stores is not None and bool(
            self._stores.openable(self._assigned) - self._stores.open_partitions
        )
        return (
            self._joined
            and not restoring
            and (not isinstance(self.handler, BaseHandler) or self.handler.ready())
        )

    @property
    def restore_reports(self) -> list[RestoreReport]:
        return [] if self._stores is None else self._stores.reports

    def assignment(self) -> list[str]:
        return sorted(f"{topic}:{partition}" for topic, partition in self._assigned)

    def run(
        self,
        on_cycle: Callable[[], None] | None = None,
        before_close: Callable[[], None] | None = None,
    ) -> None:
        """Cycle until stopped, then drain: finish in-flight work, commit, close stores."""
        self.subscribe()
        try:
            while not self._stop.is_set():
                self.cycle()
                if on_cycle is not None:
                    on_cycle()
            self._drain()
            if before_close is not None:
                before_close()
        finally:
            self.close()

    def close(self) -> None:
        """Close stores (kept on disk), the consumer (committing nothing new) and the producer."""
        if self._stores is not None:
            for partition in self._stores.close_all():
                if isinstance(self.handler, BaseHandler):
                    self.handler.on_partition_closed(partition)
        self._consumer.close()
        self._producer.close()

    def _drain(self) -> None:
        if self._assigned:
            self._consumer.pause([TopicPartition(t, p) for t, p in self._assigned])
        if isinstance(self.handler, BaseHandler):
            self.handler.on_stop()
        deadline = time.monotonic() + self._settings.shutdown_timeout_s
        while self._unfinished_work() and time.monotonic() < deadline:
            self.cycle()
        self.cycle()
        self._commit(sorted(self._assigned), final=True)

    def _unfinished_work(self) -> bool:
        running = sum(o.running for o in self._offsets.values())
        return running > len(self._abandoned)

    # ----- rebalance callbacks (run inside consume) -----------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._joined = True
        self._lost_at = None
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self._assigned.add(key)
            self._offsets[key] = PartitionOffsets(self._settings.max_uncommitted_per_partition)
            if self.spec.stateful:
                self._blocked.add(key)
        self._metrics.assigned_partitions.set(len(self._assigned))
        if isinstance(self.handler, BaseHandler):
            self.handler.on_inputs_assigned([(tp.topic, tp.partition) for tp in partitions])
        log.info("assigned %s", sorted(f"{tp.topic}:{tp.partition}" for tp in partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        if isinstance(self.handler, BaseHandler):
            self.handler.on_inputs_revoked(keys)  # work not yet begun is handed back
        self._finish_revoked_work(set(keys))
        self._commit(keys, final=True)
        self._forget(partitions, tell_handler=False)

    def _finish_revoked_work(self, keys: set[TopicPartitionKey]) -> None:
        """Before a revocation commits, wait up to ``revoke_wait_s`` for the partitions' work in
        flight (the fetcher's requests), then deliver whatever finished: the partitions' next
        owner starts after it instead of doing it again (a page fetched twice)."""
        cycle = _Cycle()
        deadline = time.monotonic() + self._settings.revoke_wait_s
        while self._running_in(keys, cycle):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                deferred = self._finished_deferred.get(timeout=left)
            except queue.Empty:
                break
            self._take(deferred, cycle)
        self._collect_deferred(cycle)
        if not cycle.empty():
            self._complete(cycle)

    def _running_in(self, keys: set[TopicPartitionKey], cycle: _Cycle) -> bool:
        """Whether work of these partitions is still running, neither finished into ``cycle`` nor
        handed back."""
        running = sum(self._offsets[key].running for key in keys if key in self._offsets)
        ended = sum((t[0], t[1]) in keys for t in (*self._abandoned, *cycle.finished))
        return running > ended

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._lost_at is None:
            self._lost_at = time.monotonic()
        self._forget(partitions, tell_handler=True)

    def _check_rejoined(self) -> None:
        """Exit when partitions were lost (a session timeout, as across a broker restart) and the
        consumer never rejoined: librdkafka can go silent there with static membership
        (confluentinc/librdkafka#3437), and only a fresh client, after a supervisor's restart,
        joins again. A rejoin always calls on_assign, with an empty list when nothing is given."""
        if self._lost_at is None:
            return
        waited = time.monotonic() - self._lost_at
        if waited > self._settings.rejoin_timeout_s:
            raise FatalKafkaError(
                f"lost its partitions {waited:.0f}s ago and never rejoined the group; exiting so"
                " a fresh consumer joins"
            )

    def _forget(self, partitions: list[TopicPartition], *, tell_handler: bool) -> None:
        if tell_handler and isinstance(self.handler, BaseHandler):
            self.handler.on_inputs_revoked([(tp.topic, tp.partition) for tp in partitions])
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._abandoned = {t for t in self._abandoned if (t[0], t[1]) not in gone}
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self._assigned.discard(key)
            self._offsets.pop(key, None)
            self._committed.pop(key, None)
            self._blocked.discard(key)
            self._throttled.discard(key)
            self._paused.discard(key)
            with contextlib.suppress(KeyError):  # no lag was reported for it yet
                self._metrics.consumer_lag.remove(tp.topic, str(tp.partition))
            self._close_store(tp.partition)
        self._metrics.assigned_partitions.set(len(self._assigned))
        log.info("revoked %s", sorted(f"{tp.topic}:{tp.partition}" for tp in partitions))

    # ----- state partitions ------------------------------------------------------------------

    def _open_ready_stores(self, cycle: _Cycle) -> None:
        if self._stores is None:
            return
        for partition in sorted(
            self._stores.openable(self._assigned) - self._stores.open_partitions
        ):
            store = self._stores.open(
                partition, self._committed_offsets(partition), self._derivation
            )
            transaction = Transaction(store)
            cycle.transactions[partition] = transaction
            if isinstance(self.handler, BaseHandler):
                ctx = Context(partition=partition, transaction=transaction)
                self.handler.on_partition_opened(ctx)
                cycle.outputs.extend(ctx.outputs)
        for topic, partition in list(self._blocked):
            if partition in self._stores.open_partitions:
                self._blocked.discard((topic, partition))

    def _committed_offsets(self, partition: int) -> dict[TopicPartitionKey, int]:
        wanted = [TopicPartition(i.topic, partition) for i in self.spec.inputs]
        result: dict[TopicPartitionKey, int] = {}
        for tp in self._consumer.committed(wanted, timeout=30):
            result[(tp.topic, tp.partition)] = max(tp.offset, 0)
        return result

    def _close_store(self, partition: int) -> None:
        closed = self._stores is not None and self._stores.close(partition)
        if closed and isinstance(self.handler, BaseHandler):
            self.handler.on_partition_closed(partition)

    def store(self, partition: int) -> PartitionStore | None:
        """The open store of a state partition (for tests and tools; handlers use tables)."""
        return self._store(partition)

    def _store(self, partition: int) -> PartitionStore | None:
        return None if self._stores is None else self._stores.get(partition)

    def _transaction(self, cycle: _Cycle, partition: int) -> Transaction:
        """The cycle's top-level transaction over an open state partition."""
        transaction = cycle.transactions.get(partition)
        if transaction is None:
            store = self._store(partition)
            if store is None:
                raise RuntimeError(f"state partition {partition} is not open")
            transaction = cycle.transactions[partition] = Transaction(store)
        return transaction

    # ----- one cycle -------------------------------------------------------------------------

    def cycle(self) -> None:
        started = time.monotonic()
        messages = self._poll()
        self._check_rejoined()
        cycle = _Cycle()
        self._open_ready_stores(cycle)
        rewound: set[TopicPartitionKey] = set()
        for message in messages:
            self._dispatch(message, cycle, rewound)
        self._handle_batches(cycle)
        self._tick(cycle)
        self._collect_deferred(cycle)
        self._complete(cycle)
        self._apply_backpressure()
        self.last_cycle_at = time.monotonic()
        self._metrics.ready.set(1 if self.ready else 0)
        if messages or not cycle.empty():
            self._metrics.cycle_seconds.observe(self.last_cycle_at - started)

    def _poll(self) -> list[Message]:
        """Wait for the first record, then take whatever else is already fetched, up to a batch.

        `consume(n, timeout)` waits the whole timeout unless n records arrive, which would add a
        poll timeout to every hop of a URL's round trip when traffic is light, so the wait is for
        one record only. While deferred work is running its completions arrive from another thread
        and cannot wake `consume`, so the wait is cut into short slices that look for them.
        """
        deadline = time.monotonic() + self._settings.poll_timeout_s
        while True:
            wait = deadline - time.monotonic()
            if self._unfinished_work():
                wait = min(wait, self._settings.deferred_poll_s)
            messages = self._consumer.consume(1, max(wait, 0.0))
            if messages:
                break
            if time.monotonic() >= deadline or not self._finished_deferred.empty():
                return messages
        if self._settings.batch_size > 1:
            messages.extend(self._consumer.consume(self._settings.batch_size - 1, 0))
        return messages

    def _decode(self, topic: str, message: Message, key: bytes | None) -> object:
        """The message's value as its input's decoder makes it (a keyed one gets the key too)."""
        keyed = self._keyed_decoders.get(topic)
        if keyed is not None:
            return keyed(message.value(), key)
        return self._decoders[topic](message.value())

    def _dispatch(self, message: Message, cycle: _Cycle, rewound: set[TopicPartitionKey]) -> None:
        error = message.error()
        if error is not None:
            check_consumer_error(error)
            return
        topic, partition, offset = coordinates(message)
        key = (topic, partition)
        if key not in self._assigned or key in rewound:
            return
        if self._stores is not None and self._store(partition) is None:
            # Not openable yet (restoring, or a co-partitioned input not held): read it again later.
            self._consumer.seek(TopicPartition(topic, partition, offset))
            rewound.add(key)
            self._blocked.add(key)
            return
        self._offsets[key].start(offset)
        counted_in, processing = self._input_metrics(topic)
        counted_in.inc()
        ticket = (topic, partition, offset)
        record_key = message.key()
        try:
            value = self._decode(topic, message, record_key)
        except DecodeError as decode_error:
            self._dead_letter(cycle, message, f"undecodable: {decode_error}", "decode")
            cycle.finished.append(ticket)
            return
        record = Record(
            topic=topic,
            partition=partition,
            offset=offset,
            key=record_key.decode("utf-8", "replace") if record_key is not None else None,
            value=value,
            headers=message_headers(message),
            timestamp_ms=message.timestamp()[1],
        )
        if self._batched is not None:
            batched = cycle.batches.get(partition)
            if batched is None:
                batched = cycle.batches[partition] = ([], [])
            batched[0].append(record)
            batched[1].append(message)
            cycle.finished.append(ticket)  # rejected or not, done once the cycle completes
            return
        ctx = self._context_for(record, cycle)
        began = time.perf_counter()
        try:
            self.handler.handle(record, ctx)
        except Exception as handler_error:  # routed, not swallowed: the record is dead-lettered
            log.exception("handler failed on %s:%d@%d", topic, partition, offset)
            self._metrics.errors.labels("handler").inc()
            self._dead_letter(
                cycle,
                message,
                f"handler error: {type(handler_error).__name__}: {handler_error}",
                "handler",
            )
            cycle.finished.append(ticket)
            return
        finally:
            processing.observe(time.perf_counter() - began)
        if ctx.dead_letter_reason is not None:
            self._dead_letter(cycle, message, ctx.dead_letter_reason, "rejected")
            cycle.finished.append(ticket)
            return
        if ctx.transaction is not None:
            ctx.transaction.merge_into_parent()
        cycle.outputs.extend(ctx.outputs)
        if ctx.deferred is None:
            cycle.finished.append(ticket)

    def _handle_batches(self, cycle: _Cycle) -> None:
        """Hand each state partition's records to the batch handler (`streamcrawl.batch`) and
        dead-letter the records it rejected. The processing histogram gets one observation per
        batch and input topic in it: the batch's time (its records are handled together)."""
        if self._batched is None:
            return
        for partition, (records, messages) in cycle.batches.items():
            began = time.perf_counter()
            batch = apply_batch(
                self._batched, partition, records, self._transaction(cycle, partition)
            )
            elapsed = time.perf_counter() - began
            for topic in {record.topic for record in records}:
                self._input_metrics(topic)[1].observe(elapsed)
            cycle.outputs.extend(batch.outputs)
            cycle.rows.extend(batch.rows)
            if not batch.rejections:
                continue
            by_ticket = {coordinates(message): message for message in messages}
            for rejection in batch.rejections:
                record = rejection.record
                message = by_ticket[(record.topic, record.partition, record.offset)]
                if rejection.kind == "handler":
                    self._metrics.errors.labels("handler").inc()
                self._dead_letter(cycle, message, rejection.reason, rejection.kind)

    def _input_metrics(self, topic: str) -> tuple[Counter, Histogram]:
        """The input topic's messages-in counter and processing histogram, looked up once."""
        children = self._per_topic.get(topic)
        if children is None:
            children = self._per_topic[topic] = (
                self._metrics.messages_in.labels(topic),
                self._metrics.processing_seconds.labels(topic),
            )
        return children

    def _context_for(self, record: Record, cycle: _Cycle) -> Context:
        if not self.spec.stateful:
            ticket = (record.topic, record.partition, record.offset)
            return Context(
                partition=record.partition,
                defer_factory=lambda: Deferred(ticket, self._finished_deferred.put),
            )
        parent = self._transaction(cycle, record.partition)
        return Context(
            partition=record.partition,
            transaction=Transaction(parent),
            source=source_header(record.topic, record.partition, record.offset),
        )

    def _dead_letter(self, cycle: _Cycle, message: Message, reason: str, kind: str) -> None:
        topic, partition, offset = coordinates(message)
        self._metrics.dead_letters.labels(topic, kind).inc()
        log.warning("dead-lettered %s:%d@%d: %s", topic, partition, offset, reason)
        letter = dead_letter(self.spec.role, topic, partition, offset, reason, message.value())
        cycle.outputs.append(Output(self.spec.dead_letter_topic, message.key(), encode(letter)))

    def _tick(self, cycle: _Cycle) -> None:
        if not isinstance(self.handler, BaseHandler):
            return
        partitions: list[int | None] = (
            [*sorted(self._stores.open_partitions)] if self._stores is not None else [None]
        )
        for partition in partitions:
            transaction = None if partition is None else self._transaction(cycle, partition)
            ctx = Context(partition=partition, transaction=transaction)
            self.handler.on_tick(ctx)
            cycle.outputs.extend(ctx.outputs)

    def _collect_deferred(self, cycle: _Cycle) -> None:
        while True:
            try:
                deferred = self._finished_deferred.get_nowait()
            except queue.Empty:
                return
            self._take(deferred, cycle)

    def _take(self, deferred: Deferred, cycle: _Cycle) -> None:
        if deferred.abandoned:
            topic, partition, _ = deferred.ticket
            if (topic, partition) in self._offsets:  # else revoked: nothing left to hold back
                self._abandoned.add(deferred.ticket)  # never finished: its offset stays behind
            return
        cycle.outputs.extend(deferred.outputs)
        cycle.finished.append(deferred.ticket)

    # ----- produce, deliver, commit, persist -------------------------------------------------

    def _complete(self, cycle: _Cycle) -> None:
        if cycle.empty():
            self._producer.poll(0)
            self._commit_when_due(set())
            return
        report = DeliveryReport(self.spec.changelog_topic)
        sent: dict[str, int] = {}
        for output in cycle.outputs:
            self._producer.send(
                output.topic,
                output.key,
                output.value,
                partition=output.partition,
                headers=output.headers,
                report=report,
            )
            sent[output.topic] = sent.get(output.topic, 0) + 1
        send = self._producer.send
        for topic, rows in cycle.rows:
            for key, value, target in rows:
                send(topic, key, value, partition=target, report=report)
            sent[topic] = sent.get(topic, 0) + len(rows)
        for topic, count in sent.items():
            self._metrics.messages_out.labels(topic).inc(count)
        for partition, transaction in cycle.transactions.items():
            self._produce_changelog(partition, transaction, report)
        self._crash.reached("after_produce")
        self._producer.flush(self._settings.delivery_timeout_s)
        # A message librdkafka gave up on must not be committed past: stop, and be redelivered.
        report.raise_if_failed()
        changelog_high = report.highest
        self._crash.reached("after_delivery")
        touched = set()
        for topic, partition, offset in cycle.finished:
            offsets = self._offsets.get((topic, partition))
            if offsets is not None:  # None: revoked while the work was in flight
                offsets.finish(offset)
                touched.add((topic, partition))
        failed = self._commit(sorted(touched)) if self.spec.stateful else set()
        if not self.spec.stateful:
            self._commit_when_due(touched)
        self._crash.reached("after_offset_store")
        for partition, transaction in cycle.transactions.items():
            store = self._store(partition)
            if store is None or partition in failed:
                continue
            if transaction.writes or partition in changelog_high:
                store.write(
                    transaction.writes,
                    self.spec.changelog_topic or "",
                    changelog_high.get(partition),
                )
        for partition in failed:
            # The changelog has these writes; a tail replay with the source filter restores the
            # committed view, so reopen instead of writing state the group never committed.
            self._close_store(partition)
        self._crash.reached("after_state_write")

    def _produce_changelog(
        self, partition: int, transaction: Transaction, report: DeliveryReport
    ) -> None:
        """One record per changed key of a table not derived; the key's table prefix and each
        source's header are built once per cycle (a message's writes share its source)."""
        topic = self.spec.changelog_topic
        if not transaction.writes or topic is None:
            return
        send = self._producer.send
        derived = self._derivation.tables if self._derivation is not None else frozenset()
        headers: dict[str, list[tuple[str, bytes]]] = {}
        for table, writes in transaction.writes.items():
            if table in derived:
                continue  # rebuilt from the records it derives from on restore
            prefix = changelog_key(table, b"")
            sources = transaction.sources[table]
            for key, value in writes.items():
                source = sources.get(key)
                header = None
                if source:
                    header = headers.get(source)
                    if header is None:
                        header = headers[source] = [(SOURCE_HEADER, source.encode())]
                send(topic, prefix + key, value, partition=partition, headers=header, report=report)

    def _commit_when_due(self, touched: set[TopicPartitionKey]) -> None:
        """A stateless service commits at most every `commit_interval_s`: a crash redoes at most
        that much delivered work, and the broker is not sent a commit per (small) cycle."""
        self._commit_pending |= touched
        now = time.monotonic()
        if self._commit_pending and now >= self._next_commit_at:
            self._commit(sorted(self._commit_pending & self._assigned))
            self._commit_pending.clear()
            self._next_commit_at = now + self._settings.commit_interval_s

    def _commit(self, keys: list[TopicPartitionKey], *, final: bool = False) -> set[int]:
        """Commit each partition's watermark; return the state partitions whose commit failed.

        Stateful services commit synchronously (state is written only after the commit), others
        asynchronously; `final` (revocation, shutdown) always waits and re-sends what an earlier
        asynchronous commit may not have landed.
        """
        offsets = []
        for key in keys:
            tracker = self._offsets.get(key)
            if tracker is None or tracker.committable is None:
                continue
            if self._committed.get(key) == tracker.committable and not final:
                continue
            offsets.append(TopicPartition(key[0], key[1], tracker.committable))
        if not offsets:
            return set()
        try:
            self._consumer.store_offsets(offsets=offsets)
            if self.spec.stateful or final:
                self._consumer.commit(offsets=offsets, asynchronous=False)
            else:
                self._consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as error:
            log.warning("commit failed (records will be redelivered): %s", error)
            self._metrics.errors.labels("commit").inc()
            return {tp.partition for tp in offsets}
        for tp in offsets:
            self._committed[(tp.topic, tp.partition)] = tp.offset
        return set()

    def _apply_backpressure(self) -> None:
        for key, offsets in self._offsets.items():
            if offsets.full:
                self._throttled.add(key)
            else:
                self._throttled.discard(key)
        should_pause = (self._blocked | self._throttled) & self._assigned
        if isinstance(self.handler, BaseHandler) and not self.handler.accepting():
            should_pause = set(self._assigned)
        to_pause = should_pause - self._paused
        to_resume = (self._paused - should_pause) & self._assigned
        if to_pause:
            self._consumer.pause([TopicPartition(t, p) for t, p in to_pause])
        if to_resume:
            self._consumer.resume([TopicPartition(t, p) for t, p in to_resume])
        self._paused = (self._paused | to_pause) - to_resume

    def update_lag(self) -> None:
        """Refresh the consumer-lag gauge from cached watermarks and positions."""
        keys = sorted(self._assigned)
        if not keys:
            return
        positions = self._consumer.position([TopicPartition(t, p) for t, p in keys])
        for tp in positions:
            try:
                _, high = self._consumer.get_watermark_offsets(tp, cached=True)
            except KafkaException:
                continue
            position = (
                tp.offset if tp.offset >= 0 else self._committed.get((tp.topic, tp.partition), 0)
            )
            if high >= 0:
                self._metrics.consumer_lag.labels(tp.topic, str(tp.partition)).set(
                    max(0, high - position)
                )
