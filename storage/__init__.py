"""The storage service (DESIGN.md sections 1 and 3).

WARC files, content-addressed blobs, page history and change detection.
"""
