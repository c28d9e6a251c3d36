"""The command line as a user meets it: every option explained, every crawl request field settable,
and a bad option a clear error naming it (no traceback, nothing published)."""

from __future__ import annotations

import argparse

import pytest

from schemas.seeds import CrawlRequest
from streamcrawl.cli import CLIENT_LOG_LEVEL, build_parser, cli_settings, main
from streamcrawl.crawl_cli import OPTIONS, CrawlRequestError, crawl_request
from streamcrawl.status import StatusReport, instance_lines
from streamcrawl.summary import CrawlSummary, summary_lines
from streamcrawl.watch import CrawlView

SEED = "https://example.com/"
FLAGS = {
    "respect_robots": "--ignore-robots",
    "use_sitemaps": "--sitemaps",
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
        "--max-links=5000",
        "--max-pages-per-host=200",
        "--max-duration-s=1.5",
        "--delay-ms=250",
        "--ignore-robots",
        "--max-retries=1",
        "--max-redirects=2",
        "--content-type=html",
        "--content-type=application/pdf",
        "--recrawl-hours=12",
        "--priority=novelty",
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
        "max_retries": 1,
        "recrawl_interval_hours": 12.0,
        "content_types": ["text/html", "application/xhtml+xml", "application/pdf"],
        "respect_robots": False,
        "use_sitemaps": True,
        "priority": "novelty",
        "follow_nofollow": True,
        "max_redirects": 2,
        "scope_score_threshold": 0.4,
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
    ],
)
def test_a_bad_option_is_named_with_the_reason(argv: list[str], reported: str) -> None:
    with pytest.raises(CrawlRequestError) as raised:
        crawl_request(build_parser().parse_args(["seed", *argv]))
    assert reported in str(raised.value)


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
