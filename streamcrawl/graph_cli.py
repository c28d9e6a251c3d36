"""`streamcrawl graph ...`: link-graph queries through a live linkgraph instance's HTTP API.

The instance is found in `members` (a live `linkgraph` member with an API address, ready ones
first); it answers or forwards to the key's owner or to the ranker. The kernel imports no service:
this module speaks HTTP only. `--json` prints the API's answer as it came; otherwise a short
human listing. `export` streams the edge list (CSV with a header, GraphFrames' `src`/`dst` column
names) into a file.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, get_args

from schemas import members
from schemas.links import LinkPosition, LinkType
from schemas.serde import decode
from streamcrawl.exceptions import StreamcrawlError
from streamcrawl.kafka import table_consumer_config
from streamcrawl.membership import is_live
from streamcrawl.settings import Settings
from streamcrawl.status import require_broker
from streamcrawl.table import TopicTable
from streamcrawl.topics import topic_name

LINKGRAPH_ROLE = "linkgraph"
MEMBERS_TIMEOUT_S = 15.0
REQUEST_TIMEOUT_S = 120.0
EXPORT_TIMEOUT_S = 3600.0
"""An export answers once the instance has read all of `links.by-target`: minutes on a big graph."""
EXPORT_ROWS_HEADER = "X-Streamcrawl-Rows"
"""An export's rows, sent by the API (a text may hold a line break: its lines do not count them)."""
EXPORT_CHUNK_BYTES = 1 << 20
KEYED = ("out", "in", "anchors", "node")
GLOBAL = ("top", "orphans", "domains", "farms", "syndication", "important", "ranking")


class GraphApiError(StreamcrawlError):
    """The graph API could not be reached or answered an error."""


def graph_api_addresses(settings: Settings, timeout_s: float = MEMBERS_TIMEOUT_S) -> list[str]:
    """API addresses of the live linkgraph members, ready and most recently heard first."""
    table: TopicTable[members.Member] = TopicTable(
        table_consumer_config(settings),
        topic_name(settings, members.TOPIC),
        lambda raw: decode(members.Member, raw),
    )
    table.start()
    try:
        if not table.wait_ready(timeout_s):
            raise GraphApiError(f"could not read members within {timeout_s}s")
        live = [
            m
            for m in table.snapshot().values()
            if m.role == LINKGRAPH_ROLE and m.api_address and is_live(m)
        ]
    finally:
        table.stop()
    if not live:
        raise GraphApiError("no live linkgraph instance serves its API (is `linkgraph` running?)")
    return [str(m.api_address) for m in sorted(live, key=lambda m: (not m.ready, -m.updated_at))]


def graph_api_address(settings: Settings, timeout_s: float = MEMBERS_TIMEOUT_S) -> str:
    return graph_api_addresses(settings, timeout_s)[0]


def call_any(
    addresses: list[str],
    path: str,
    params: dict[str, str],
    method: str = "GET",
    into: Path | None = None,
) -> tuple[int, bytes]:
    """`call` on the first address that answers: a member that died a moment ago is still listed
    as live for a few heartbeats."""
    failure: GraphApiError | None = None
    for address in addresses:
        try:
            return call(address, path, params, method, into)
        except GraphApiError as error:
            failure = error
    raise failure or GraphApiError("no linkgraph address to call")


def call(
    address: str,
    path: str,
    params: dict[str, str],
    method: str = "GET",
    into: Path | None = None,
) -> tuple[int, bytes]:
    """The answer's status and body. With `into` (an export), a successful answer's body goes
    into that file, never whole in memory (`_stream_into`), and its rows header comes back in the
    body's place; an answer cut short is the address's failure."""
    query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
    url = f"http://{address}{path}" + (f"?{query}" if query else "")
    request = urllib.request.Request(url, method=method)
    timeout = REQUEST_TIMEOUT_S if into is None else EXPORT_TIMEOUT_S
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            if into is None:
                return int(answer.status), bytes(answer.read())
            _stream_into(answer, into)
            return int(answer.status), answer.headers.get(EXPORT_ROWS_HEADER, "").encode()
    except urllib.error.HTTPError as error:
        return int(error.code), bytes(error.read())
    except (
        urllib.error.URLError,
        http.client.HTTPException,  # an answer cut short
        TimeoutError,
        ConnectionError,
    ) as error:
        raise GraphApiError(f"graph API at {address} did not answer: {error}") from error


