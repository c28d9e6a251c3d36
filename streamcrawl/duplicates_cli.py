"""`streamcrawl duplicates CRAWL_ID [--near] [--limit N] [--json]`: a crawl's pages that serve the
same body, or that say nearly the same.

Exact duplicates, as Nutch's dedup finds them by signature and site audits report them (Screaming
Frog's "exact duplicates"): URLs whose latest fetch (a 2xx, or a recrawl that found it unchanged)
got the same body, by its sha256. They are a site's canonicalisation faults, which the crawl
fetched, stored and ranked twice: a page reachable with and without a parameter, by two paths,
on http and https, or an error page served with a 200.

Memory grows with the crawl in compact arrays, not in strings: a first read of `outcomes` keeps
24 bytes a fetch (the URL's 64-bit fingerprint, the time, the body hash's first 64 bits), finds
each URL's latest fetch and the hashes two URLs or more share; a second read collects the URLs of
those hashes only. `outcomes` holds 7 days of fetches by default; older ones are not seen. The
`--limit` largest groups are listed.

Near duplicates (``--near``, Screaming Frog's "near duplicates") are pages whose main texts share
``--similarity`` of their word 3-shingles or more (0.9 by default), by the MinHash signatures the
parser puts on `links` for a crawl with ``find_near_duplicates`` (`parser.minhash`), grouped by
`streamcrawl.near_duplicates`. As in site audits, only indexable pages count: a 2xx page that
neither asks not to be indexed nor names another URL as its canonical (such a page already told
search engines which copy counts). The same two passes keep 272 bytes a fetch: the URL's
fingerprint, the time and the signature; 1,000,000 fetches take 272 MB.
"""

from __future__ import annotations

import argparse
import base64
import json
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import mmh3
import numpy as np

from schemas import links, outcomes
from schemas.base import InternalModel
from schemas.links import PageMeta
from schemas.outcomes import FetchOutcome
from streamcrawl.console import counted, note, say
from streamcrawl.kafka import crawl_records_to_end
from streamcrawl.near_duplicates import SIGNATURE_SIZE, near_groups, similarities
from streamcrawl.settings import Settings
from streamcrawl.status import require_broker
from streamcrawl.topics import topic_name

DEFAULT_LIMIT = 50
DEFAULT_SIMILARITY = 0.9
_WITH_BODY = ("done", "unchanged")
_UNSIGNED = bytes(SIGNATURE_SIZE * 4)


class SignedPage(InternalModel):
    """What ``--near`` reads of a PageLinks (its edges are left unread)."""

    crawl_id: str
    from_url: str
    fetched_at: int
    part: int = 0
    page: PageMeta | None = None

    def signature(self) -> bytes | None:
        """The raw signature of an indexable page's main text, if the parser signed it."""
        page = self.page
        if page is None or page.text_minhash is None or not 200 <= page.status < 300:
            return None
        if page.noindex or page.canonical not in (None, self.from_url):
            return None
        try:
            raw = base64.b64decode(page.text_minhash, validate=True)
        except ValueError:
            return None
        return raw if len(raw) == len(_UNSIGNED) else None


@dataclass(frozen=True)
class NearDuplicateGroup:
    """URLs whose latest main texts are nearly alike, each with its estimated similarity to the
    first."""

    urls: list[str]
    similarities: list[float]

    def lines(self) -> list[str]:
        return [
            f"{len(self.urls)} URLs nearly alike",
            *(
                f"  {similarity:4.0%}  {url}"
                for url, similarity in zip(self.urls, self.similarities, strict=True)
            ),
        ]

    def as_json(self) -> dict[str, Any]:
        return {"urls": self.urls, "similarity": self.similarities}


@dataclass(frozen=True)
class DuplicateGroup:
    """URLs whose latest fetch got the same body."""

    sha256: str
    urls: list[str]

    def lines(self) -> list[str]:
        return [f"{len(self.urls)} URLs, sha256 {self.sha256[:16]}", *(f"  {u}" for u in self.urls)]

    def as_json(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "urls": self.urls}


