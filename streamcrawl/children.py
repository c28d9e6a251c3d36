"""Child processes that stop when the process that started them is gone.

`up`, `demo` and the tests start services, the local broker and the test site in sessions of
their own, so a Ctrl-C reaches them only through their parent's orderly stop. The same made them
outlive a parent that died without stopping them (`kill -9`, the out-of-memory killer, a crash, a
closed terminal): a whole stack went on running with nothing left to stop it.

On Linux each such child is started through this module: ``python -m streamcrawl.children PID
COMMAND...`` asks the kernel for SIGTERM when its parent goes (``PR_SET_PDEATHSIG``, which
survives the exec), checks the parent is still PID, then becomes COMMAND. The child then stops as
on a Ctrl-C of its parent: the services drain, the broker shuts down cleanly. The request is made
in a process of its own, not in a `preexec_fn` between fork and exec of a parent with threads.
The signal comes when the *thread* that started the child ends, so children are started from the
thread that owns them (the main one, for `up` and `demo`). Elsewhere the command runs as it is.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def stopped_with_this_process(command: list[str]) -> list[str]:
    """`command`, started so that it gets SIGTERM when this process (thread) ends."""
    if not sys.platform.startswith("linux"):
        return command
    return [sys.executable, "-m", "streamcrawl.children", str(os.getpid()), *command]


def main(argv: list[str]) -> int:
    parent, command = int(argv[0]), argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM)) != 0:
        sys.stderr.write(f"streamcrawl.children: prctl failed: {os.strerror(ctypes.get_errno())}\n")
        return 1
    if os.getppid() != parent:  # the parent was gone before the request took effect
        return 1
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
