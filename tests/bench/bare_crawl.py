"""The bare baseline of the end-to-end benchmark: one process, aiohttp and parsel, no Kafka.

A breadth-first crawl of the site from its seed: a pool of ``--concurrency`` workers takes URLs
from a queue, GETs each with one aiohttp ClientSession, extracts every ``a[href]`` with parsel,
resolves it with ``urljoin``, drops the fragment and the query (the site's only queries are
tracking parameters), and queues the URLs it has not seen (a set) that
are in ``--allow`` (a file of URLs, one a line: the ground truth's fetched set, so both runs fetch
the same pages; the pipeline decides the same thing with robots.txt, rel=nofollow, scope and trap
rules). No robots.txt, no politeness, no canonical form beyond that, no parse of anything else:
the least a crawler does per page. It prints one JSON line: pages, wall seconds
from the first request to the last response, CPU seconds and peak RSS of this process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from pathlib import Path
from urllib.parse import urldefrag, urljoin

import aiohttp
from parsel import Selector


async def crawl(seed: str, allowed: set[str], concurrency: int) -> tuple[int, float]:
    seen = {seed}
    queue: asyncio.Queue[str] = asyncio.Queue()
    queue.put_nowait(seed)
    pages = 0
    first: float | None = None
    last = 0.0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal pages, first, last
            while True:
                url = await queue.get()
                try:
                    first = first or time.monotonic()
                    async with session.get(url, allow_redirects=False) as response:
                        body = await response.text()
                        status = response.status
                        location = response.headers.get("Location")
                    pages += 1
                    last = time.monotonic()
                    links = (
                        Selector(text=body).css("a::attr(href)").getall() if status == 200 else []
                    )
                    if location:
                        links.append(location)
                    for href in links:
                        target = urldefrag(urljoin(url, href)).url.partition("?")[0]
                        if target not in seen and target in allowed:
                            seen.add(target)
                            queue.put_nowait(target)
                finally:
                    queue.task_done()

        workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
        await queue.join()
        for task in workers:
            task.cancel()
    return pages, last - (first or last)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("seed")
    parser.add_argument("--allow", type=Path, required=True, help="the URLs to fetch, one a line")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    allowed = set(args.allow.read_text().split())
    pages, wall_s = asyncio.run(crawl(args.seed, allowed, args.concurrency))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result = {
        "pages": pages,
        "wall_s": wall_s,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mib": usage.ru_maxrss / 1024,
    }
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
