"""Deferred work ends once: the first of `finish` and `abandon` wins, from any thread."""

import threading

import pytest

from streamcrawl.handler import Deferred


def test_finish_then_abandon_ends_once_with_the_outputs() -> None:
    ended: list[Deferred] = []
    deferred = Deferred(("pages", 0, 7), ended.append)
    deferred.produce("pages", "k", b"v")
    deferred.finish()
    deferred.abandon()
    deferred.finish()
    assert ended == [deferred]
    assert not deferred.abandoned and len(deferred.outputs) == 1
    with pytest.raises(RuntimeError, match="produce after finish"):
        deferred.produce("pages", "k", b"again")


def test_abandon_drops_the_outputs_and_a_later_finish_is_ignored() -> None:
    ended: list[Deferred] = []
    deferred = Deferred(("pages", 0, 8), ended.append)
    deferred.produce("pages", "k", b"v")
    deferred.abandon()
    deferred.finish()
    assert ended == [deferred]
    assert deferred.abandoned and deferred.outputs == []


def test_racing_threads_end_each_deferred_once() -> None:
    ended: list[Deferred] = []
    deferreds = [Deferred(("pages", 0, n), ended.append) for n in range(2_000)]
    start = threading.Barrier(2)

    def end_all(end: str) -> None:
        start.wait()
        for deferred in deferreds:
            getattr(deferred, end)()

    threads = [threading.Thread(target=end_all, args=(end,)) for end in ("finish", "abandon")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(ended) == len(deferreds) and {id(d) for d in ended} == {id(d) for d in deferreds}