def _stream_into(answer: http.client.HTTPResponse, into: Path) -> None:
    """`answer`'s body into `into` a chunk at a time, through a `.part` file renamed once the
    whole body is there; an `IncompleteRead` when it is not, `into` left as it was."""
    part = into.with_name(f"{into.name}.part")
    try:
        with part.open("wb") as handle:
            shutil.copyfileobj(answer, handle, EXPORT_CHUNK_BYTES)
        if answer.length:  # announced, never sent: http.client reads on as if at the end
            raise http.client.IncompleteRead(b"", answer.length)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    part.replace(into)


KEYED_HELP = {
    "out": "out-links of a URL: the pages it links to",
    "in": "in-links of a URL: the pages linking to it",
    "anchors": "anchor texts of the links to a URL, with counts",
    "node": "a URL's node: host, domain, first seen, crawled, degrees",
}
GLOBAL_HELP = {
    "top": "top pages by PageRank (global, per host, per crawl, or personalised)",
    "orphans": "crawled pages no internal link reaches (seeds excepted)",
    "domains": "the domain-level graph: links between registered domains, counted",
    "farms": "domains sending over 90%% of their out-links to one other domain",
    "syndication": "pairs of domains linking heavily both ways",
    "important": "pages whose PageRank is above the mean plus two standard deviations",
    "ranking": "the latest ranking's summary (when, its graph, iterations, residual)",
}


def add_graph_command(commands: Any) -> None:
    """Register `graph` and its queries on the CLI's subparsers."""
    graph = commands.add_parser("graph", help="query the link graph (out, in, anchors, top, ...)")
    graph.set_defaults(run=cmd_graph)
    queries = graph.add_subparsers(dest="graph_command", required=True, metavar="QUERY")
    for name in KEYED:
        query = queries.add_parser(name, help=KEYED_HELP[name])
        query.add_argument("url", metavar="URL", help="the page's URL (canonicalised)")
        if name == "anchors":
            query.add_argument(
                "--limit", type=int, metavar="N", help="at most N texts (default: 1000)"
            )
        if name in ("out", "in"):
            query.add_argument(
                "--limit", type=int, metavar="N", help="edges per answer (default: 100)"
            )
            query.add_argument(
                "--cursor", help="go on from a previous answer (its `more: --cursor ...`)"
            )
            query.add_argument(
                "--link-type",
                dest="link_type",
                type=str.upper,
                choices=get_args(LinkType),
                help="only these (any case)",
            )
            query.add_argument(
                "--position",
                type=str.upper,
                choices=get_args(LinkPosition),
                help="only these (any case)",
            )
            query.add_argument("--live", action="store_true", help="leave out gone edges")
        _common(query)
    for name in GLOBAL:
        query = queries.add_parser(name, help=GLOBAL_HELP[name])
        default = 1000 if name == "domains" else 100
        query.add_argument(
            "--limit", type=int, metavar="N", help=f"at most N rows (default: {default})"
        )
        if name in ("top", "orphans"):
            query.add_argument(
                "--crawl-id", dest="crawl_id", metavar="ID", help="only this crawl's pages"
            )
        if name == "top":
            query.add_argument("--host", help="only this host's pages")
            query.add_argument(
                "--teleport",
                choices=("seeds", "pattern"),
                help="personalised PageRank: teleport to the seeds (of --crawl-id, else of every "
                "crawl) or to the pages --pattern matches",
            )
            query.add_argument("--pattern", metavar="REGEX", help="with --teleport pattern")
        _common(query)
    path = queries.add_parser(
        "path", help="a shortest click path to a URL from the seeds (its click depth)"
    )
    path.add_argument("url", metavar="URL", help="the page's URL (canonicalised)")
    path.add_argument(
        "--crawl-id", dest="crawl_id", metavar="ID", help="from this crawl's seeds (default: all)"
    )
    _common(path)
    rank = queries.add_parser("rank", help="rank now and print the ranking's summary")
    _common(rank)
    export = queries.add_parser("export", help="write the edge list (CSV) for Spark GraphFrames")
    export.add_argument(
        "-o", "--output", type=Path, required=True, metavar="FILE", help="the CSV file"
    )
    export.add_argument("--vertices", action="store_true", help="the vertex list instead")
    _common(export)