def add_command(commands: Any) -> None:
    parser = commands.add_parser(
        "duplicates", help="a crawl's pages that serve the same body (exact duplicates)"
    )
    parser.add_argument("crawl_id", metavar="CRAWL_ID", help="the crawl (see streamcrawl crawls)")
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help="the N largest groups (default: %(default)s)",
    )
    parser.add_argument(
        "--near",
        action="store_true",
        help="pages whose main texts are nearly alike (a crawl with --near-duplicates)",
    )
    parser.add_argument(
        "--similarity",
        type=_similarity,
        default=DEFAULT_SIMILARITY,
        metavar="S",
        help="with --near: the least share of the text two pages have in common, 0.5-1 "
        "(default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per group")
    parser.set_defaults(run=cmd_duplicates)


def _similarity(text: str) -> float:
    value = float(text)
    if not 0.5 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a similarity is between 0.5 and 1, not {text}")
    return value


def cmd_duplicates(args: argparse.Namespace, settings: Settings) -> int:
    require_broker(settings)
    if args.near:
        return _near(args, settings)
    topic = topic_name(settings, outcomes.TOPIC)

    def read() -> Iterable[FetchOutcome]:
        return crawl_records_to_end(settings, topic, FetchOutcome, args.crawl_id)

    groups = duplicate_groups(read)
    _show(groups[: max(args.limit, 0)], args.json)
    note(summary(groups, args.crawl_id))
    return 0


def _show(groups: Sequence[DuplicateGroup | NearDuplicateGroup], as_json: bool) -> None:
    for group in groups:
        if as_json:
            say(json.dumps(group.as_json()))
        else:
            for line in group.lines():
                say(line)


def duplicate_groups(read: Callable[[], Iterable[FetchOutcome]]) -> list[DuplicateGroup]:
    """The groups, the largest first (then by first URL); ``read`` gives the crawl's outcomes
    and is called twice."""
    latest = _latest_shared(read())
    if not latest:
        return []
    by_hash: dict[str, list[str]] = {}
    for outcome in read():
        prefix = _prefix(outcome)
        if prefix is None:
            continue
        if latest.get(_fingerprint(outcome.url)) == (outcome.fetched_at, prefix):
            urls = by_hash.setdefault(outcome.content_hash or "", [])
            if outcome.url not in urls:  # two fetches of one URL in the same millisecond
                urls.append(outcome.url)
    groups = [DuplicateGroup(h, sorted(urls)) for h, urls in by_hash.items() if len(urls) > 1]
    return sorted(groups, key=lambda group: (-len(group.urls), group.urls[0]))


def _latest_shared(fetches: Iterable[FetchOutcome]) -> dict[int, tuple[int, int]]:
    """URL fingerprint -> (time, hash prefix) of its latest fetch, for the URLs whose latest body
    another URL's latest body shares."""
    urls, times, hashes = array("Q"), array("q"), array("Q")
    for outcome in fetches:
        prefix = _prefix(outcome)
        if prefix is not None:
            urls.append(_fingerprint(outcome.url))
            times.append(outcome.fetched_at)
            hashes.append(prefix)
    if not urls:
        return {}
    url_of = np.frombuffer(urls, dtype=np.uint64)
    time_of = np.frombuffer(times, dtype=np.int64)
    hash_of = np.frombuffer(hashes, dtype=np.uint64)
    order = np.lexsort((time_of, url_of))
    url_of, time_of, hash_of = url_of[order], time_of[order], hash_of[order]
    last = np.append(url_of[1:] != url_of[:-1], True)  # each URL's latest fetch
    url_of, time_of, hash_of = url_of[last], time_of[last], hash_of[last]
    values, counts = np.unique(hash_of, return_counts=True)
    shared = np.isin(hash_of, values[counts > 1])
    return {
        int(url): (int(time), int(prefix))
        for url, time, prefix in zip(url_of[shared], time_of[shared], hash_of[shared], strict=True)
    }


def _fingerprint(url: str) -> int:
    return int(mmh3.hash64(url, signed=False)[0])


def _prefix(outcome: FetchOutcome) -> int | None:
    """The first 64 bits of the body's sha256, when the fetch got a body and says its hash."""
    if outcome.kind not in _WITH_BODY or not outcome.content_hash:
        return None
    try:
        return int(outcome.content_hash[:16], 16)
    except ValueError:
        return None


