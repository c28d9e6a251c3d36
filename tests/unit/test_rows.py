"""`Batch.produce_rows`' messages: three columns of one length, read back as (key, value,
partition) triples in order."""

from __future__ import annotations

import pytest

from streamcrawl.batch import Rows


def test_rows_are_read_back_as_triples_in_order() -> None:
    rows = Rows(["a", b"b", None], [b"1", None, b"3"], [0, None, 2])
    assert list(rows) == [("a", b"1", 0), (b"b", None, None), (None, b"3", 2)]
    assert len(rows) == 3


def test_rows_without_partitions_are_placed_by_their_keys() -> None:
    assert list(Rows(["a", "b"], [b"1", b"2"])) == [("a", b"1", None), ("b", b"2", None)]
    assert not Rows([], [])


@pytest.mark.parametrize(
    ("keys", "values", "partitions"),
    [(["a"], [], None), (["a"], [b"1"], [0, 1]), ([], [b"1"], [])],
)
def test_columns_of_unequal_lengths_are_refused(
    keys: list[str], values: list[bytes], partitions: list[int | None] | None
) -> None:
    with pytest.raises(ValueError, match="unequal lengths"):
        Rows(keys, values, partitions)
