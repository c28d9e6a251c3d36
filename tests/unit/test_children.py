"""A child started through `streamcrawl.children` stops when its parent dies without stopping it,
and a child of a live parent runs on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from streamcrawl.children import stopped_with_this_process
from tests.support import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")

PARENT = textwrap.dedent(
    """
    import signal, subprocess, sys, time
    from streamcrawl.children import stopped_with_this_process
    child = [sys.executable, "-c", "import time; time.sleep(120)"]
    process = subprocess.Popen(stopped_with_this_process(child), start_new_session=True)
    print(process.pid, flush=True)
    time.sleep(120)
    """
)


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for whoever adopted it to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_the_command_runs_as_itself_under_the_same_pid() -> None:
    command = stopped_with_this_process([sys.executable, "-c", "import os; print(os.getpid())"])
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0 and int(out) == process.pid


def test_a_child_stops_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        wait_for(lambda: "time.sleep(120)" in _cmdline(child), 30, "the child's exec")
        assert _running(child), "it runs while its parent lives"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(30)
        wait_for(lambda: not _running(child), 30, "the child's stop")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(30)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""
