"""Giving freed memory back to the system, as every service loop does every few seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streamcrawl.allocator import _glibc_malloc_trim

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import sys
from streamcrawl.allocator import give_back_free_memory


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


big = bytearray(4 << 20)
del big  # glibc now serves blocks under 4 MiB from its heap, and keeps them when freed
kept = []
before = rss()
for _ in range(10):
    blocks = [bytearray(1 << 20) for _ in range(32)]  # 32 MiB in 1 MiB blocks, as memtables are
    kept.append(bytearray(4096))  # allocated after them: the heap's top stays in use
    del blocks
if sys.argv[1] == "give back" and not give_back_free_memory():
    raise SystemExit("malloc_trim returned nothing")
print((rss() - before) >> 20)
"""


def retained_mib(mode: str) -> int:
    """MiB still resident after a fresh interpreter freed 32 MiB of 1 MiB blocks ten times."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return int(done.stdout.strip())


@pytest.mark.skipif(_glibc_malloc_trim() is None, reason="malloc_trim is glibc's")
def test_freed_blocks_go_back_to_the_system() -> None:
    assert retained_mib("keep") >= 16, "the probe no longer shows glibc keeping freed blocks"
    assert retained_mib("give back") <= 2
