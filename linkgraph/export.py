"""The edge list for graphs beyond one machine: CSV that Spark GraphFrames / GraphX load as is.

Read from `links.by-target`, which holds every edge once per key (to TAB from, compacted; the
latest record of a key wins), so any instance can export the whole graph without touching the
partitions other instances own. Records are de-duplicated through a temporary RocksDB on disk, so
an export is bounded by disk, not memory. Edge columns follow GraphFrames' names: ``src``,
``dst``, then seed 002's edge fields (``rel`` space-separated); a record the link graph would
dead-letter (`wire.decode_in_link` refuses it) is left out and counted in the log. The vertex list
has ``id``, ``host``, ``registered_domain``. Load them with Spark's CSV reader, typed by the
schemas here::

    spark.read.csv(path, header=True, multiLine=True, escape='"', schema=EDGE_SCHEMA)

``multiLine`` because a text may hold a line break, ``escape`` because a quote inside a value is
doubled. Records end with LF alone: a file of CR LF records makes Spark's reader fold a CR LF
inside a value into LF. Spark reads an empty text (no anchor, no ``rel``) as null.
`tests/integration/test_export_in_spark.py` loads both files in Spark and checks every field.
"""

from __future__ import annotations

import csv
import logging
import tempfile
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from rocksdict import Options, Rdict

from linkgraph.wire import decode_in_link
from schemas.canonical import host_key, registered_domain
from schemas.exceptions import DecodeError
from streamcrawl.kafka import check_consumer_error, watermarks

EDGE_TYPES = {
    "src": "STRING",
    "dst": "STRING",
    "anchor_text": "STRING",
    "context_window": "STRING",
    "link_type": "STRING",
    "position": "STRING",
    "rel": "STRING",
    "discovered_at": "BIGINT",
    "last_seen_at": "BIGINT",
    "gone": "BOOLEAN",
}
"""The edge list's columns in order, each with its Spark SQL type."""
VERTEX_TYPES = {"id": "STRING", "host": "STRING", "registered_domain": "STRING"}
EDGE_COLUMNS = tuple(EDGE_TYPES)
VERTEX_COLUMNS = tuple(VERTEX_TYPES)
EDGE_SCHEMA = ", ".join(f"{column} {kind}" for column, kind in EDGE_TYPES.items())
"""The edge list's columns as Spark's DDL, for its reader (the module docstring): Spark takes
the columns by position, so the schema is made from the same list as the header."""
VERTEX_SCHEMA = ", ".join(f"{column} {kind}" for column, kind in VERTEX_TYPES.items())

log = logging.getLogger(__name__)


def read_latest(config: dict[str, Any], topic: str, store: Rdict) -> int:
    """Every record of `topic` up to its current end into `store` (later ones overwrite)."""
    consumer = Consumer(config)
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        targets = {}
        for partition in sorted(metadata.topics[topic].partitions):
            low, high = watermarks(consumer, TopicPartition(topic, partition), 30.0)
            if high > low:
                targets[partition] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in targets])
        read = 0
        while targets:
            for message in consumer.consume(1000, 1.0):
                error = message.error()
                if error is not None:
                    check_consumer_error(error)
                    continue
                partition, offset = message.partition(), message.offset()
                key, value = message.key(), message.value()
                if key is not None:
                    if value is None:
                        store.delete(key)
                    else:
                        store[key] = value
                    read += 1
                target = targets.get(partition)
                if target is not None and offset is not None and offset >= target - 1:
                    del targets[partition]
        return read
    finally:
        consumer.close()


def write_export(config: dict[str, Any], topic: str, out: Path, vertices: bool) -> int:
    """Write the edge (or vertex) CSV of `topic` to `out`; returns the number of rows."""
    with tempfile.TemporaryDirectory(prefix="linkgraph-export-") as scratch:
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        store = Rdict(str(Path(scratch) / "edges"), options=options)
        try:
            read_latest(config, topic, store)
            return write_csv(store, out, vertices, Path(scratch))
        finally:
            store.close()


def write_csv(store: Rdict, out: Path, vertices: bool, scratch: Path) -> int:
    """Write the edge (or vertex) CSV of the `links.by-target` records in `store` to `out`,
    `scratch` a directory for the vertices' de-duplication; returns the number of rows."""
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        if vertices:
            return _vertices(store, writer, scratch)
        return _edges(store, writer)


def _edges(store: Rdict, writer: Any) -> int:
    writer.writerow(EDGE_COLUMNS)
    rows = refused = 0
    for key, raw in store.items():
        try:
            edge = decode_in_link(_raw(raw), _raw(key))
        except DecodeError:
            refused += 1
            continue
        writer.writerow(
            [
                edge.from_url,
                edge.to_url,
                edge.anchor_text,
                edge.context_window,
                edge.link_type,
                edge.position,
                " ".join(edge.rel),
                edge.discovered_at,
                edge.last_seen_at,
                str(edge.gone).lower(),
            ]
        )
        rows += 1
    if refused:
        log.warning("export left out %d undecodable links.by-target records", refused)
    return rows


def _vertices(store: Rdict, writer: Any, scratch: Path) -> int:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    nodes = Rdict(str(scratch / "nodes"), options=options)
    try:
        for key, _ in store.items():
            to_url, _, from_url = _raw(key).partition(b"\t")
            nodes[to_url] = b""
            nodes[from_url] = b""
        writer.writerow(VERTEX_COLUMNS)
        rows = 0
        for url, _ in nodes.items():
            text = _raw(url).decode()
            host = host_key(text)
            writer.writerow([text, host, registered_domain(host) if host else ""])
            rows += 1
        return rows
    finally:
        nodes.close()


def _raw(key: object) -> bytes:
    if not isinstance(key, bytes):
        raise TypeError(f"a raw-mode store yields bytes, not {type(key).__name__}")
    return key
