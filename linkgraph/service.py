"""Wires the link-graph handler into the kernel loop (`streamcrawl.service.run_service`)."""

from __future__ import annotations

import sys

from streamcrawl.stack import NOT_BUILT_EXIT

NOT_BUILT = "the linkgraph service is not built yet (issue 6); nothing was started"


def main() -> int:
    sys.stderr.write(f"streamcrawl: {NOT_BUILT}\n")
    return NOT_BUILT_EXIT
