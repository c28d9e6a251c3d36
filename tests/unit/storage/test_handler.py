"""The storage handler over real files and a real RocksDB partition: blobs, WARC records read back
by warcio with their digests checked, revisits, change detection, redelivery, history."""

from __future__ import annotations

import gzip
import hashlib
import random
from pathlib import Path

import pytest
import zstandard
from prometheus_client import REGISTRY
from warcio.archiveiterator import ArchiveIterator

from schemas.pages import FetchedPage
from storage.blobs import blob_path
from storage.records import sha256_digest
from tests.unit.storage.archive import Archive, make_page

URL = "https://example.org/wiki/Main_Page"
BODY = b"<html><body>" + b"<p>streamcrawl keeps every page</p>" * 200 + b"</body></html>"


def counter(name: str) -> float:
    return REGISTRY.get_sample_value(f"streamcrawl_storage_{name}_total") or 0.0


def test_a_new_page_gets_a_blob_warc_records_and_an_index_entry(archive: Archive) -> None:
    blobs_before = counter("blobs_written")
    archive.deliver(make_page(URL, BODY), BODY)

    digest = hashlib.sha256(BODY).hexdigest()
    blob = archive.root / blob_path(digest)
    assert blob.parent.parent.name == digest[:2] and blob.parent.name == digest[2:4]
    assert zstandard.ZstdDecompressor().decompress(blob.read_bytes()) == BODY
    assert counter("blobs_written") == blobs_before + 1

    records = archive.records()
    assert [kind for kind, _, _ in records] == ["warcinfo", "response", "request"]
    _, response, payload = records[1]
    assert payload == BODY
    assert response["WARC-Target-URI"] == URL
    assert response["WARC-Date"] == "2023-11-14T22:13:20.000Z"
    assert response["WARC-Payload-Digest"] == sha256_digest(digest)
    assert "WARC-Truncated" not in response
    _, request, _ = records[2]
    assert request["WARC-Concurrent-To"] == response["WARC-Record-ID"]
    warc_text = gzip.decompress(archive.warc_files()[0].read_bytes())
    assert b"\r\n\r\nGET /wiki/Main_Page HTTP/1.1\r\nHost: example.org\r\n" in warc_text

    history = archive.history(URL)
    assert history is not None and len(history.versions) == 1
    latest = history.latest
    assert latest.content_hash == digest and latest.status == 200
    assert latest.blob == blob_path(digest)
    assert not Path(latest.warc_file).is_absolute()
    with (archive.root / latest.warc_file).open("rb") as handle:
        handle.seek(latest.warc_offset)
        record = next(iter(ArchiveIterator(handle, check_digests="raise")))
        assert record.rec_headers.get_header("WARC-Record-ID") == latest.warc_record_id
        assert record.content_stream().read() == BODY


def test_an_unchanged_page_gets_a_revisit_record_and_only_moves_its_timestamp(
    archive: Archive,
) -> None:
    first = make_page(URL, BODY, 1_700_000_000_000)
    archive.deliver(first, BODY)
    blobs_before = counter("blobs_written")
    unchanged_before = counter("pages_unchanged")
    archive.deliver(make_page(URL, BODY, 1_700_000_500_000), BODY)

    assert counter("blobs_written") == blobs_before
    assert counter("pages_unchanged") == unchanged_before + 1
    kinds = [kind for kind, _, _ in archive.records()]
    assert kinds == ["warcinfo", "response", "request", "revisit", "request"]
    _, response, _ = archive.records()[1]
    _, revisit, revisit_payload = archive.records()[3]
    assert revisit["WARC-Refers-To"] == response["WARC-Record-ID"]
    assert revisit["WARC-Refers-To-Target-URI"] == URL
    assert revisit["WARC-Refers-To-Date"] == response["WARC-Date"]
    assert revisit["WARC-Payload-Digest"] == response["WARC-Payload-Digest"]
    assert revisit["WARC-Profile"].endswith("/revisit/identical-payload-digest")
    assert revisit_payload == b""  # headers only, no copy of the body

    history = archive.history(URL)
    assert history is not None and len(history.versions) == 1
    assert history.latest.fetched_at == 1_700_000_000_000
    assert history.latest.last_fetched_at == 1_700_000_500_000
    assert history.latest.fetches == 2
    assert history.latest.last_revisit is not None
    assert history.latest.last_revisit.record_id == revisit["WARC-Record-ID"]


def test_a_changed_page_gets_a_new_version_and_blob(archive: Archive) -> None:
    archive.deliver(make_page(URL, BODY, 1_000), BODY)
    changed = BODY.replace(b"every", b"each")
    archive.deliver(make_page(URL, changed, 2_000), changed)
    archive.deliver(make_page(URL, changed, 3_000, status=404), changed)

    history = archive.history(URL)
    assert history is not None
    assert [v.content_hash for v in history.versions] == [
        hashlib.sha256(BODY).hexdigest(),
        hashlib.sha256(changed).hexdigest(),
        hashlib.sha256(changed).hexdigest(),
    ]
    assert [v.status for v in history.versions] == [200, 200, 404]
    assert len(list(archive.blobs.hashes())) == 2
    assert [k for k, _, _ in archive.records()].count("response") == 3


