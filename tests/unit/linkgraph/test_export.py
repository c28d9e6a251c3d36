"""The edge export's rows from `links.by-target` records: this version's values (ends in the key),
earlier ones (ends in the value), and a record the link graph would refuse, which is left out; and
the vertex export's rows from the same records' keys."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import orjson
from rocksdict import Options, Rdict

from linkgraph.export import EDGE_COLUMNS, VERTEX_COLUMNS, _edges, _vertices
from linkgraph.indexes import in_link_value, new_edge_value
from schemas.links import LinkEdge
from schemas.links_by_target import key


def test_rows_come_from_either_layout_and_a_refused_record_is_left_out(tmp_path: Path) -> None:
    edge = LinkEdge(
        to_url="https://t.example/",
        anchor_text='a, "b"',
        link_type="INTERNAL",
        rel=["ugc", "nofollow"],
        position="NAV",
        discovered_at=5,
    )
    record = new_edge_value(edge, 9)
    earlier = orjson.dumps({"v": 1, "from_url": "https://old.example/", "to_url": edge.to_url})
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    store = Rdict(str(tmp_path / "edges"), options=options)
    try:
        store[key(edge.to_url, "https://s.example/").encode()] = in_link_value(record)
        store[key(edge.to_url, "https://old.example/").encode()] = earlier[:-1] + b"," + record[1:]
        store[key(edge.to_url, "https://bad.example/").encode()] = b'{"v":1,"link_type":"NO"}'
        out = io.StringIO()
        assert _edges(store, csv.writer(out)) == 2
    finally:
        store.close()
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert list(rows[0]) == list(EDGE_COLUMNS)
    assert {row["src"] for row in rows} == {"https://s.example/", "https://old.example/"}
    for row in rows:
        assert (row["dst"], row["anchor_text"], row["position"], row["rel"]) == (
            edge.to_url,
            'a, "b"',
            "NAV",
            "ugc nofollow",
        )
        assert (row["discovered_at"], row["last_seen_at"], row["gone"]) == ("5", "9", "false")


def test_vertices_are_every_end_once_with_its_host_and_registered_domain(tmp_path: Path) -> None:
    """GraphFrames' vertex list: a header, an `id` column, one row per URL at either end."""
    blog, shop, partner = (
        "https://blog.example.co.uk/post",
        "https://www.example.com/",
        "https://partner.example.org/a",
    )
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    store = Rdict(str(tmp_path / "edges"), options=options)
    try:
        for to_url, from_url in ((shop, blog), (shop, partner), (blog, partner)):
            store[key(to_url, from_url).encode()] = b"{}"  # vertices come from the keys alone
        out = io.StringIO()
        assert _vertices(store, csv.writer(out), tmp_path) == 3
    finally:
        store.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == ",".join(VERTEX_COLUMNS) == "id,host,registered_domain"
    assert sorted(csv.DictReader(io.StringIO(out.getvalue())), key=lambda row: row["id"]) == [
        {"id": blog, "host": "blog.example.co.uk", "registered_domain": "example.co.uk"},
        {"id": partner, "host": "partner.example.org", "registered_domain": "example.org"},
        {"id": shop, "host": "www.example.com", "registered_domain": "example.com"},
    ]
