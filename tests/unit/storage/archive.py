"""A storage handler over a real blob store, WARC writer and RocksDB partition, driven the way the
service loop drives it (handle, then commit the index write), with no broker."""

from __future__ import annotations

import hashlib
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from schemas.pages import FetchedPage
from storage.blobs import BlobStore
from storage.handler import StorageHandler
from storage.index import TABLE, PageHistory, decode_history
from storage.warc import WarcWriter
from streamcrawl.handler import Context, Record
from streamcrawl.settings import StateSettings
from streamcrawl.state import PartitionStore, StoreOptions, Transaction


def make_page(
    url: str,
    body: bytes,
    fetched_at: int = 1_700_000_000_000,
    *,
    status: int = 200,
    lease_id: str | None = None,
    crawl_id: str = "crawl-1",
    truncated: bool = False,
    headers: dict[str, str] | None = None,
) -> FetchedPage:
    return FetchedPage(
        crawl_id=crawl_id,
        url=url,
        final_url=url,
        lease_id=lease_id or f"lease-{fetched_at}",
        depth=0,
        status=status,
        headers=headers if headers is not None else {"Content-Type": "text/html"},
        content_type="text/html",
        body_size=len(body),
        sha256=hashlib.sha256(body).hexdigest(),
        truncated=truncated,
        fetched_at=fetched_at,
    )


@dataclass
class Archive:
    root: Path
    state_dir: Path
    instance: str = "storage-1"
    max_bytes: int = 10 * 1024 * 1024
    history_limit: int = 64
    offset: int = 0
    dead_letters: list[str] = field(default_factory=list)
    executor: Executor | None = None

    def __post_init__(self) -> None:
        self.store = PartitionStore(self.state_dir / "p0", (TABLE,), StoreOptions(StateSettings()))
        self.open_writer()

    def open_writer(self) -> None:
        """A writer as a (re)started instance makes one: recovering what it had open."""
        self.blobs = BlobStore(self.root, self.instance)
        self.warc = WarcWriter(self.root, self.instance, max_bytes=self.max_bytes)
        self.recovered = self.warc.recover()
        self.handler = StorageHandler(self.blobs, self.warc, self.history_limit, self.executor)

    def deliver(self, page: FetchedPage, body: bytes, *, commit: bool = True) -> None:
        """One record through the handler; `commit=False` is a crash before the index write."""
        self.deliver_cycle([(page, body)], commit=commit)

    def deliver_cycle(
        self, fetched: list[tuple[FetchedPage, bytes]], *, commit: bool = True
    ) -> None:
        """Records through the handler as one loop cycle does: each handled, then the timer work,
        then (unless `commit=False`, a crash before the index write) the index written. What
        `on_tick` raises stops the service, as in the loop: nothing of the cycle is committed."""
        cycle = Transaction(self.store)
        for page, body in fetched:
            message = Transaction(cycle)
            ctx = Context(partition=0, transaction=message, source=f"pages:0:{self.offset}")
            record = Record("pages", 0, self.offset, page.url, (page, body), [], page.fetched_at)
            self.offset += 1
            try:
                self.handler.handle(record, ctx)
            except Exception as error:  # the loop dead-letters what a handler raises
                self.dead_letters.append(f"handler error: {error}")
                continue
            if ctx.dead_letter_reason is not None:
                self.dead_letters.append(ctx.dead_letter_reason)
                continue
            message.merge_into_parent()
        self.handler.on_tick(Context(partition=0, transaction=cycle))
        if commit:
            self.store.write(cycle.writes, "changelog", None)

    def history(self, url: str) -> PageHistory | None:
        return decode_history(self.store.get(TABLE, url.encode()))

    def warc_files(self) -> list[Path]:
        return sorted((self.root / "warc").glob("*/*.warc.gz"))

    def records(self) -> list[tuple[str, dict[str, str], bytes]]:
        """Every record of every WARC file, digests checked: (type, WARC headers, payload)."""
        found = []
        for path in self.warc_files():
            with path.open("rb") as handle:
                for record in ArchiveIterator(handle, check_digests="raise"):
                    payload = record.content_stream().read()
                    found.append((record.rec_type, dict(record.rec_headers.headers), payload))
        return found

    def close(self) -> None:
        self.warc.close()
        self.store.close()
