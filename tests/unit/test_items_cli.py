"""`streamcrawl items`: the JSON lines and the CSV table of a crawl's items."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter

from schemas.items import ExtractedItem
from streamcrawl.items_cli import CsvItems, JsonItems, summary_line

ITEMS = [
    ExtractedItem(
        crawl_id="shop",
        url="https://shop.example/product/1",
        fetched_at=1,
        status=200,
        fields={"name": ["Kettle"], "tags": ["blue", "steel"]},
    ),
    ExtractedItem(
        crawl_id="shop",
        url="https://shop.example/product/2",
        fetched_at=2,
        status=200,
        fields={"name": ["Pot, large"], "tags": []},
        truncated=True,
    ),
]


def test_json_lines_hold_each_item_whole() -> None:
    output = io.StringIO()
    writer = JsonItems(output)
    for item in ITEMS:
        writer.write(item)
    lines = [json.loads(line) for line in output.getvalue().splitlines()]
    assert [ExtractedItem.model_validate(line) for line in lines] == ITEMS
    assert writer.counts == Counter({"complete": 1, "partial": 1})


def test_the_csv_has_a_column_a_field_and_joins_several_values_with_commas() -> None:
    output = io.StringIO()
    writer = CsvItems(output)
    for item in ITEMS:
        writer.write(item)
    rows = list(csv.reader(io.StringIO(output.getvalue())))
    assert rows == [
        ["url", "fetched_at", "status", "name", "tags", "truncated"],
        ["https://shop.example/product/1", "1", "200", "Kettle", "blue,steel", "False"],
        ["https://shop.example/product/2", "2", "200", "Pot, large", "", "True"],
    ]
    assert summary_line("shop", writer.counts) == (
        "2 items of crawl shop; fields matched: complete: 1, partial: 1, empty: 0"
    )
