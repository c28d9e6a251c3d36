"""The storage's own metrics (names from the shared contract; no URL or host labels)."""

from __future__ import annotations

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