def test_the_same_body_at_two_urls_is_one_blob(archive: Archive) -> None:
    archive.deliver(make_page(URL, BODY), BODY)
    archive.deliver(make_page(URL + "?copy", BODY), BODY)
    assert list(archive.blobs.hashes()) == [hashlib.sha256(BODY).hexdigest()]
    assert [k for k, _, _ in archive.records()].count("response") == 2


def test_redelivery_of_a_committed_page_changes_nothing(archive: Archive) -> None:
    page = make_page(URL, BODY)
    archive.deliver(page, BODY)
    sizes = [p.stat().st_size for p in archive.warc_files()]
    entry = archive.store.get("pages", URL.encode())
    archive.deliver(page, BODY)
    archive.deliver(page, BODY)
    assert [p.stat().st_size for p in archive.warc_files()] == sizes
    assert archive.store.get("pages", URL.encode()) == entry


def test_redelivery_after_a_crash_before_the_commit_writes_the_record_once(
    archive: Archive,
) -> None:
    page = make_page(URL, BODY)
    archive.deliver(page, BODY, commit=False)
    assert archive.history(URL) is None
    archive.deliver(page, BODY)
    assert [k for k, _, _ in archive.records()].count("response") == 1
    history = archive.history(URL)
    assert history is not None and len(history.versions) == 1


def test_a_restarted_writer_recognises_records_it_wrote_before_dying(archive: Archive) -> None:
    page = make_page(URL, BODY)
    archive.deliver(page, BODY, commit=False)
    written = archive.records()[1][1]["WARC-Record-ID"]
    archive.open_writer()  # the old writer was never closed: as after a kill
    assert len(archive.recovered) == 1
    archive.deliver(page, BODY)
    assert [k for k, _, _ in archive.records()].count("response") == 1
    history = archive.history(URL)
    assert history is not None and history.latest.warc_record_id == written