def summary(groups: list[DuplicateGroup], crawl_id: str) -> str:
    if not groups:
        return f"no duplicate pages in crawl {crawl_id}"
    urls = sum(len(group.urls) for group in groups)
    return (
        f"{counted(len(groups), 'group')} of duplicate pages in crawl {crawl_id}: {urls} URLs "
        f"serve {counted(len(groups), 'body', 'bodies')}, "
        f"{counted(urls - len(groups), 'copy', 'copies')} among them"
    )


def _near(args: argparse.Namespace, settings: Settings) -> int:
    topic = topic_name(settings, links.TOPIC)

    def read() -> Iterable[SignedPage]:
        return crawl_records_to_end(settings, topic, SignedPage, args.crawl_id)

    groups, signed = near_duplicate_groups(read, args.similarity)
    _show(groups[: max(args.limit, 0)], args.json)
    note(near_summary(groups, signed, args.crawl_id, args.similarity))
    return 0


def near_duplicate_groups(
    read: Callable[[], Iterable[SignedPage]], similarity: float
) -> tuple[list[NearDuplicateGroup], int]:
    """The groups (URLs in order, each with its similarity to the first), the largest first,
    and how many URLs were signed when last fetched; ``read`` gives the crawl's pages and is
    called twice (the second time only when there are groups)."""
    fingerprints, signatures = _latest_signed(read())
    found = near_groups(signatures, similarity)
    if not found:
        return [], len(fingerprints)
    wanted = {int(fingerprints[row]) for rows in found for row in rows}
    url_of: dict[int, str] = {}
    for page in read():
        fingerprint = _fingerprint(page.from_url)
        if fingerprint in wanted:
            url_of.setdefault(fingerprint, page.from_url)
    groups = []
    for group in found:
        rows = sorted(group, key=lambda row: url_of.get(int(fingerprints[row]), ""))
        urls = [url_of.get(int(fingerprints[row]), "?") for row in rows]
        groups.append(NearDuplicateGroup(urls, similarities(signatures, rows)))
    return sorted(groups, key=lambda group: (-len(group.urls), group.urls[0])), len(fingerprints)


def _latest_signed(pages: Iterable[SignedPage]) -> tuple[np.ndarray, np.ndarray]:
    """The fingerprints of the URLs whose latest fetch is signed, and those signatures (one
    row each)."""
    urls, times, raw = array("Q"), array("q"), bytearray()
    for page in pages:
        if page.part != 0 or page.page is None:
            continue
        urls.append(_fingerprint(page.from_url))
        times.append(page.fetched_at)
        raw += page.signature() or _UNSIGNED
    if not urls:
        return np.zeros(0, dtype=np.uint64), np.zeros((0, SIGNATURE_SIZE), dtype=np.uint32)
    url_of = np.frombuffer(urls, dtype=np.uint64)
    time_of = np.frombuffer(times, dtype=np.int64)
    rows = np.frombuffer(bytes(raw), dtype="<u4").reshape(-1, SIGNATURE_SIZE)
    order = np.lexsort((time_of, url_of))
    latest = order[np.append(url_of[order][1:] != url_of[order][:-1], True)]
    # An unsigned fetch is a row of zeros; a signature is one by a chance of 2**-2048.
    latest = latest[(rows[latest] != 0).any(axis=1)]
    return url_of[latest], rows[latest]


def near_summary(
    groups: list[NearDuplicateGroup], signed: int, crawl_id: str, similarity: float
) -> str:
    if not signed:
        return (
            f"no page of crawl {crawl_id} has a signed main text: crawl with --near-duplicates "
            "(pages of fewer than 20 words, not 2xx, noindex or canonicalised elsewhere are "
            "never compared)"
        )
    if not groups:
        return f"no near-duplicate pages among {counted(signed, 'signed page')} of crawl {crawl_id}"
    urls = sum(len(group.urls) for group in groups)
    return (
        f"{counted(len(groups), 'group')} of near-duplicate pages in crawl {crawl_id}: "
        f"{urls} of {counted(signed, 'signed page')} share {similarity:.0%} of their main text "
        "or more with another"
    )
