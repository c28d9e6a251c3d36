"""The command line as a user meets it: every option explained, every crawl request field settable,
and a bad option a clear error naming it (no traceback, nothing published)."""

from __future__ import annotations

import argparse
import io
import re
import shlex
from pathlib import Path

import pytest

from schemas.seeds import MAX_REQUEST_BYTES, MAX_SEEDS, CrawlRequest
from schemas.serde import encode
from schemas.topic import MIB
from streamcrawl.cli import CLIENT_LOG_LEVEL, build_parser, cli_settings, main
from streamcrawl.crawl_cli import OPTIONS, CrawlRequestError, crawl_request
from streamcrawl.status import StatusReport, instance_lines
from streamcrawl.summary import CrawlSummary, summary_lines
from streamcrawl.watch import CrawlView, progress_line

SEED = "https://example.com/"
FLAGS = {
    "respect_robots": "--ignore-robots",
    "use_sitemaps": "--sitemaps",
    "use_feeds": "--feeds",
    "use_cookies": "--cookies",
    "check_external": "--check-external",
    "find_near_duplicates": "--near-duplicates",
    "follow_nofollow": "--follow-nofollow",
}
"""Fields set by a flag rather than a value."""


def _parsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every parser of the CLI with its command path, the top one included."""
    found = [(parser.prog, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found.extend(_parsers(child))
    return found


def _request(*argv: str) -> CrawlRequest:
    return crawl_request(build_parser().parse_args(["seed", SEED, *argv]))


def test_every_command_and_option_says_what_it_does() -> None:
    unexplained = []
    for prog, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                commands = {choice.dest for choice in action._choices_actions}
                missing = set(action.choices) - commands
                unexplained += [f"{prog} {name}" for name in sorted(missing)]
            elif not action.help:
                unexplained.append(f"{prog} {'/'.join(action.option_strings) or action.dest}")
    assert unexplained == []


def test_every_crawl_request_field_has_an_option() -> None:
    settable = {"v", "kind", "seeds", *OPTIONS, *FLAGS}  # v: the schema version
    assert set(CrawlRequest.model_fields) - settable == set()
    for command in ("seed", "crawl", "demo"):
        (parser,) = [p for prog, p in _parsers(build_parser()) if prog == f"streamcrawl {command}"]
        options = {string for action in parser._actions for string in action.option_strings}
        assert set(OPTIONS.values()) | set(FLAGS.values()) <= options, command


def test_page_requisites_reach_their_field() -> None:
    """Not in the test below: they do not combine with --check-external, which it sets."""
    assert _request("--page-requisites").fetch_page_requisites


def test_no_option_gives_the_crawl_requests_own_defaults() -> None:
    request = _request()
    expected = CrawlRequest(seeds=[SEED], crawl_id=request.crawl_id)
    assert request == expected


def test_every_option_reaches_its_field() -> None:
    request = _request(
        "--crawl-id=news-1",
        "--max-depth=4",
        "--same-domain=registered_domain",
        "--domain=Example.ORG",
        "--domain=example.net",
        "--include=/news/",
        "--exclude=\\.pdf$",
        "--scope-threshold=0.4",
        "--follow-nofollow",
        "--sitemaps",
        "--feeds",
        "--cookies",
        "--check-external",
        "--max-links=5000",
        "--max-pages-per-host=200",
        "--max-duration-s=1.5",
        "--delay-ms=250",
        "--host-delay=api.example.com=5000",
        "--host-delay=*.Slow.Example=60000",
        "--ignore-robots",
        "--max-retries=1",
        "--max-redirects=2",
        "--content-type=html",
        "--content-type=application/pdf",
        "--recrawl-hours=12",
        "--recrawl-adaptive",
        "--recrawl-min-hours=2",
        "--recrawl-max-hours=240",
        "--priority=novelty",
        "--prefer=/product/",
        "--extract=title=h1::text",
        "--extract=price=xpath://span[@class='price']/text()",
        "--extract-pattern=/product/",
        "--follow-within=.pagination, .products",
        "--near-duplicates",
        "--header=Accept-Language: de",
        "--header=Cookie: consent=yes",
    )
    assert request.model_dump() == {
        "v": 1,
        "kind": "crawl_request",
        "crawl_id": "news-1",
        "seeds": [SEED],
        "max_depth": 4,
        "max_links": 5000,
        "max_pages_per_host": 200,
        "max_duration_ms": 1500,
        "same_domain": "registered_domain",
        "domain_whitelist": ["example.org", "example.net"],
        "include_pattern": "/news/",
        "exclude_pattern": "\\.pdf$",
        "politeness_delay_ms": 250,
        "host_delays_ms": {"api.example.com": 5000, "slow.example": 60000},
        "max_retries": 1,
        "recrawl_interval_hours": 12.0,
        "recrawl_adaptive": True,
        "recrawl_min_hours": 2.0,
        "recrawl_max_hours": 240.0,
        "content_types": ["text/html", "application/xhtml+xml", "application/pdf"],
        "respect_robots": False,
        "use_sitemaps": True,
        "use_feeds": True,
        "use_cookies": True,
        "find_near_duplicates": True,
        "fetch_page_requisites": False,  # not with check_external: see the test below
        "check_external": True,
        "priority": "novelty",
        "prefer_pattern": "/product/",
        "follow_nofollow": True,
        "max_redirects": 2,
        "scope_score_threshold": 0.4,
        "extract": {"title": "h1::text", "price": "xpath://span[@class='price']/text()"},
        "extract_pattern": "/product/",
        "follow_within": ".pagination, .products",
        "headers": {"Accept-Language": "de", "Cookie": "consent=yes"},
    }


def test_the_demo_crawls_deeper_and_faster_by_default() -> None:
    args = build_parser().parse_args(["demo"])
    assert (args.max_depth, args.delay_ms, args.timeout_s) == (3, 100, None)
    args.urls = [SEED]  # the demo's own site
    assert crawl_request(args).politeness_delay_ms == 100


@pytest.mark.parametrize(
    ("argv", "reported"),
    [
        (["ftp://example.com/"], "seed URL: only http and https URLs are crawled"),
        ([SEED, "--include=("], "--include: pattern does not compile"),
        ([SEED, "--max-depth=-5"], "--max-depth: Input should be greater than or equal to -1"),
        ([SEED, "--content-type=pdf"], "--content-type: 'pdf' is neither a media type nor one of"),
        ([SEED, "--crawl-id=a b"], "--crawl-id: String should match pattern"),
        ([SEED, "--max-duration-s=-3"], "--max-duration-s: must be a positive number of seconds"),
        ([SEED, "--scope-threshold=2"], "--scope-threshold: Input should be less than or equal"),
        ([SEED, "--recrawl-adaptive"], "--recrawl-adaptive: needs a recrawl interval to adapt"),
        ([SEED, "--host-delay=slow.example"], "--host-delay: 'slow.example' is not DOMAIN=MS"),
        ([SEED, "--host-delay=http://x/=5"], "--host-delay: 'http://x/' is not a domain name"),
        (
            [SEED, "--check-external", "--page-requisites"],
            "--page-requisites: does not combine with check_external",
        ),
        (
            [SEED, "--recrawl-hours=2", "--recrawl-max-hours=1"],
            "--recrawl-max-hours: bounds an adaptive recrawl interval",
        ),
    ],
)
def test_a_bad_option_is_named_with_the_reason(argv: list[str], reported: str) -> None:
    with pytest.raises(CrawlRequestError) as raised:
        crawl_request(build_parser().parse_args(["seed", *argv]))
    assert reported in str(raised.value)


def _seeds_file_request(path: Path | str, *argv: str) -> CrawlRequest:
    return crawl_request(build_parser().parse_args(["seed", *argv, f"--seeds-file={path}"]))


def test_a_seed_list_file_adds_its_urls_after_the_arguments(tmp_path: Path) -> None:
    listed = tmp_path / "seeds.txt"
    listed.write_text(
        "# news sites\n"
        "https://news.example.org/\n"
        "\n"
        "   http://example.net/start  \n"
        "https://example.com/a\tnutch.score=2.5\tcategory=news\n",
        encoding="utf-8",
    )
    request = _seeds_file_request(listed, SEED, "--max-depth=1")
    assert request.seeds == [
        SEED,
        "https://news.example.org/",
        "http://example.net/start",
        "https://example.com/a",
    ]
    assert request.max_depth == 1


def test_a_seed_list_is_read_from_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("https://example.org/\nhttps://example.net/\n"))
    assert _seeds_file_request("-").seeds == ["https://example.org/", "https://example.net/"]


def test_a_seed_lists_bad_lines_are_named_by_number_and_counted_past_ten(tmp_path: Path) -> None:
    listed = tmp_path / "seeds.txt"
    lines = ["https://example.org/", "ftp://example.org/file", "example.net"]
    lines += [f"mailto:user{n}@example.org" for n in range(12)]
    listed.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CrawlRequestError) as raised:
        _seeds_file_request(listed)
    message = str(raised.value)
    assert "--seeds-file line 2: only http and https URLs are crawled" in message
    assert "--seeds-file line 3: only http and https URLs are crawled, not 'example.net'" in message
    assert "--seeds-file line 11:" in message
    assert "--seeds-file line 12:" not in message
    assert "... and 4 more bad lines" in message


def test_a_seed_list_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    with pytest.raises(CrawlRequestError) as raised:
        _seeds_file_request(tmp_path / "missing.txt", SEED)
    assert f"--seeds-file: cannot read {tmp_path / 'missing.txt'}:" in str(raised.value)
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("https://example.org/caf\u00e9\n".encode("latin-1"))
    with pytest.raises(CrawlRequestError, match=r"--seeds-file: cannot read .*utf-8"):
        _seeds_file_request(latin)


def test_a_crawl_needs_a_seed_and_at_most_max_seeds(tmp_path: Path) -> None:
    with pytest.raises(CrawlRequestError, match="no seed URLs: give them as arguments or with"):
        crawl_request(build_parser().parse_args(["seed", "--max-depth=1"]))
    empty = tmp_path / "comments-only.txt"
    empty.write_text("# nothing yet\n\n", encoding="utf-8")
    with pytest.raises(CrawlRequestError, match="no seed URLs"):
        _seeds_file_request(empty)
    many = tmp_path / "many.txt"
    many.write_text(
        "".join(f"https://example.org/{n}\n" for n in range(MAX_SEEDS + 1)), encoding="utf-8"
    )
    with pytest.raises(CrawlRequestError) as raised:
        _seeds_file_request(many)
    assert f"at most {MAX_SEEDS} seed URLs in one crawl, not {MAX_SEEDS + 1}" in str(raised.value)


def test_a_seed_list_over_what_a_crawl_request_may_take_is_refused_with_a_size_to_split_to(
    tmp_path: Path,
) -> None:
    listed = tmp_path / "long.txt"
    urls = [
        f"https://en.wikipedia.org/wiki/Some_rather_long_article_title_{n:08d}"
        for n in range(80_000)
    ]
    listed.write_text("\n".join(urls), encoding="utf-8")
    with pytest.raises(CrawlRequestError) as raised:
        _seeds_file_request(listed)
    size = len(encode(CrawlRequest(seeds=urls)))
    fitting = int(re.findall(r"crawls of about (\d+) at most", str(raised.value))[0])
    assert 0.98 < fitting * size / 80_000 / MAX_REQUEST_BYTES < 1.0
    assert str(raised.value) == (
        f"the crawl request takes {size / MIB:.1f} MiB, over the 4.0 MiB a crawl request may "
        f"take: split its 80000 seed URLs into crawls of about {fitting} at most"
    )
    listed.write_text("\n".join(urls[:fitting]), encoding="utf-8")
    assert len(_seeds_file_request(listed).seeds) == fitting, "the size it names fits"


def test_every_bad_option_is_reported_at_once() -> None:
    with pytest.raises(CrawlRequestError) as raised:
        _request("--include=(", "--max-retries=1000", "--content-type=pdf")
    message = str(raised.value)
    assert "--include:" in message and "--max-retries:" in message
    assert "--content-type:" in message


def test_a_bad_request_exits_2_with_the_reason_and_publishes_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No broker answers here: a request that got as far as publishing would fail otherwise.
    monkeypatch.setenv("STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS", "127.0.0.1:9")
    assert main(["seed", "ftp://example.com/", "--max-links=-7"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("streamcrawl: not a valid crawl request:")
    assert "seed URL: only http and https URLs are crawled" in error
    assert "--max-links: Input should be greater than or equal to -1" in error
    assert "Traceback" not in error


def test_the_cli_clients_log_errors_only_unless_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS", "broker.test:9092")
    monkeypatch.delenv("STREAMCRAWL_KAFKA__CONFIG", raising=False)
    settings = cli_settings()
    assert settings.kafka.librdkafka() == {
        "bootstrap.servers": "broker.test:9092",
        "log_level": CLIENT_LOG_LEVEL,
    }
    monkeypatch.setenv("STREAMCRAWL_KAFKA__CONFIG", '{"log_level": "7", "debug": "broker"}')
    assert cli_settings().kafka.librdkafka()["log_level"] == "7"


def test_graph_filters_take_any_case_and_refuse_unknown_values(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = build_parser().parse_args(
        ["graph", "in", SEED, "--link-type=nofollow", "--position=Nav"]
    )
    assert (args.link_type, args.position) == ("NOFOLLOW", "NAV")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["graph", "out", SEED, "--link-type=dofollow"])
    assert "invalid choice: 'DOFOLLOW'" in capsys.readouterr().err


def test_status_lists_each_instance_aligned_with_the_addresses_it_serves() -> None:
    def instance(name: str, http: str, api: str | None, ready: bool = True) -> dict[str, object]:
        return {"instance": name, "http": http, "api": api, "ready": ready, "partitions": []}

    report = StatusReport(
        broker=True,
        roles={
            "parser": {"instances": [instance("parser-0", "h:1", None)], "ready_instances": 1},
            "linkgraph": {
                "instances": [instance("linkgraph-10", "h:2", "h:3", ready=False)],
                "ready_instances": 0,
            },
            "linkgraph-ranker": {
                "instances": [instance("linkgraph-10", "h:3", "h:3")],
                "ready_instances": 1,
            },
        },
    )
    assert instance_lines(report) == [
        "linkgraph         linkgraph-10  starting  metrics http://h:2/metrics  api http://h:3",
        "linkgraph-ranker  linkgraph-10  ready     api http://h:3",  # its metrics: linkgraph's
        "parser            parser-0      ready     metrics http://h:1/metrics",
    ]


def test_a_command_needing_the_stack_says_at_once_that_no_broker_answers(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS", "127.0.0.1:9")  # nothing listens
    assert main(["graph", "top"]) == 2
    error = capfd.readouterr().err  # librdkafka writes to the file descriptor, not sys.stderr
    assert error == (
        "streamcrawl: no Kafka broker answers at 127.0.0.1:9: start the stack (streamcrawl up) "
        "or set STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS\n"
    )


def test_the_summary_says_when_a_limit_ended_the_crawl() -> None:
    counters = {"fetched": 159, "admitted": 485}
    timed_out = CrawlView("done", counters, ended_by="max_duration")
    assert summary_lines(CrawlSummary("c1", timed_out))[0] == (
        "status: done (its max duration was reached: its queued URLs were dropped)"
    )
    assert summary_lines(CrawlSummary("c1", CrawlView("done", counters)))[0] == "status: done"


def test_the_summary_points_at_the_dead_urls_when_there_are_some() -> None:
    hint = "dead URLs and why: streamcrawl deadletters --crawl-id c1"
    with_dead = CrawlView("done", {"fetched": 30, "dead": 3})
    assert hint in summary_lines(CrawlSummary("c1", with_dead))
    broken = "broken links and the pages linking: streamcrawl broken c1"
    assert broken in summary_lines(CrawlSummary("c1", with_dead))
    without = CrawlView("done", {"fetched": 30})
    assert not [line for line in summary_lines(CrawlSummary("c1", without)) if "dead URLs" in line]


def test_the_summary_points_at_the_items_of_a_crawl_that_extracts() -> None:
    hint = "extracted items: streamcrawl items c1"
    extracting = CrawlView("done", {"fetched": 30}, extracts=True)
    assert hint in summary_lines(CrawlSummary("c1", extracting))
    plain = CrawlView("done", {"fetched": 30})
    assert hint not in summary_lines(CrawlSummary("c1", plain))


def test_the_summary_points_at_the_near_duplicates_of_a_crawl_that_signs_pages() -> None:
    hint = "near-duplicate pages: streamcrawl duplicates c1 --near"
    assert hint in summary_lines(CrawlSummary("c1", CrawlView("done", {}, signs_text=True)))
    assert hint not in summary_lines(CrawlSummary("c1", CrawlView("done", {})))


def test_the_summary_says_what_recrawls_found_when_there_were_some() -> None:
    recrawled = CrawlView(
        "cancelled", {"fetched": 40, "recrawls": 30, "changed": 4, "unchanged": 26}
    )
    assert "recrawls: 30  found changed: 4  unchanged: 26" in summary_lines(
        CrawlSummary("c1", recrawled)
    )
    never = CrawlView("done", {"fetched": 30})
    assert not [line for line in summary_lines(CrawlSummary("c1", never)) if "recrawls" in line]


def test_progress_shows_urls_waiting_for_a_retry() -> None:
    """A crawl whose only URLs wait for a retry (a 503 host, an unreachable robots.txt) is not
    stalled: the line says how many wait."""
    view = CrawlView("active", {"fetched": 12, "queued": 0, "leased": 0, "delayed": 3})
    line = progress_line(view, 0.0, 42.0)
    assert line.startswith(
        "[  42.0s] active fetched=12 queued=0 leased=0 delayed=3 hosts_held=0 failed=0"
    )


def test_progress_shows_hosts_held_back() -> None:
    """A crawl whose queued URLs are all on a host held by a Retry-After or an unreadable
    robots.txt leases nothing for a while: the line says a host is held."""
    view = CrawlView("active", {"fetched": 73, "queued": 326, "leased": 0, "hosts_held": 1})
    assert " queued=326 leased=0 delayed=0 hosts_held=1 " in progress_line(view, 0.0, 17.0)


def test_the_readme_recipes_are_commands_the_cli_takes() -> None:
    """Each `streamcrawl` command of the README's recipes parses, and each crawl request in them is
    valid (a seeds file aside: it is the user's)."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = readme.split("## What people crawl with it", 1)[1].split("```sh", 1)[1].split("```")[0]
    lines = block.replace("\\\n", " ").splitlines()
    commands = [
        part.strip()
        for line in lines
        if not line.startswith("#")
        for part in line.split(";")
        if part.strip()
    ]
    assert len(commands) >= 10
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "streamcrawl", command
        args = build_parser().parse_args(words[1:])
        if words[1] in ("crawl", "seed") and "--seeds-file" not in words:
            crawl_request(args)
