"""Moving what an earlier version left in a partition to this version's layout, a batch per tick.

- Queue entries in the one queue per host of earlier versions (legacy keys, `frontier.queues`) move
  to their crawl's queue on the host, keeping their priority and sequence, so their order.
- Entries in `shelved` (earlier versions moved a paused crawl's queued URLs there) go back to their
  crawl's queue on their host, where this version leaves a paused crawl's URLs.

The URL's visited record follows its entry (its ``queue_key``). Memory learns what there is to move
when the partition is opened (`frontier.session.PartitionMemory.rebuild`). A host with legacy
entries is not released until they are all moved (`frontier.release`), then it is woken. A URL
leased before the upgrade keeps its old key in its visited record until it comes back to the queue
(`frontier.outcomes.requeue` moves the key). ``timer_batch`` entries are moved per tick, so a big
partition is moved over some ticks and no transaction holds all of it.
"""

from __future__ import annotations

from frontier.queues import QueuedUrl, host_of, host_prefix, is_legacy_key, upgraded_key
from frontier.records import QUEUE, SEPARATOR, SHELVED
from frontier.session import PartitionSession
from schemas.canonical import url_fingerprint


def upgrade(session: PartitionSession) -> None:
    """Tick: move up to ``timer_batch`` entries of what memory says is left."""
    left = session.config.timer_batch
    if session.memory.legacy_shelved:
        left -= _unshelve(session, left)
    for host in session.memory.legacy_hosts:  # changed only when the session finishes
        if left <= 0:
            return
        left -= _move_host(session, host, left)


def _move_host(session: PartitionSession, host: str, limit: int) -> int:
    """Move up to ``limit`` legacy entries of the host (they sort before every other entry of
    it); the host is done when fewer were left."""
    queue = session.table(QUEUE)
    moved = 0
    for key, raw in queue.scan(host_prefix(host)):
        if not is_legacy_key(key):
            break
        if moved == limit:
            return moved
        entry = QueuedUrl.decode(raw)
        queue.delete(key)
        _requeue(session, key, entry, raw)
        moved += 1
    session.legacy_moved(host)
    return moved


def _unshelve(session: PartitionSession, limit: int) -> int:
    """Put up to ``limit`` shelved entries back in their queues."""
    shelved = session.table(SHELVED)
    moved = 0
    for key, raw in shelved.scan():
        if moved == limit:
            return moved
        shelved.delete(key)
        old_key = key.split(SEPARATOR, 1)[1]
        _requeue(session, old_key, QueuedUrl.decode(raw), raw)
        session.queued(host_of(old_key))  # a shelved URL was out of its host's count
        moved += 1
    session.shelved_emptied()
    return moved


def _requeue(session: PartitionSession, old_key: bytes, entry: QueuedUrl, raw: bytes) -> None:
    key = upgraded_key(old_key, entry.crawl_id)
    session.table(QUEUE).put(key, raw)
    fingerprint = url_fingerprint(entry.url)
    visited = session.visited(entry.crawl_id, fingerprint)
    if visited is not None and visited.queue_key == old_key.hex():
        visited.queue_key = key.hex()
        session.put_visited(entry.crawl_id, fingerprint, visited)
