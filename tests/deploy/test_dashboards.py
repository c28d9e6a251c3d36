"""The Grafana files without a server: generated, provisioned, and querying only real metrics."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

from streamcrawl.stack import ROLES
from tests.deploy.contract import STATEFUL
from tests.deploy.dashboards import (
    DASHBOARD_DIR,
    dashboard_paths,
    every_family,
    family_of,
    load,
    panel_queries,
)
from tests.deploy.tools import GRAFANA_DIR, load_yaml


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_dashboards", GRAFANA_DIR / "build_dashboards.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _datasource_uid() -> str:
    document = load_yaml(GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml")
    assert isinstance(document, dict)
    (datasource,) = document["datasources"]
    assert datasource["type"] == "prometheus"
    uid: str = datasource["uid"]
    return uid


def test_the_json_is_the_builders_output() -> None:
    builder = _builder()
    assert tuple(builder.ROLES) == ROLES
    assert {path.name for path in dashboard_paths()} == set(builder.DASHBOARDS)
    for path in dashboard_paths():
        assert path.read_text() == builder.render(path.name), (
            f"{path.name} differs from deploy/grafana/build_dashboards.py: run it"
        )


def test_the_provider_serves_the_dashboards_directory() -> None:
    document = load_yaml(GRAFANA_DIR / "provisioning" / "dashboards" / "streamcrawl.yml")
    assert isinstance(document, dict)
    (provider,) = document["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards/streamcrawl"
    assert DASHBOARD_DIR.is_dir()


def test_every_panel_uses_the_provisioned_datasource_and_known_metrics() -> None:
    uid = _datasource_uid()
    known = every_family(ROLES)
    for path in dashboard_paths():
        document = load(path)
        assert document["uid"].startswith("streamcrawl-")
        ids = [panel["id"] for panel in document["panels"]]
        assert len(ids) == len(set(ids)), f"{path.name}: duplicate panel ids"
        for panel in document["panels"]:
            if panel["type"] == "row":
                continue
            assert panel["datasource"]["uid"] == uid, panel["title"]
            assert panel["targets"], f"{path.name}: {panel['title']} has no query"
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == uid
        for query in panel_queries(path):
            assert query.metrics, f"{query.where}: no streamcrawl_ metric in {query.expr}"
            unknown = {m for m in query.metrics if family_of(m, known) is None}
            assert not unknown, f"{query.where}: {unknown} are not metrics any service exports"


def test_every_contract_metric_is_on_a_dashboard() -> None:
    known = every_family(ROLES)
    stateless = {f"streamcrawl_{role}_state_" for role in ROLES if role not in STATEFUL}
    shown = {
        family.name
        for path in dashboard_paths()
        for query in panel_queries(path)
        for metric in query.metrics
        if (family := family_of(metric, known)) is not None
    }
    expected = {name for name in known if not name.startswith(tuple(stateless))}
    assert expected - shown == set()


def test_the_crawl_dashboard_is_per_crawl() -> None:
    document = load(DASHBOARD_DIR / "crawl.json")
    (variable,) = document["templating"]["list"]
    assert variable["name"] == "crawl_id"
    assert variable["query"]["query"] == "label_values(streamcrawl_frontier_crawl_urls, crawl_id)"
    per_crawl = [q for q in panel_queries(DASHBOARD_DIR / "crawl.json") if "$crawl_id" in q.expr]
    shared = [q for q in panel_queries(DASHBOARD_DIR / "crawl.json") if "$crawl_id" not in q.expr]
    assert len(per_crawl) >= 10
    assert all(q.panel.endswith("(all crawls)") for q in shared), "unfiltered panel not marked"


def test_rates_follow_grafanas_rate_interval() -> None:
    """A fixed window breaks when the scrape interval changes; $__rate_interval follows it."""
    for path in dashboard_paths():
        for query in panel_queries(path):
            for window in re.findall(r"\b(?:rate|increase|deriv)\([^\[]*\[([^\]]+)\]", query.expr):
                assert window == "$__rate_interval", f"{query.where}: [{window}]"
