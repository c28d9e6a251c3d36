"""deploy/prometheus/alerts.yml: valid for promtool; every alert unit-tested firing and quiet."""

from __future__ import annotations

from typing import Any

from streamcrawl.stack import ROLES
from tests.deploy.tools import PROMETHEUS_DIR, load_yaml, promtool

ALERTS = PROMETHEUS_DIR / "alerts.yml"
ALERT_TESTS = PROMETHEUS_DIR / "alerts_test.yml"


def _rules() -> list[dict[str, Any]]:
    document = load_yaml(ALERTS)
    assert isinstance(document, dict)
    return [rule for group in document["groups"] for rule in group["rules"]]


def _alert_cases() -> list[dict[str, Any]]:
    document = load_yaml(ALERT_TESTS)
    assert isinstance(document, dict)
    return [case for test in document["tests"] for case in test.get("alert_rule_test", [])]


def test_promtool_accepts_the_rules() -> None:
    checked = promtool("check", "rules", ALERTS)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in checked.stdout


def test_promtool_unit_tests_pass() -> None:
    tested = promtool("test", "rules", ALERT_TESTS)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    alerts = {rule["alert"] for rule in _rules() if "alert" in rule}
    firing = {case["alertname"] for case in _alert_cases() if case.get("exp_alerts")}
    quiet = {case["alertname"] for case in _alert_cases() if not case.get("exp_alerts")}
    assert {
        "StreamcrawlStageStalled",
        "StreamcrawlDeadLetterRate",
        "StreamcrawlFetchErrorRatio",
        "StreamcrawlOldestReadyUrlAgeing",
        "StreamcrawlServiceDown",
    } <= alerts
    assert alerts - firing == set(), "alerts never tested firing"
    # The stall case's quiet side is the fetcher and linkgraph instances absent from its firings.
    assert alerts - quiet - {"StreamcrawlStageStalled"} == set(), "alerts never tested quiet"


def test_every_stage_is_folded_into_the_stage_series() -> None:
    recorded: dict[str, set[str]] = {}
    for rule in _rules():
        if "record" in rule:
            recorded.setdefault(rule["record"], set()).add(rule["labels"]["stage"])
            assert f"streamcrawl_{rule['labels']['stage']}_" in rule["expr"]
    assert recorded, "no recording rules"
    for record, stages in recorded.items():
        assert stages == set(ROLES), f"{record} misses {set(ROLES) - stages}"


def test_every_alert_says_what_and_how_bad() -> None:
    for rule in _rules():
        if "alert" in rule:
            assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]