def _common(query: argparse.ArgumentParser) -> None:
    query.add_argument("--json", action="store_true", help="print the API's JSON answer")


def _params(args: argparse.Namespace) -> dict[str, str]:
    names = ("url", "limit", "cursor", "link_type", "position", "host", "crawl_id")
    params = {n: str(getattr(args, n)) for n in names if getattr(args, n, None) is not None}
    if getattr(args, "live", False):
        params["live"] = "1"
    for name in ("teleport", "pattern"):
        if getattr(args, name, None):
            params[name] = str(getattr(args, name))
    return params


def cmd_graph(args: argparse.Namespace, settings: Settings) -> int:
    require_broker(settings)
    try:
        addresses = graph_api_addresses(settings)
        command = args.graph_command
        if command == "export":
            return _export(addresses, args.output, args.vertices)
        method = "POST" if command == "rank" else "GET"
        status, body = call_any(addresses, f"/v1/graph/{command}", _params(args), method)
    except GraphApiError as error:
        sys.stderr.write(f"streamcrawl: {error}\n")
        return 2
    try:
        answer = json.loads(body)
    except ValueError:
        sys.stderr.write(f"streamcrawl: graph API answered {status} without JSON\n")
        return 2
    if status >= 400:
        sys.stderr.write(f"streamcrawl: {answer.get('error', body.decode(errors='replace'))}\n")
        return 1
    lines = [json.dumps(answer, indent=2)] if args.json else human_lines(command, answer)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _export(addresses: list[str], out: Path, vertices: bool) -> int:
    params = {"what": "vertices"} if vertices else {}
    status, body = call_any(addresses, "/v1/graph/export", params, into=out)
    if status >= 400:
        sys.stderr.write(f"streamcrawl: export failed ({status}): {body[:500]!r}\n")
        return 1
    sys.stdout.write(f"{body.decode()} {'vertices' if vertices else 'edges'} written to {out}\n")
    return 0


def human_lines(command: str, answer: Any) -> list[str]:
    if command in ("out", "in"):
        lines = [
            f"{e['link_type']:<9} {e['position']:<7} {'gone ' if e['gone'] else ''}"
            f"{e['to_url'] if command == 'out' else e['from_url']}  {e['anchor_text']!r}"
            for e in answer["edges"]
        ]
        if answer.get("next_cursor"):
            lines.append(f"more: --cursor {answer['next_cursor']}")
        return lines or ["no edges"]
    if command == "anchors":
        return [f"{a['count']:>6}  {a['text']}" for a in answer["anchors"]] or ["no anchors"]
    if command in ("top", "important"):
        return [f"{p['score']:.6g}  {p['url']}" for p in answer["pages"]] or ["no pages"]
    if command == "orphans":
        return [p["url"] for p in answer] or ["no orphans"]
    if command == "path":
        if answer["path"] is None:
            return [f"no seed reaches {answer['url']} (in the latest ranking's graph)"]
        clicks = answer["clicks"]
        first, *rest = answer["path"]
        return [
            f"{clicks} click{'' if clicks == 1 else 's'} from a seed:",
            f"  {first}  (seed)",
            *(f"  {url}" for url in rest),
        ]
    if command == "domains":
        return [f"{d['links']:>8}  {d['from']} -> {d['to']}" for d in answer] or ["no links"]
    if command == "farms":
        return [
            f"{f['domain']} -> {f['target_domain']}  {f['share']:.0%} of {f['links_out']}"
            for f in answer
        ] or ["no link farms"]
    if command == "syndication":
        return [
            f"{p['domains'][0]} <-> {p['domains'][1]}  {p['links_ab']} / {p['links_ba']}"
            for p in answer
        ] or ["no syndication pairs"]
    return [f"{key}: {value}" for key, value in answer.items()]
