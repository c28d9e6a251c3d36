"""`streamcrawl page URL [--history] [--json]` and `streamcrawl storage export|verify`.

`page` asks the page API of a live, ready storage instance found in `members` (its
`api_address`): any instance answers for any URL. Without `--json` the metadata goes to stderr as
`name: value` lines and the body to stdout as raw bytes, so `streamcrawl page URL > page.html`
saves the page; `--history` lists the URL's versions. With `--json` one JSON document goes to
stdout (the body as text when it is UTF-8, else base64).

`storage export CRAWL [-o FILE]` and `storage verify` read `storage.root` directly, since it is a
volume every storage instance shares and they need no broker: the kernel imports no service, so
they run as `python -m storage.tools` (see its docstring) with this environment.
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from typing import Any

from schemas import members
from schemas.serde import decode
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.kafka import table_consumer_config
from streamcrawl.membership import is_live
from streamcrawl.settings import Settings
from streamcrawl.status import require_broker
from streamcrawl.table import TopicTable
from streamcrawl.topics import topic_name

MEMBERS_TIMEOUT_S = 15.0
REQUEST_TIMEOUT_S = 30.0


class PageNotFoundError(StreamcrawlError):
    """The storage has no page for the URL."""


class ApiUnreachableError(StreamcrawlError):
    """A storage member's page API did not answer at all."""


def add_commands(commands: Any) -> None:
    """Register `page` and `storage` on the CLI's subparsers."""
    page = commands.add_parser("page", help="a stored page's body and metadata, or its history")
    page.add_argument("url", metavar="URL", help="the page's URL")
    page.add_argument(
        "--history", action="store_true", help="its stored versions, not its newest body"
    )
    page.add_argument(
        "--json", action="store_true", help="print metadata and body as one JSON document"
    )
    page.set_defaults(run=cmd_page)
    storage = commands.add_parser("storage", help="export a crawl's WARC, verify the storage root")
    storage.add_argument(
        "action",
        choices=["export", "verify"],
        help="write a crawl's pages as one WARC file, or re-check every stored digest",
    )
    storage.add_argument("crawl_id", nargs="?", metavar="CRAWL_ID", help="the crawl to export")
    storage.add_argument("-o", "--output", metavar="FILE", help="the exported WARC file")
    storage.add_argument("--json", action="store_true", help="print the report as JSON")
    storage.set_defaults(run=cmd_storage)


def storage_api_addresses(settings: Settings) -> list[str]:
    """The page APIs of the live, ready storage members, by instance id."""
    table: TopicTable[members.Member] = TopicTable(
        table_consumer_config(settings),
        topic_name(settings, members.TOPIC),
        lambda raw: decode(members.Member, raw),
    )
    table.start()
    try:
        if not table.wait_ready(MEMBERS_TIMEOUT_S):
            raise StreamcrawlError(f"could not read members within {MEMBERS_TIMEOUT_S}s")
        live = sorted(
            (
                m
                for m in table.snapshot().values()
                if m.role == "storage" and m.ready and m.api_address and is_live(m)
            ),
            key=lambda m: m.instance,
        )
    finally:
        table.stop()
    if not live:
        raise StreamcrawlError("no live storage instance publishes its page API in members")
    return [str(m.api_address) for m in live]


class PageApi:
    """Asks the first storage member that answers; one that died moments ago may still look live."""

    def __init__(self, addresses: list[str]) -> None:
        self._addresses = addresses

    def get(self, path: str, **query: str) -> bytes:
        failure: StreamcrawlError | None = None
        for address in list(self._addresses):
            try:
                return _get(address, path, **query)
            except ApiUnreachableError as error:
                failure = error
                self._addresses.remove(address)
        raise failure or StreamcrawlError("no storage member to ask")


def _get(address: str, path: str, **query: str) -> bytes:
    url = f"http://{address}{path}?{urllib.parse.urlencode(query)}"
    try:
        with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT_S) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as error:
        try:
            message = json.loads(error.read()).get("error", error.reason)
        except ValueError:
            message = error.reason
        if error.code == 404:
            raise PageNotFoundError(message) from error
        raise StreamcrawlError(f"page API answered {error.code}: {message}") from error
    except urllib.error.URLError as error:
        reason = f"page API at {address} did not answer: {error.reason}"
        raise ApiUnreachableError(reason) from error


def _iso(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds")


def cmd_page(args: argparse.Namespace, settings: Settings) -> int:
    require_broker(settings)
    api = PageApi(storage_api_addresses(settings))
    try:
        if args.history:
            _show_history(json.loads(api.get("/v1/page/history", url=args.url)), as_json=args.json)
            return 0
        metadata = json.loads(api.get("/v1/page", url=args.url))
        body = api.get("/v1/page/body", url=args.url)
    except PageNotFoundError as error:
        sys.stderr.write(f"streamcrawl: {error}\n")
        return 1
    _show_page(metadata, body, as_json=args.json)
    return 0


def _show_page(metadata: dict[str, Any], body: bytes, *, as_json: bool) -> None:
    if as_json:
        try:
            encoded: dict[str, str] = {"body": body.decode("utf-8")}
        except UnicodeDecodeError:
            encoded = {"body_base64": base64.b64encode(body).decode()}
        sys.stdout.write(json.dumps({"page": metadata, **encoded}, indent=2) + "\n")
        return
    for name, value in metadata.items():
        shown = _iso(value) if name.endswith("fetched_at") and isinstance(value, int) else value
        sys.stderr.write(f"{name}: {shown}\n")
    sys.stderr.flush()
    sys.stdout.buffer.write(body)
    sys.stdout.buffer.flush()


def _show_history(document: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return
    count = len(document["history"])
    sys.stdout.write(f"{document['url']}: {count} version{'' if count == 1 else 's'}\n")
    for version in document["history"]:
        sys.stdout.write(
            f"{_iso(version['fetched_at'])}  last {_iso(version['last_fetched_at'])}  "
            f"status {version['status']}  sha256 {version['content_hash'][:16]}  "
            f"fetches {version['fetches']}  {version['warc_file']}@{version['warc_offset']}\n"
        )


def cmd_storage(args: argparse.Namespace, settings: Settings) -> int:
    command = [sys.executable, "-m", "storage.tools", args.action]
    if args.action == "export":
        if not args.crawl_id:
            raise StreamcrawlError("storage export needs a crawl id")
        command.append(args.crawl_id)
        if args.output:
            command += ["-o", args.output]
    elif args.crawl_id or args.output:
        raise StreamcrawlError("storage verify takes no crawl id or output")
    if args.json:
        command.append("--json")
    return subprocess.call(command)
