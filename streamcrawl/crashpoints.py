"""Named places where a test can make a process die, instead of killing it after a sleep.

`STREAMCRAWL_CRASH_AT=after_delivery` makes the process exit abruptly (no cleanup, no flush, as
`kill -9` would) the first time it reaches that point; `after_delivery:3` the third time. Fault
tests use these to stop a service at each step of the processing cycle and check nothing is lost.
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger(__name__)

CRASH_EXIT_CODE = 86
POINTS = (
    "after_produce",
    "after_delivery",
    "after_offset_store",
    "after_state_write",
)


class CrashPoints:
    """Dies at the configured point; does nothing when none is configured."""

    def __init__(self, spec: str | None) -> None:
        self._name: str | None = None
        self._remaining = 0
        if spec:
            name, _, nth = spec.partition(":")
            self._name = name
            self._remaining = int(nth) if nth else 1

    def reached(self, name: str) -> None:
        if name != self._name:
            return
        self._remaining -= 1
        if self._remaining > 0:
            return
        log.warning("crash point %s reached: exiting with %d", name, CRASH_EXIT_CODE)
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
