"""The storage service as a process on a real broker: pages in, blobs, WARC files and the index
out, read back through the page API, from one instance and from either of two."""

from __future__ import annotations

import hashlib
import json
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from storage.warcfiles import iter_members, record_head, warc_files
from streamcrawl import cli
from tests.integration.storage_support import (
    StorageDeployment,
    fetched,
    get,
    get_json,
    page_body,
    wait_stored,
    warc_records,
)
from tests.support import wait_for

pytestmark = pytest.mark.kafka


@pytest.fixture
def storage(kafka_bootstrap: str, tmp_path: Path) -> Iterator[StorageDeployment]:
    deployment = StorageDeployment(kafka_bootstrap, tmp_path)
    yield deployment
    deployment.stop()


def warcinfo_bytes(root: Path) -> int:
    """Bytes of the warcinfo records heading each file (not counted as page bytes)."""
    total = 0
    for path in warc_files(root):
        with path.open("rb") as handle:
            total += sum(
                m.length
                for m in iter_members(handle)
                if record_head(m.data).record_type == "warcinfo"
            )
    return total


def metric(address: str, name: str) -> float:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def test_pages_through_the_broker_are_stored_and_served(
    storage: StorageDeployment,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
    tmp_path: Path,
) -> None:
    storage.start()
    [address] = storage.api_addresses(1)
    urls = [f"http://site.test/p{i}" for i in range(12)]
    first = [(fetched(u, page_body(i), 1_000 + i), page_body(i)) for i, u in enumerate(urls)]
    storage.produce(first)
    for page, _ in first:
        wait_stored(address, page.url, page.sha256)
    # A recrawl: p0 unchanged, p1 changed.
    again = [
        (fetched(urls[0], page_body(0), 5_000), page_body(0)),
        (fetched(urls[1], page_body(1, 1), 5_001), page_body(1, 1)),
    ]
    storage.produce(again)
    wait_stored(address, urls[1], again[1][0].sha256)
    wait_for(
        lambda: get_json(address, "/v1/page", url=urls[0])[1]["fetched_at"] == 5_000,
        60,
        "the unchanged fetch recorded",
    )
    _, latest = get_json(address, "/v1/page", url=urls[0])
    assert latest["first_fetched_at"] == 1_000 and latest["fetches"] == 2
    assert latest["content_hash"] == first[0][0].sha256

    status, history = get_json(address, "/v1/page/history", url=urls[1])
    assert status == 200
    assert [v["content_hash"] for v in history["history"]] == [
        hashlib.sha256(page_body(1)).hexdigest(),
        hashlib.sha256(page_body(1, 1)).hexdigest(),
    ]
    status, body, headers = get(address, "/v1/page/body", url=urls[1])
    assert status == 200 and body == page_body(1, 1)
    assert headers["X-Content-Hash"] == hashlib.sha256(page_body(1, 1)).hexdigest()
    old_hash = hashlib.sha256(page_body(1)).hexdigest()
    status, body, _ = get(address, "/v1/page/body", url=urls[1], content_hash=old_hash)
    assert status == 200 and body == page_body(1)
    assert get_json(address, "/v1/page", url="http://site.test/never")[0] == 404
    assert get_json(address, "/v1/page")[0] == 400

    records = warc_records(storage.storage_root)
    kinds = Counter(kind for kind, _, _ in records)
    assert kinds["response"] == 13 and kinds["revisit"] == 1 and kinds["request"] == 14
    assert len({record_id for _, _, record_id in records}) == len(records)
    status, listing = get_json(address, "/v1/storage/warcs", crawl_id="crawl-1")
    assert status == 200 and len(listing["files"]) >= 2  # rotated at 16 KiB
    assert all(f["path"].startswith("warc/crawl-1/") for f in listing["files"])
    blobs = list((storage.storage_root / "blobs").glob("*/*/*.zst"))
    assert len(blobs) == 13
    for blob in blobs:
        assert not blob.name.startswith(".")

    [member] = storage.members()
    assert metric(member.http_address, "streamcrawl_storage_pages_stored_total") == 13
    assert metric(member.http_address, "streamcrawl_storage_pages_unchanged_total") == 1
    assert metric(member.http_address, "streamcrawl_storage_blobs_written_total") == 13
    written = metric(member.http_address, "streamcrawl_storage_bytes_written_total")
    on_disk = sum(p.stat().st_size for p in warc_files(storage.storage_root)) + sum(
        p.stat().st_size for p in blobs
    )
    assert written == on_disk - warcinfo_bytes(storage.storage_root)

    for name, value in storage.env("cli").items():
        monkeypatch.setenv(name, value)
    check_the_cli(urls, capsysbinary, tmp_path)


def test_two_instances_each_serve_every_page(storage: StorageDeployment) -> None:
    storage.start("storage-a")
    storage.start("storage-b")
    addresses = storage.api_addresses(2)
    assert len(addresses) == 2
    pages = [
        (fetched(f"http://site.test/two/{i}", page_body(i), 2_000 + i), page_body(i))
        for i in range(20)
    ]
    storage.produce(pages)
    owners: Counter[str] = Counter()
    for page, body in pages:
        for address in addresses:
            # While the second instance's join moves partitions, the one a page is on answers
            # 503 (the partition is moving) until its new owner has restored it.
            wait_stored(address, page.url, page.sha256)
            status, document = get_json(address, "/v1/page", url=page.url)
            assert status == 200 and document["content_hash"] == page.sha256
            status, served, _ = get(address, "/v1/page/body", url=page.url)
            assert status == 200 and served == body
        owners[document["warc_file"].rsplit("-", 1)[-1]] += 1
    assert len(owners) == 2, "both instances stored pages: each holds one partition"
    records = warc_records(storage.storage_root)
    assert Counter(kind for kind, _, _ in records)["response"] == 20


def check_the_cli(
    urls: list[str], capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    """`streamcrawl page` and `streamcrawl storage` against the running instance and its root."""
    capsysbinary.readouterr()
    assert cli.main(["page", urls[1]]) == 0
    captured = capsysbinary.readouterr()
    assert captured.out == page_body(1, 1)
    assert b"content_hash: " + hashlib.sha256(page_body(1, 1)).hexdigest().encode() in captured.err
    assert cli.main(["page", urls[1], "--history", "--json"]) == 0
    history = json.loads(capsysbinary.readouterr().out)
    assert len(history["history"]) == 2
    assert cli.main(["page", urls[2], "--json"]) == 0
    document = json.loads(capsysbinary.readouterr().out)
    assert document["body"] == page_body(2).decode() and document["page"]["status"] == 200
    assert cli.main(["page", "http://site.test/never"]) == 1

    exported = tmp_path / "crawl.warc.gz"
    assert cli.main(["storage", "export", "crawl-1", "-o", str(exported)]) == 0
    with exported.open("rb") as handle:
        kinds = Counter(r.rec_type for r in ArchiveIterator(handle, check_digests="raise"))
    assert kinds == {"warcinfo": 1, "response": 13, "revisit": 1, "request": 14}
    assert cli.main(["storage", "verify"]) == 0
