"""Serve a generated site from a process of its own: `python -m streamcrawl.testsite`.

The end-to-end tests and the benchmark run the site here rather than on a thread of the test
process, so the arrival times the site records are not delayed by the test's own Python work
(the GIL) and the site's CPU is not counted as the crawler's. The process prints the hosts' ports
as one JSON line, appends every request to ``--log`` as it arrives (monotonic time, host, status,
path; CLOCK_MONOTONIC is shared by every process of the machine) and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path

from streamcrawl.testsite.graph import generate_site
from streamcrawl.testsite.server import SiteServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamcrawl.testsite", description=__doc__)
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--levels", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log", type=Path, default=None, help="append each request here")
    parser.add_argument(
        "--nice",
        type=int,
        default=0,
        help="lower (negative) or raise this process's niceness where permitted, so a loaded "
        "machine delays the site's clock less than the crawler it measures",
    )
    parser.add_argument("--prerender", action="store_true", help="render every page first")
    args = parser.parse_args(argv)
    if args.nice:
        with contextlib.suppress(PermissionError):
            os.nice(args.nice)
    graph = generate_site(args.pages, hosts=args.hosts, levels=args.levels, seed=args.seed)
    log = args.log.open("a", buffering=1) if args.log else None
    server = SiteServer(graph, request_log=log, prerender=args.prerender)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    with server:
        sys.stdout.write(json.dumps({"ports": server.site.ports}) + "\n")
        sys.stdout.flush()
        stopped.wait()
    if log is not None:
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
