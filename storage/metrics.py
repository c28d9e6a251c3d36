"""The storage's own metrics (names from the shared contract; no URL or host labels).

The handler counts into a `StorageCounts` of plain integers and publishes them to the counters
once per loop cycle (from `on_tick`, before the cycle commits): four counter increments per page,
each taking the counter's lock, cost about as much as a WARC header field at 20 KB pages.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from prometheus_client import Counter

PAGES_STORED = Counter(
    "streamcrawl_storage_pages_stored", "Fetches stored as a new version (new or changed content)"
)
PAGES_UNCHANGED = Counter(
    "streamcrawl_storage_pages_unchanged", "Fetches whose content equals the latest version's"
)
BYTES_WRITTEN = Counter(
    "streamcrawl_storage_bytes_written", "Compressed bytes written to blobs and WARC files"
)
BLOBS_WRITTEN = Counter("streamcrawl_storage_blobs_written", "Blobs written (distinct new bodies)")
REDELIVERED = Counter(
    "streamcrawl_storage_pages_redelivered", "Pages seen again (redelivery) that changed nothing"
)
REVISITS_UNMATCHED = Counter(
    "streamcrawl_storage_revisits_unmatched",
    "Bodiless revisit pages of content the index does not hold as the URL's latest version",
)


@dataclass(slots=True)
class StorageCounts:
    """What the handler did since the last `publish`, one field per counter."""

    pages_stored: int = 0
    pages_unchanged: int = 0
    bytes_written: int = 0
    blobs_written: int = 0
    redelivered: int = 0
    revisits_unmatched: int = 0

    def publish(self) -> None:
        """Add the counts to the counters and start again from zero."""
        for field in fields(self):
            count = getattr(self, field.name)
            if count:
                _COUNTERS[field.name].inc(count)
                setattr(self, field.name, 0)


_COUNTERS = {
    "pages_stored": PAGES_STORED,
    "pages_unchanged": PAGES_UNCHANGED,
    "bytes_written": BYTES_WRITTEN,
    "blobs_written": BLOBS_WRITTEN,
    "redelivered": REDELIVERED,
    "revisits_unmatched": REVISITS_UNMATCHED,
}
