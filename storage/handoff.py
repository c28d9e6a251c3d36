"""Blobs handed to a second thread: one executor job per loop cycle, not one per page.

The storage handler hands each new body here and goes on to the next page's WARC records while the
body is compressed and written (zstd, file writes and renames release the GIL). The first blob of a
cycle starts one job on the executor; the job takes blobs from a queue until `settle` puts the end
mark, then returns what it wrote. A job and a future per page cost the handler's thread as much as
a few WARC header fields (a future's condition, the executor's work item, the wake-up) and showed
in its profile at 20 KB pages; a queue put is a fraction of that.

`settle` is called by the handler before the loop commits (from `on_tick`): it returns once every
blob handed off is on disk, with what was written and the OSError that stopped the writing, if one
did. After a failed write the job writes nothing more: the service stops before the cycle commits,
and the pages come again.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future
from queue import SimpleQueue

from storage.blobs import BlobStore, BlobWrite

Blob = tuple[str, bytes]
"""(content hash, body) of a blob to store."""


class BlobHandoff:
    def __init__(self, blobs: BlobStore, executor: Executor) -> None:
        self._blobs = blobs
        self._executor = executor
        self._queue: SimpleQueue[Blob | None] = SimpleQueue()
        self._job: Future[tuple[list[BlobWrite], OSError | None]] | None = None

    def put(self, content_hash: str, body: bytes) -> None:
        """Hand a body off to be stored under its (already checked) hash."""
        if self._job is None:
            self._queue = SimpleQueue()
            self._job = self._executor.submit(self._write_all, self._queue)
        self._queue.put((content_hash, body))

    def settle(self) -> tuple[list[BlobWrite], OSError | None]:
        """Wait until every blob handed off is stored: what was written, and the disk's error if a
        write failed (the blobs after it were not written)."""
        job, self._job = self._job, None
        if job is None:
            return [], None
        self._queue.put(None)  # the end mark: the job returns once it has taken every blob before
        return job.result()

    def close(self) -> None:
        """End the job without waiting (a service that stops on an error): the executor's thread
        is then free to finish, so shutting it down cannot hang."""
        if self._job is not None:
            self._queue.put(None)
            self._job = None

    def _write_all(self, queue: SimpleQueue[Blob | None]) -> tuple[list[BlobWrite], OSError | None]:
        written = []
        failure: OSError | None = None
        while (blob := queue.get()) is not None:
            if failure is None:
                try:
                    written.append(self._blobs.put(*blob))
                except OSError as error:
                    failure = error  # what follows is taken, not written: the cycle stops
        return written, failure
