"""`python -m storage`: one storage instance (DESIGN section 3, step 6).

Consumes `pages` (keyed by URL, so a giant host's pages spread over every storage instance) in the
storage group, keeps the URL index as the kernel's per-partition state (table `pages`, changelog
`changelog.storage`) and writes blobs and WARC files under the shared `storage.root`
(`STREAMCRAWL_STORAGE__ROOT`). It produces nothing but dead letters and its changelog.

On start it first clears what a previous run of the same instance id left half done: its own blob
temporaries, and the torn tail and open markers of its own WARC files (`WarcWriter.recover`). Then
it serves the page API (`storage.api`) on `storage.api_host:api_port` (port 0: any free port),
published in `members` as `api_address`, and runs the loop until SIGTERM, or until a write under
`storage.root` fails (exit 3, nothing of that cycle committed; see `storage.handler`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from concurrent.futures import ThreadPoolExecutor

from schemas import members, pages
from schemas.serde import decode, decode_page
from storage.api import build_app
from storage.blobs import BlobStore
from storage.exceptions import ApiPortUnavailableError, StorageUnavailableError
from storage.handler import StorageHandler
from storage.routing import LocalIndex, PageRouter
from storage.settings import StorageServiceSettings
from storage.warc import WarcWriter
from streamcrawl.apiserver import ApiServer
from streamcrawl.crashpoints import CrashPoints
from streamcrawl.exceptions import TopicMissingError
from streamcrawl.kafka import table_consumer_config
from streamcrawl.logs import configure_logging
from streamcrawl.service import run_service, service_spec
from streamcrawl.spec import Input
from streamcrawl.table import TopicTable
from streamcrawl.topics import partition_counts, topic_name

log = logging.getLogger(__name__)

DISK_FAILED_EXIT = 3
"""A write under storage.root failed: restart once the disk is fixed (the pages wait in Kafka)."""


def decode_member(raw: bytes | None) -> members.Member:
    member: members.Member = decode(members.Member, raw)
    return member


def start_api(
    settings: StorageServiceSettings,
    router: PageRouter,
    blobs: BlobStore,
    stack: contextlib.ExitStack,
) -> str:
    options = settings.storage
    server = ApiServer(build_app(router, blobs), options.api_host, options.api_port)
    try:
        address = server.start()
    except OSError as error:
        server.stop()
        raise ApiPortUnavailableError(
            f"page API cannot listen on {options.api_host}:{options.api_port}: {error}"
        ) from error
    stack.callback(server.stop)
    log.info("storage %s serving the page API on http://%s", settings.instance_id, address)
    return address


def main() -> int:
    settings = StorageServiceSettings()
    configure_logging("storage", settings.instance_id, settings.log_level)
    options = settings.storage
    crash_points = CrashPoints(settings.crash_at) if settings.crash_at else None
    blobs = BlobStore(
        options.root,
        settings.instance_id,
        level=options.blob_zstd_level,
        fsync=options.fsync,
        crash_points=crash_points,
    )
    warc = WarcWriter(
        options.root,
        settings.instance_id,
        max_bytes=options.warc_max_bytes,
        gzip_level=options.warc_gzip_level,
        fsync=options.fsync,
        max_open=options.max_open_warcs,
        crash_points=crash_points,
    )
    removed = blobs.remove_own_temporaries()
    recovered = warc.recover()
    if removed or recovered:
        log.warning("recovered after a crash: %d blob temporaries, WARC %s", removed, recovered)
    pages_topic = topic_name(settings, pages.TOPIC)
    try:
        local = LocalIndex(partition_counts(settings, [pages_topic])[pages_topic])
    except TopicMissingError as error:
        sys.stderr.write(f"streamcrawl: storage cannot start: {error}\n")
        return 2
    with contextlib.ExitStack() as stack:
        stack.callback(warc.close)
        executor = None
        if options.parallel_compression:
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storage-blob")
            stack.callback(executor.shutdown)
        handler = StorageHandler(blobs, warc, options.history_limit, executor)
        stack.callback(handler.close)  # before the executor's shutdown, which waits for its job
        spec = service_spec(
            settings, "storage", (Input(pages_topic, decode_page),), tables=handler.tables()
        )
        api_address = None
        if options.api_enabled:
            member_table: TopicTable[members.Member] = TopicTable(
                table_consumer_config(settings), topic_name(settings, members.TOPIC), decode_member
            )
            member_table.start()
            stack.callback(member_table.stop)
            router = PageRouter(local, member_table, pages_topic, settings.instance_id)
            try:
                api_address = start_api(settings, router, blobs, stack)
            except ApiPortUnavailableError as error:
                log.error("%s", error)
                return 2
        try:
            return run_service(
                spec, handler, settings, on_ready=local.attach, api_address=api_address
            )
        except StorageUnavailableError as error:
            # Nothing of the failed cycle was committed: its pages are stored after a restart.
            log.error("storage %s stopped: %s", settings.instance_id, error)
            return DISK_FAILED_EXIT
