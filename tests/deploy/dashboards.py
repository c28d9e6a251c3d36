"""Reading the shipped dashboards: their panels, targets, and the metric names each query uses."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.deploy.contract import Family, families
from tests.deploy.tools import GRAFANA_DIR

DASHBOARD_DIR = GRAFANA_DIR / "dashboards"
METRIC_NAME = re.compile(r"\bstreamcrawl_[a-z0-9_]+")
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    panel: str
    ref_id: str
    expr: str

    @property
    def where(self) -> str:
        return f"{self.dashboard} / {self.panel} / {self.ref_id}"

    @property
    def metrics(self) -> set[str]:
        return set(METRIC_NAME.findall(self.expr))


def dashboard_paths() -> list[Path]:
    return sorted(DASHBOARD_DIR.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def panel_queries(path: Path) -> list[PanelQuery]:
    document = load(path)
    return [
        PanelQuery(document["uid"], panel["title"], target["refId"], target["expr"])
        for panel in document["panels"]
        for target in panel.get("targets", [])
    ]


def family_of(series: str, known: dict[str, Family]) -> Family | None:
    """The contract family a series name in a query belongs to (histogram suffixes stripped)."""
    if series in known:
        return known[series]
    for suffix in HISTOGRAM_SERIES:
        base = series.removesuffix(suffix)
        if base != series and base in known and known[base].kind == "histogram":
            return known[base]
    return None


def every_family(roles: tuple[str, ...]) -> dict[str, Family]:
    return {family.name: family for role in roles for family in families(role)}
