"""Storage processes on the session broker: a deployment, pages to produce, API and member reads."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from warcio.archiveiterator import ArchiveIterator

from schemas import members
from schemas.pages import FetchedPage
from schemas.registry import ALL_TOPICS
from schemas.serde import decode, encode_page
from storage.warcfiles import warc_files
from streamcrawl.kafka import table_consumer_config
from streamcrawl.membership import is_live
from streamcrawl.table import TopicTable
from tests.support import Deployment, ServiceProcess, wait_for


def fetched(url: str, body: bytes, fetched_at: int, crawl_id: str = "crawl-1") -> FetchedPage:
    return FetchedPage(
        crawl_id=crawl_id,
        url=url,
        final_url=url,
        lease_id=f"lease-{fetched_at}",
        depth=1,
        status=200,
        headers={"Content-Type": "text/html; charset=utf-8"},
        content_type="text/html; charset=utf-8",
        body_size=len(body),
        sha256=hashlib.sha256(body).hexdigest(),
        fetched_at=fetched_at,
    )


def page_body(index: int, version: int = 0) -> bytes:
    """About 7 KB of HTML that compresses to half (hex digests), distinct per page and version."""
    lines = (hashlib.sha256(f"{index}-{version}-{k}".encode()).hexdigest() for k in range(100))
    paragraphs = "".join(f"<p>{line}</p>" for line in lines)
    return f"<html><title>page {index}</title><body>{paragraphs}</body></html>".encode()


@dataclass
class StorageDeployment:
    """A deployment with every topic, a shared storage root and storage processes on it."""

    bootstrap: str
    root: Path
    partitions: int = 2
    warc_max_bytes: int = 16 * 1024
    processes: list[ServiceProcess] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.deployment = Deployment(self.bootstrap, self.root, partitions=self.partitions)
        self.deployment.create(ALL_TOPICS)
        self.storage_root = self.root / "shared-storage"
        self._members: TopicTable[members.Member] | None = None

    def env(self, instance: str, **extra: str) -> dict[str, str]:
        return self.deployment.env(
            instance,
            STREAMCRAWL_STORAGE__ROOT=str(self.storage_root),
            STREAMCRAWL_STORAGE__WARC_MAX_BYTES=str(self.warc_max_bytes),
            **extra,
        )

    def start(self, instance: str = "storage-1", **extra: str) -> ServiceProcess:
        log = self.root / "logs" / f"{instance}-{len(self.processes)}.log"
        process = ServiceProcess("storage", self.env(instance, **extra), log).start()
        self.processes.append(process)
        return process

    def produce(self, pages: list[tuple[FetchedPage, bytes]]) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "partitioner": "murmur2_random",
                "compression.type": "zstd",
            }
        )
        for page, body in pages:
            producer.produce(
                self.deployment.topic("pages"), key=page.url, value=encode_page(page, body)
            )
        if producer.flush(30):
            raise TimeoutError("pages not delivered")

    def members(self) -> list[members.Member]:
        if self._members is None:
            self._members = TopicTable(
                table_consumer_config(self.deployment.settings()),
                self.deployment.topic("members"),
                lambda raw: decode(members.Member, raw),
            )
            self._members.start()
            if not self._members.wait_ready(30):
                raise TimeoutError(f"members not readable: {self._members.error}")
        return [m for m in self._members.snapshot().values() if m.role == "storage" and is_live(m)]

    def api_addresses(
        self, count: int, timeout_s: float = 90, excluding: frozenset[str] = frozenset()
    ) -> list[str]:
        """API addresses of `count` ready storage members that hold every partition once, each
        member at least one (`excluding` the addresses of processes that died but may still look
        live). A member that joined and holds nothing yet is mid-rebalance: a partition is about
        to move to it, and a lookup during the move answers 503."""

        def serving() -> list[members.Member]:
            return [
                m
                for m in self.members()
                if m.ready and m.api_address and m.api_address not in excluding
            ]

        def ready() -> bool:
            current = serving()
            held = [p for m in current for p in m.partitions]
            settled = all(m.partitions for m in current) and len(held) == len(set(held))
            return len(current) >= count and len(set(held)) == self.partitions and settled

        wait_for(ready, timeout_s, f"{count} ready storage members holding every partition")
        return sorted(str(m.api_address) for m in serving())

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
        if self._members is not None:
            self._members.stop()


def get(address: str, path: str, **query: str) -> tuple[int, bytes, dict[str, str]]:
    url = f"http://{address}{path}?{urllib.parse.urlencode(query)}"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read(), dict(error.headers)


def get_json(address: str, path: str, **query: str) -> tuple[int, Any]:
    status, body, _ = get(address, path, **query)
    return status, json.loads(body)


def wait_stored(address: str, url: str, content_hash: str, timeout_s: float = 60) -> None:
    def stored() -> bool:
        status, document = get_json(address, "/v1/page", url=url)
        return status == 200 and document["content_hash"] == content_hash

    wait_for(stored, timeout_s, f"{url} stored with {content_hash[:12]}")


def warc_records(root: Path) -> list[tuple[str, str, str]]:
    """(type, target URI, record id) of every record, every digest checked by warcio."""
    found = []
    for path in warc_files(root):
        with path.open("rb") as handle:
            for record in ArchiveIterator(handle, check_digests="raise"):
                record.content_stream().read()
                headers = record.rec_headers
                found.append(
                    (
                        record.rec_type,
                        headers.get_header("WARC-Target-URI") or "",
                        headers.get_header("WARC-Record-ID"),
                    )
                )
    return found
