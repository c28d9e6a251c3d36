"""An in-process link graph over N real RocksDB partitions: records in through the real handler,
each cycle written like the loop writes it, `links.by-target` outputs fed back by partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from linkgraph.handler import LinkGraphHandler, LinkGraphTopics
from linkgraph.queries import Query, answer
from linkgraph.wire import decode_in_link
from schemas.links import PageLinks
from schemas.partitioning import partition_for_key
from schemas.serde import encode
from streamcrawl.batch import apply_batch
from streamcrawl.handler import Context, Output, Record
from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Transaction

TOPICS = LinkGraphTopics(links="links", by_target="links.by-target", partitions=1)


class _Reader:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def table(self, name: str) -> Any:
        return self.ctx.table(name)


class GraphHarness:
    def __init__(self, root: Path, partitions: int = 1, *, in_link_ends: bool = False) -> None:
        self.topics = LinkGraphTopics("links", "links.by-target", partitions)
        self.in_link_ends = in_link_ends
        self.handler = LinkGraphHandler(self.topics, in_link_ends=in_link_ends)
        options = StoreOptions(StateSettings())
        self.stores = [
            PartitionStore(root / f"p{p}", self.handler.tables(), options)
            for p in range(partitions)
        ]
        self.offset = 0
        self.outputs: list[Output] = []
        self.dead_letters: list[str] = []
        self.last_sources: dict[tuple[str, bytes], str] = {}
        self._open()

    def _open(self) -> None:
        for partition, store in enumerate(self.stores):
            ctx = Context(partition=partition, transaction=Transaction(store))
            self.handler.on_partition_opened(ctx)

    def restart(self, **options: Any) -> None:
        """A new handler over the same stores, its partitions opened (a restarted instance);
        `options` are the handler's keyword arguments."""
        options.setdefault("in_link_ends", self.in_link_ends)
        self.handler = LinkGraphHandler(self.topics, **options)
        self._open()

    def partition_of(self, url: str) -> int:
        return partition_for_key(url.encode(), self.topics.partitions)

    def _apply(self, topic: str, partition: int, value: Any) -> list[Output]:
        return self._apply_cycle(topic, partition, [value])

    def _apply_cycle(self, topic: str, partition: int, values: list[Any]) -> list[Output]:
        """Several messages in one cycle, as the loop runs them: one batch (`apply_batch`), then
        the cycle's `on_tick` and one write. Returns the re-keyed outputs; dead letters are
        collected (their reasons) in `dead_letters`."""
        top = Transaction(self.stores[partition])
        records = []
        for value in values:
            self.offset += 1
            records.append(Record(topic, partition, self.offset, None, value, [], 0))
        batch = apply_batch(self.handler, partition, records, top)
        self.dead_letters.extend(rejection.reason for rejection in batch.rejections)
        outputs: list[Output] = list(batch.outputs)
        for row_topic, rows in batch.rows:
            outputs.extend(Output(row_topic, key, value, target) for key, value, target in rows)
        tick = Context(partition=partition, transaction=top)
        self.handler.on_tick(tick)
        assert not tick.outputs
        self.last_sources = {
            (table, key): source
            for table, sources in top.sources.items()
            for key, source in sources.items()
        }
        self.stores[partition].write(top.writes, "changelog", None)
        return outputs

    def feed_in_cycles(self, *messages: PageLinks) -> list[Output]:
        """Like `feed`, but each partition's messages in one cycle, then its in-links in one."""
        by_partition: dict[int, list[Any]] = {}
        for message in messages:
            decoded = PageLinks.model_validate_json(encode(message))
            by_partition.setdefault(self.partition_of(message.from_url), []).append(decoded)
        rekeyed: list[Output] = []
        for partition, values in by_partition.items():
            rekeyed.extend(self._apply_cycle("links", partition, values))
        in_links: dict[int, list[Any]] = {}
        for output in rekeyed:
            assert output.partition is not None
            in_links.setdefault(output.partition, []).append(
                decode_in_link(output.value, output.key)
            )
        for partition, values in in_links.items():
            self._apply_cycle("links.by-target", partition, values)
        self.outputs.extend(rekeyed)
        return rekeyed

    def feed(self, *messages: PageLinks, rekey: bool = True) -> list[Output]:
        """Index PageLinks, then (when `rekey`) the in-links they produced; returns the re-keyed."""
        rekeyed: list[Output] = []
        for message in messages:
            # Through the wire form, as the loop would decode it.
            decoded = PageLinks.model_validate_json(encode(message))
            rekeyed.extend(self._apply("links", self.partition_of(message.from_url), decoded))
        self.outputs.extend(rekeyed)
        if rekey:
            self.feed_in_links(rekeyed)
        return rekeyed

    def feed_in_links(self, outputs: list[Output]) -> None:
        for output in outputs:
            assert output.partition is not None
            self._apply(
                "links.by-target", output.partition, decode_in_link(output.value, output.key)
            )

    def query(self, query: Query) -> dict[str, Any]:
        partition = self.partition_of(query.url)
        ctx = Context(partition=partition, transaction=Transaction(self.stores[partition]))
        return answer(_Reader(ctx), query)

    def scan(self, partition: int, table: str) -> list[tuple[bytes, bytes]]:
        return list(self.stores[partition].scan(table))

    def close(self) -> None:
        for store in self.stores:
            store.close()