def test_a_torn_last_record_is_cut_off_when_the_writer_restarts(archive: Archive) -> None:
    archive.deliver(make_page(URL, BODY, 1_000), BODY)
    path = archive.warc_files()[0]
    good_size = path.stat().st_size
    archive.deliver(make_page(URL + "/2", BODY + b"!", 2_000), BODY + b"!", commit=False)
    whole = path.stat().st_size
    with path.open("r+b") as handle:  # as if the kill came halfway through the second write
        handle.truncate(good_size + (whole - good_size) // 3)
    archive.open_writer()
    assert path.stat().st_size == good_size
    assert [k for k, _, _ in archive.records()] == ["warcinfo", "response", "request"]
    archive.deliver(make_page(URL + "/2", BODY + b"!", 2_000), BODY + b"!")
    assert [k for k, _, _ in archive.records()].count("response") == 2


def test_a_truncated_body_is_marked_in_its_response_record(archive: Archive) -> None:
    archive.deliver(make_page(URL, BODY, truncated=True), BODY)
    _, response, payload = archive.records()[1]
    assert response["WARC-Truncated"] == "length"
    assert payload == BODY
    history = archive.history(URL)
    assert history is not None and history.latest.truncated


def test_decoded_bodies_keep_their_original_encoding_headers_renamed(archive: Archive) -> None:
    headers = {"Content-Type": "text/html", "Content-Encoding": "gzip", "Content-Length": "12"}
    archive.deliver(make_page(URL, BODY, headers=headers), BODY)
    path = archive.warc_files()[0]
    with path.open("rb") as handle:
        response = next(r for r in ArchiveIterator(handle) if r.rec_type == "response")
        assert response.http_headers.get_header("Content-Encoding") is None
        assert response.http_headers.get_header("X-Archive-Orig-Content-Encoding") == "gzip"
        assert response.http_headers.get_header("Content-Length") == str(len(BODY))
        assert response.content_stream().read() == BODY


def test_a_body_that_does_not_match_its_hash_is_dead_lettered(archive: Archive) -> None:
    page = make_page(URL, BODY)
    archive.deliver(page, BODY + b"tampered")
    assert archive.dead_letters and "hashes to" in archive.dead_letters[0]
    assert archive.history(URL) is None
    assert list(archive.blobs.hashes()) == []


def test_warc_files_rotate_by_size_and_the_index_points_into_the_right_one(
    tmp_path: Path,
) -> None:
    archive = Archive(tmp_path / "root", tmp_path / "state", max_bytes=8192)
    try:
        urls = [f"https://example.org/p{i}" for i in range(12)]
        for i, url in enumerate(urls):
            body = random.Random(i).randbytes(3000)
            archive.deliver(make_page(url, body, 1_000 + i), body)
        files = archive.warc_files()
        assert len(files) > 2
        assert all(p.stat().st_size <= 8192 for p in files)
        for path in files:
            with path.open("rb") as handle:
                assert next(iter(ArchiveIterator(handle))).rec_type == "warcinfo"
        for url in urls:
            history = archive.history(url)
            assert history is not None
            with (archive.root / history.latest.warc_file).open("rb") as handle:
                handle.seek(history.latest.warc_offset)
                record = next(iter(ArchiveIterator(handle, check_digests="raise")))
                assert record.rec_headers.get_header("WARC-Target-URI") == url
    finally:
        archive.close()


def test_history_keeps_the_newest_versions_up_to_its_limit(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "root", tmp_path / "state", history_limit=3)
    try:
        for i in range(5):
            body = f"version {i}".encode()
            archive.deliver(make_page(URL, body, 1_000 + i), body)
        history = archive.history(URL)
        assert history is not None
        assert [v.fetched_at for v in history.versions] == [1_002, 1_003, 1_004]
    finally:
        archive.close()


def test_pages_of_each_crawl_go_to_that_crawls_directory(archive: Archive) -> None:
    archive.deliver(make_page(URL, BODY, crawl_id="alpha"), BODY)
    archive.deliver(make_page(URL + "/b", BODY, crawl_id="beta"), BODY)
    assert sorted(p.parent.name for p in archive.warc_files()) == ["alpha", "beta"]
    archive.warc.close()
    assert not list((archive.root / "warc").glob("*/*.open"))


def test_a_restarted_writer_knows_records_of_files_it_rotated_before_dying(
    tmp_path: Path,
) -> None:
    archive = Archive(tmp_path / "root", tmp_path / "state", max_bytes=8192)
    try:
        pages = []
        for i in range(8):
            body = random.Random(i).randbytes(3000)
            pages.append((make_page(f"https://example.org/r{i}", body, 1_000 + i), body))
        for page, body in pages:
            archive.deliver(page, body, commit=False)
        assert len(archive.warc_files()) > 2  # rotated inside the uncommitted window
        archive.open_writer()
        for page, body in pages:
            archive.deliver(page, body)
        assert [k for k, _, _ in archive.records()].count("response") == len(pages)
    finally:
        archive.close()


def revisit_of(page: FetchedPage, fetched_at: int, status: int) -> FetchedPage:
    """The bodiless page the fetcher sends when a recrawl finds the content it was told of."""
    return page.model_copy(
        update={
            "fetched_at": fetched_at,
            "lease_id": f"lease-{fetched_at}",
            "status": status,
            "body_size": 0,
            "revisit": True,
        }
    )


@pytest.mark.parametrize(
    ("status", "profile"),
    [(304, "/revisit/server-not-modified"), (200, "/revisit/identical-payload-digest")],
)
def test_a_bodiless_revisit_page_gets_a_revisit_record_pointing_at_the_stored_response(
    archive: Archive, status: int, profile: str
) -> None:
    first = make_page(URL, BODY, 1_700_000_000_000)
    archive.deliver(first, BODY)
    archive.deliver(revisit_of(first, 1_700_000_900_000, status), b"")

    assert archive.dead_letters == []
    kinds = [kind for kind, _, _ in archive.records()]
    assert kinds == ["warcinfo", "response", "request", "revisit", "request"]
    _, response, _ = archive.records()[1]
    _, revisit, _ = archive.records()[3]
    assert revisit["WARC-Refers-To"] == response["WARC-Record-ID"]
    assert revisit["WARC-Payload-Digest"] == response["WARC-Payload-Digest"]
    assert revisit["WARC-Profile"].endswith(profile)
    history = archive.history(URL)
    assert history is not None and len(history.versions) == 1
    assert history.latest.last_fetched_at == 1_700_000_900_000
    assert history.latest.fetches == 2


def test_a_revisit_of_content_the_index_does_not_hold_writes_nothing(archive: Archive) -> None:
    never_stored = make_page(URL, BODY, 1_700_000_000_000)
    unmatched_before = counter("revisits_unmatched")
    archive.deliver(revisit_of(never_stored, 1_700_000_900_000, 304), b"")
    stored = make_page(URL, b"<html>other</html>", 1_700_000_950_000)
    archive.deliver(stored, b"<html>other</html>")
    archive.deliver(revisit_of(never_stored, 1_700_001_000_000, 304), b"")

    assert counter("revisits_unmatched") == unmatched_before + 2
    assert archive.dead_letters == []
    assert [kind for kind, _, _ in archive.records()] == ["warcinfo", "response", "request"]
    history = archive.history(URL)
    assert history is not None and history.latest.fetches == 1
