"""`python -m storage.tools export CRAWL [-o FILE]` and `python -m storage.tools verify [--json]`.

Both read `storage.root` directly (`STREAMCRAWL_STORAGE__ROOT`), the shared volume every storage
instance writes, so they need neither a broker nor a running service; `streamcrawl storage ...`
runs them. They only read: nothing under the root is changed.

export: one gzip WARC of a crawl, a fresh warcinfo record followed by every request, response and
revisit record of the crawl's WARC files, each gzip member copied byte for byte, in file order.
Records with an id already exported (a redelivered page appended twice, see `storage.warc`) are
dropped, and so is a torn last member of a file whose writer died; both are counted. The file is
written beside its destination and renamed, so a failed export leaves no partial file.

verify: re-hashes every blob (decompressed, SHA-256 against its name) and reads every WARC record
checking its block and payload digests; reports each problem and exits 1 when there is any. A torn
last member of a file still marked open is reported as being written, not as corruption.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from isal import isal_zlib
from warcio.archiveiterator import ArchiveIterator
from warcio.recordbuilder import RecordBuilder
from warcio.warcwriter import WARCWriter

from storage.blobs import BlobProblem, BlobStore
from storage.records import WARC_VERSION
from storage.settings import StorageServiceSettings
from storage.warcfiles import (
    TornMemberError,
    crawl_directory,
    is_open,
    iter_members,
    record_head,
    warc_files,
)


@dataclass
class ExportReport:
    crawl_id: str
    output: str
    files: int = 0
    records: int = 0
    duplicates_dropped: int = 0
    torn_tails: list[str] = field(default_factory=list)


@dataclass
class VerifyReport:
    root: str
    blobs_checked: int = 0
    records_checked: int = 0
    problems: list[dict[str, str]] = field(default_factory=list)
    being_written: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _warcinfo_member(filename: str, crawl_id: str) -> bytes:
    builder = RecordBuilder(warc_version=WARC_VERSION)
    info = builder.create_warcinfo_record(
        filename, {"software": "streamcrawl storage export", "crawl": crawl_id}
    )
    out = io.BytesIO()
    WARCWriter(out, gzip=False, warc_version=WARC_VERSION).write_record(info)
    return isal_zlib.compress(out.getbuffer(), 1, wbits=31)


def export_crawl(root: Path, crawl_id: str, output: Path) -> ExportReport:
    report = ExportReport(crawl_id, str(output))
    files = warc_files(root, crawl_id)
    partial = output.with_name(f".{output.name}.partial-{os.getpid()}")
    seen: set[str] = set()
    try:
        with partial.open("wb") as out:
            out.write(_warcinfo_member(output.name, crawl_id))
            for path in files:
                report.files += 1
                with path.open("rb") as members, path.open("rb") as raw:
                    try:
                        for member in iter_members(members):
                            head = record_head(member.data)
                            if head.record_type == "warcinfo":
                                continue
                            if head.record_id in seen:
                                report.duplicates_dropped += 1
                                continue
                            seen.add(head.record_id)
                            raw.seek(member.offset)
                            out.write(raw.read(member.length))
                            report.records += 1
                    except TornMemberError as error:
                        report.torn_tails.append(f"{path.relative_to(root)}@{error.offset}")
        os.replace(partial, output)
    finally:
        partial.unlink(missing_ok=True)
    return report


def verify_root(root: Path) -> VerifyReport:
    report = VerifyReport(str(root))
    for result in BlobStore(root, "verify").verify():
        report.blobs_checked += 1
        if isinstance(result, BlobProblem):
            report.problems.append({"path": result.path, "problem": result.problem})
    for path in warc_files(root):
        relative = path.relative_to(root).as_posix()
        with path.open("rb") as handle:
            try:
                for member in iter_members(handle):
                    report.records_checked += 1
                    problem = _record_problem(member.data)
                    if problem is not None:
                        report.problems.append(
                            {"path": f"{relative}@{member.offset}", "problem": problem}
                        )
            except TornMemberError as error:
                where = f"{relative}@{error.offset}"
                if is_open(path):
                    report.being_written.append(where)
                else:
                    report.problems.append({"path": where, "problem": str(error)})
    return report


def _record_problem(data: bytes) -> str | None:
    try:
        for record in ArchiveIterator(io.BytesIO(data), check_digests=True):
            record.content_stream().read()
            checker = record.digest_checker
            if checker.passed is False:
                return "digest mismatch: " + "; ".join(checker.problems)
            return None
    except Exception as error:  # any parse failure of a record is the corruption to report
        return f"unreadable WARC record: {type(error).__name__}: {error}"
    return "empty gzip member"


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streamcrawl storage")
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="one WARC file of a crawl")
    export.add_argument("crawl_id")
    export.add_argument("-o", "--output", help="default: CRAWL.warc.gz here")
    export.add_argument("--json", action="store_true")
    verify = commands.add_parser("verify", help="re-hash every blob, check every WARC digest")
    verify.add_argument("--json", action="store_true")
    parser.add_argument("--root", help="default: STREAMCRAWL_STORAGE__ROOT or its default")
    args = parser.parse_args(argv)
    root = Path(args.root) if args.root else _configured_root()
    if args.command == "export":
        return _export(root, args)
    return _verify(root, args)


def _configured_root() -> Path:
    return StorageServiceSettings().storage.root


def _export(root: Path, args: argparse.Namespace) -> int:
    if not warc_files(root, args.crawl_id):
        sys.stderr.write(f"streamcrawl: no WARC files of crawl {args.crawl_id} under {root}\n")
        return 1
    output = Path(args.output or f"{crawl_directory(args.crawl_id)}.warc.gz")
    report = export_crawl(root, args.crawl_id, output)
    if args.json:
        _print(json.dumps(asdict(report), indent=2))
    else:
        _print(
            f"{report.output}: {report.records} records from {report.files} files "
            f"({report.duplicates_dropped} duplicates dropped, {len(report.torn_tails)} torn tails)"
        )
    return 0


def _verify(root: Path, args: argparse.Namespace) -> int:
    report = verify_root(root)
    if args.json:
        _print(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
    else:
        for problem in report.problems:
            _print(f"CORRUPT {problem['path']}: {problem['problem']}")
        for where in report.being_written:
            _print(f"being written (torn tail of an open file) {where}")
        verdict = "ok" if report.ok else f"{len(report.problems)} problems"
        _print(
            f"{report.blobs_checked} blobs, {report.records_checked} WARC records checked: "
            f"{verdict}"
        )
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
