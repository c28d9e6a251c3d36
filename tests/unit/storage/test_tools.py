"""`storage export` and `storage verify` over a storage root written by real handlers."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from storage.blobs import blob_path
from storage.tools import export_crawl, main, verify_root
from storage.warcfiles import iter_members, record_head
from tests.unit.storage.archive import Archive, make_page


def body(i: int) -> bytes:
    return f"<html>page {i} ".encode() + hashlib.sha256(str(i).encode()).hexdigest().encode() * 40


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[Archive]:
    built = Archive(tmp_path / "root", tmp_path / "state")
    yield built
    built.close()


def exported(path: Path) -> list[tuple[str, str | None, str]]:
    with path.open("rb") as handle:
        return [
            (
                r.rec_type,
                r.rec_headers.get_header("WARC-Target-URI"),
                r.rec_headers.get_header("WARC-Record-ID"),
            )
            for r in ArchiveIterator(handle, check_digests="raise")
        ]


def test_export_writes_one_warc_of_a_crawl_without_duplicates_or_torn_tails(
    archive: Archive, tmp_path: Path
) -> None:
    pages = [make_page(f"https://a.test/{i}", body(i), 1_000 + i) for i in range(5)]
    for page, i in zip(pages, range(5), strict=True):
        archive.deliver(page, body(i))
    archive.deliver(make_page("https://b.test/", body(9), crawl_id="other"), body(9))
    # The same page redelivered to another instance after a rebalance: a second, identical record.
    other = Archive(tmp_path / "root", tmp_path / "state-b", instance="storage-2")
    other.deliver(pages[0], body(0))
    other.deliver(make_page("https://a.test/torn", body(7), 9_000), body(7))
    torn = other.history("https://a.test/torn")
    assert torn is not None
    other.store.close()  # storage-2 dies mid-write: its file stays marked open, its tail torn
    with (other.root / torn.latest.warc_file).open("r+b") as handle:
        handle.truncate(torn.latest.warc_offset + torn.latest.warc_length // 2)

    output = tmp_path / "crawl-1.warc.gz"
    report = export_crawl(archive.root, "crawl-1", output)

    records = exported(output)
    assert records[0][0] == "warcinfo"
    assert len({record_id for _, _, record_id in records}) == len(records)
    responses = sorted(uri or "" for kind, uri, _ in records if kind == "response")
    assert responses == sorted(p.url for p in pages)
    assert report.records == len(records) - 1 == 10
    assert report.duplicates_dropped == 2  # the response and request of the redelivery
    assert len(report.torn_tails) == 1 and "storage-2" in report.torn_tails[0]
    assert not list(tmp_path.glob(".crawl-1.warc.gz.partial*"))


def test_verify_passes_a_sound_root_and_reports_damaged_blobs_and_records(
    archive: Archive, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(3):
        archive.deliver(make_page(f"https://a.test/{i}", body(i), 1_000 + i), body(i))
    archive.warc.close()
    report = verify_root(archive.root)
    assert report.ok and report.blobs_checked == 3 and report.records_checked == 7

    digest = hashlib.sha256(body(1)).hexdigest()
    (archive.root / blob_path(digest)).write_bytes(b"\x28\xb5\x2f\xfd\x00broken")
    warc = archive.warc_files()[0]
    data = warc.read_bytes()
    with warc.open("rb") as handle:
        response = next(
            m for m in iter_members(handle) if record_head(m.data).record_type == "response"
        )
    tampered = gzip.compress(response.data.replace(b"page 0", b"page X"))
    warc.write_bytes(data[: response.offset] + tampered + data[response.offset + response.length :])

    report = verify_root(archive.root)
    problems = {p["path"]: p["problem"] for p in report.problems}
    assert "zstd" in problems[blob_path(digest)] or "match" in problems[blob_path(digest)]
    damaged = f"{warc.relative_to(archive.root).as_posix()}@{response.offset}"
    assert "digest mismatch" in problems[damaged]
    assert len(report.problems) == 2

    assert main(["--root", str(archive.root), "verify", "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["ok"] is False and len(printed["problems"]) == 2


def test_a_torn_tail_of_a_file_still_being_written_is_not_corruption(
    archive: Archive,
) -> None:
    archive.deliver(make_page("https://a.test/", body(1)), body(1))
    warc = archive.warc_files()[0]
    with warc.open("ab") as handle:
        handle.write(gzip.compress(b"WARC/1.1\r\n" * 50)[:30])
    report = verify_root(archive.root)
    assert report.ok and len(report.being_written) == 1
    archive.warc.close()  # closed: now the same tail is damage
    assert not verify_root(archive.root).ok


def test_export_cli_needs_files_of_the_crawl(archive: Archive, tmp_path: Path) -> None:
    assert main(["--root", str(archive.root), "export", "nothing-here"]) == 1
    archive.deliver(make_page("https://a.test/", body(1)), body(1))
    output = tmp_path / "out.warc.gz"
    assert main(["--root", str(archive.root), "export", "crawl-1", "-o", str(output)]) == 0
    assert [kind for kind, _, _ in exported(output)] == ["warcinfo", "response", "request"]
