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
partition is moved over some ticks and no transaction holds all of it; each batch starts where the
last one stopped (kept in memory), not at the start of a table full of the moved entries'
tombstones, which a seek would step over again on every tick.
"""

from __future__ import annotations

from frontier.queues import QueuedUrl, host_of, host_prefix, is_legacy_key, upgraded_key
from frontier.records import QUEUE, SEPARATOR, SHELVED
from frontier.session import PartitionSession
from schemas.canonical import url_fingerprint


def upgrade(session: PartitionSession) -> None:
    """Tick: move up to ``timer_batch`` entries of what memory says is left."""
    memory = session.memory
    left = session.config.timer_batch
    if memory.legacy_shelved is not None:
        left -= _unshelve(session, memory.legacy_shelved, left)
    for host, start in memory.legacy_hosts.items():  # changed only when the session finishes
        if left <= 0:
            return
        left -= _move_host(session, host, start, left)


def _move_host(session: PartitionSession, host: str, start: bytes, limit: int) -> int:
    """Move up to ``limit`` legacy entries of the host (they sort before every other entry of
    it), from ``start``; the host is done when fewer were left."""
    queue = session.table(QUEUE)
    moved = 0
    for key, raw in queue.scan(host_prefix(host), start):
        if not is_legacy_key(key):
            break
        if moved == limit:
            session.legacy_moving(host, key)
            return moved
        queue.delete(key)
        _requeue(session, key, QueuedUrl.decode(raw), raw)
        moved += 1
    session.legacy_moved(host)
    return moved


def _unshelve(session: PartitionSession, start: bytes, limit: int) -> int:
    """Put up to ``limit`` shelved entries back in their queues, from ``start``."""
    shelved = session.table(SHELVED)
    moved = 0
    for key, raw in shelved.scan(b"", start):
        if moved == limit:
            session.unshelving(key)
            return moved
        shelved.delete(key)
        old_key = key.split(SEPARATOR, 1)[1]
        _requeue(session, old_key, QueuedUrl.decode(raw), raw)
        session.queued(host_of(old_key))  # a shelved URL was out of its host's count
        moved += 1
    session.unshelving(None)
    return moved


def _requeue(session: PartitionSession, old_key: bytes, entry: QueuedUrl, raw: bytes) -> None:
    key = upgraded_key(old_key, entry.crawl_id)
    session.table(QUEUE).put(key, raw)
    fingerprint = url_fingerprint(entry.url)
    visited = session.visited(entry.crawl_id, fingerprint)
    if visited is not None and visited.queue_key == old_key.hex():
        visited.queue_key = key.hex()
        session.put_visited(entry.crawl_id, fingerprint, visited)
