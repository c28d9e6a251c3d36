"""The ingest half of `bench_linkgraph`: edges indexed per second against bare WriteBatch puts.

Both sides take the same decoded PageLinks. The baseline puts one record per edge (key from TAB
to, the edge's fields as JSON) with one WriteBatch per cycle of 500 pages, and nothing else. The
link graph runs the real handler under the loop's state path without Kafka: a child transaction per
message merged into the cycle's, then one `PartitionStore.write` per cycle. Its forward pass writes
the edge, the source's node and the re-keyed in-link value; its reverse pass (the re-keyed records,
decoded as the loop decodes them) writes the reverse edge, the target's anchor count and node.
CPU time of the process, so a busy neighbour on the 2-core machine does not count.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
from rocksdict import Options, Rdict, WriteBatch

from linkgraph.handler import LinkGraphHandler, LinkGraphTopics, decode_in_link
from schemas.links import LinkEdge, PageLinks, PageMeta
from streamcrawl.handler import Context, Output, Record
from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Transaction

CYCLE = 500
POSITIONS = ("NAV", "CONTENT", "FOOTER", "SIDEBAR")
TYPES = ("INTERNAL", "INTERNAL", "INTERNAL", "EXTERNAL", "NOFOLLOW")


@dataclass(frozen=True)
class IngestResult:
    edges: int
    bare_s: float
    forward_s: float
    reverse_s: float


def pages(count: int, per_page: int, hosts: int, seed: int = 1) -> list[PageLinks]:
    """A site-like graph: per page `per_page` out-links, nav links shared, content links spread."""
    rng = random.Random(seed)
    nav = [f"https://h{h}.example/section/{s}" for h in range(hosts) for s in range(8)]
    made = []
    for n in range(count):
        host = n % hosts
        targets = {nav[host * 8 + s] for s in range(8)}
        while len(targets) < per_page:
            targets.add(f"https://h{rng.randrange(hosts)}.example/page/{rng.randrange(count * 4)}")
        edges = [
            LinkEdge.model_construct(
                to_url=target,
                anchor_text=f"anchor {i % 40}",
                context_window=f"text before the link {i} and after it",
                link_type=rng.choice(TYPES),
                rel=[],
                position=POSITIONS[i % 4],
                discovered_at=1_795_000_000_000 + n,
            )
            for i, target in enumerate(sorted(targets))
        ]
        made.append(
            PageLinks.model_construct(
                crawl_id="bench",
                from_url=f"https://h{host}.example/page/{n}",
                fetched_at=1_795_000_000_000 + n,
                edges=edges,
                part=0,
                parts=1,
                page=PageMeta(status=200, title=f"page {n}"),
            )
        )
    return made


def bare(batch_of_pages: list[PageLinks], path: Path) -> float:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    db = Rdict(str(path), options=options)
    started = time.process_time()
    for start in range(0, len(batch_of_pages), CYCLE):
        batch = WriteBatch(raw_mode=True)
        for page in batch_of_pages[start : start + CYCLE]:
            for edge in page.edges:
                value = orjson.dumps(
                    {
                        "anchor_text": edge.anchor_text,
                        "context_window": edge.context_window,
                        "link_type": edge.link_type,
                        "position": edge.position,
                        "discovered_at": edge.discovered_at,
                        "last_seen_at": page.fetched_at,
                        "rel": edge.rel,
                        "gone": False,
                    }
                )
                batch.put(f"{page.from_url}\t{edge.to_url}".encode(), value)
        db.write(batch)
    elapsed = time.process_time() - started
    db.close()
    return elapsed


def _run_cycles(
    handler: LinkGraphHandler, store: PartitionStore, topic: str, values: list[object]
) -> tuple[float, list[Output]]:
    outputs: list[Output] = []
    started = time.process_time()
    offset = 0
    for start in range(0, len(values), CYCLE):
        top = Transaction(store)
        for value in values[start : start + CYCLE]:
            offset += 1
            ctx = Context(partition=0, transaction=Transaction(top), source=f"{topic}:0:{offset}")
            handler.handle(Record(topic, 0, offset, None, value, [], 0), ctx)
            ctx.transaction.merge_into_parent()  # type: ignore[union-attr]
            outputs.extend(ctx.outputs)
        handler.on_tick(Context(partition=0, transaction=top))
        store.write(top.writes, "changelog", offset)
    return time.process_time() - started, outputs


def linkgraph(batch_of_pages: list[PageLinks], path: Path) -> tuple[float, float]:
    handler = LinkGraphHandler(LinkGraphTopics("links", "links.by-target", 1))
    store = PartitionStore(path, handler.tables(), StoreOptions(StateSettings()))
    try:
        forward_s, outputs = _run_cycles(handler, store, "links", list(batch_of_pages))
        in_links: list[object] = [decode_in_link(o.value) for o in outputs]
        started = time.process_time()
        reverse_s, _ = _run_cycles(handler, store, "links.by-target", in_links)
        decode_s = time.process_time() - started - reverse_s
    finally:
        store.close()
    return forward_s, reverse_s + max(decode_s, 0.0) * 0  # decoding is the loop's, not counted


def measure(root: Path, count: int, per_page: int, hosts: int) -> IngestResult:
    generated = pages(count, per_page, hosts)
    edges = sum(len(p.edges) for p in generated)
    bare_s = bare(generated, root / "bare")
    forward_s, reverse_s = linkgraph(generated, root / "linkgraph")
    return IngestResult(edges, bare_s, forward_s, reverse_s)
