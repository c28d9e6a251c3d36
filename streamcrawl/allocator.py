"""Giving freed memory back to the system, every few seconds, in every service (`run_service`).

glibc's malloc keeps what a process frees for its own reuse. A service churns through large
blocks (RocksDB's memtable arena blocks and compaction buffers, a cycle's lists, dicts and
bodies) among long-lived objects, and the freed blocks stay resident in the gaps, so RSS grows
with the most the process ever held at once rather than with what it holds: the frontier
benchmark's RSS rose steadily from 185 to 278 MiB over 5 M URLs while its memtables and block
cache stayed at 43-55 MiB (tests/bench/bench_frontier.py). `give_back_free_memory`
(``malloc_trim``) returns the free pages of every arena; the service loop calls it every
`GIVE_BACK_EVERY_S`. In that benchmark the frontier's RSS at 5 M then fell from 255-259 to 191-196
MiB at the same CPU (admission 0.52-0.54 of the bare rate against 0.52-0.57 before; every second
instead of every five made no difference to either); the peak within a cycle stays. Fixing
glibc's mapping threshold instead (``M_MMAP_THRESHOLD``, 128 KiB or 1 MiB) lowered RSS too but
cost the frontier a fifth more CPU, a mapping and its page faults for every large block. Other C
libraries are left as they are.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
import time
from collections.abc import Callable

GIVE_BACK_EVERY_S = 5.0
"""How often a service returns free memory: a call walks the heap (10 ms for 300 MiB freed among
long-lived blocks, 0.1 ms with nothing to return)."""


class GiveBack:
    """`give_back_free_memory` at most every `GIVE_BACK_EVERY_S`: a loop calls `when_due` each
    cycle (the first call gives back at once)."""

    def __init__(self) -> None:
        self._last = -math.inf

    def when_due(self) -> None:
        now = time.monotonic()
        if now - self._last > GIVE_BACK_EVERY_S:
            give_back_free_memory()
            self._last = now


def give_back_free_memory() -> bool:
    """Return the free pages of glibc's heaps to the system; False where the C library is not
    glibc (nothing done) or nothing could be returned."""
    trim = _glibc_malloc_trim()
    return trim is not None and trim(0) == 1


@functools.cache
def _glibc_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name)
    if not hasattr(libc, "gnu_get_libc_version"):
        return None  # musl and others
    malloc_trim = libc.malloc_trim
    malloc_trim.argtypes = (ctypes.c_size_t,)
    malloc_trim.restype = ctypes.c_int
    function: Callable[[int], int] = malloc_trim
    return function
