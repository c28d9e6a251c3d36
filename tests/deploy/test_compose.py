"""deploy/docker-compose.yml: KRaft Kafka, a one-shot topic creator, every service scalable, a
shared storage volume, Prometheus scraping every replica, Grafana provisioned. Read, not run: no
Docker engine here (deploy/README.md says what was verified)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from streamcrawl.stack import ROLES
from tests.deploy.container import dockerfile_env
from tests.deploy.settings_names import check
from tests.deploy.tools import DEPLOY, GRAFANA_DIR, PROMETHEUS_DIR, load_yaml, promtool

COMPOSE = DEPLOY / "docker-compose.yml"
STATEFUL = ("frontier", "linkgraph", "storage")


def _compose() -> dict[str, Any]:
    document = load_yaml(COMPOSE)
    assert isinstance(document, dict)
    return document


def _services() -> dict[str, Any]:
    services: dict[str, Any] = _compose()["services"]
    return services


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Volume and bind sources to their targets (`source:target[:mode]`)."""
    return dict(mount.split(":")[:2] for mount in service.get("volumes", []))


def test_every_role_runs_from_the_one_image_and_scales() -> None:
    services = _services()
    images = {services[role]["image"] for role in (*ROLES, "topics")}
    assert len(images) == 1 and images.pop().endswith("streamcrawl:0.1.0}")
    for role in ROLES:
        service = services[role]
        assert service["command"] == ["python", "-m", role]
        assert "container_name" not in service, f"{role} could not --scale"
        for port in service.get("ports", []):
            assert re.fullmatch(r"\d+-\d+:\d+", str(port)), f"{role}: fixed host port {port}"
        assert service["depends_on"] == {"topics": {"condition": "service_completed_successfully"}}
        assert (
            service["build"]["context"] == ".."
            and (COMPOSE.parent / "..").resolve().joinpath(service["build"]["dockerfile"]).exists()
        )
        assert "9400/healthz" in " ".join(service["healthcheck"]["test"])


def test_the_environment_names_real_settings_and_reaches_kafka() -> None:
    services = _services()
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert "controller" in kafka["environment"]["KAFKA_PROCESS_ROLES"]  # KRaft, no ZooKeeper
    advertised = kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"].removeprefix("PLAINTEXT://")
    for name in (*ROLES, "topics"):
        env = services[name]["environment"]
        assert env["STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS"] == advertised
        problems = [p for key in env if (p := check(name if name in ROLES else None, key))]
        assert not [p for p in problems if not p.startswith("unchecked")], problems


def test_topics_are_created_once_before_the_services() -> None:
    topics = _services()["topics"]
    assert topics["command"] == ["streamcrawl", "topics", "create"]
    assert topics["restart"] == "no"
    assert topics["depends_on"] == {"kafka": {"condition": "service_healthy"}}


def test_state_and_the_shared_page_store_are_volumes() -> None:
    services, volumes = _services(), _compose()["volumes"]
    env = dockerfile_env()
    for role in STATEFUL:
        mounts = dict(
            m.rsplit(":", 1) if m.count(":") == 1 else m.split(":")[:2]
            for m in services[role]["volumes"]
        )
        assert mounts[f"{role}-state"] == env["STREAMCRAWL_STATE__DIRECTORY"]
    assert _mounts(services["storage"])["storage-data"] == env["STREAMCRAWL_STORAGE__ROOT"]
    for service in services.values():
        for source in _mounts(service):
            assert source in volumes or (COMPOSE.parent / source).exists(), source


def test_prometheus_scrapes_every_replica_of_every_role(tmp_path: Path) -> None:
    services = _services()
    prometheus = services["prometheus"]
    assert _mounts(prometheus)["./prometheus/alerts.yml"] == "/etc/prometheus/alerts.yml"
    config_path = COMPOSE.parent / "prometheus" / "prometheus.yml"
    config = load_yaml(config_path)
    assert isinstance(config, dict)
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    port = int(dockerfile_env()["STREAMCRAWL_HTTP__PORT"])
    for role in ROLES:
        (sd,) = jobs[f"streamcrawl-{role}"]["dns_sd_configs"]
        assert sd["names"] == [role] and sd["type"] == "A" and sd["port"] == port
    config["rule_files"] = [str(PROMETHEUS_DIR / "alerts.yml")]
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(config))
    checked = promtool("check", "config", local)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_grafana_is_provisioned_with_the_dashboards() -> None:
    grafana = _services()["grafana"]
    mounts = _mounts(grafana)
    assert (COMPOSE.parent / "grafana" / "provisioning").resolve() == GRAFANA_DIR / "provisioning"
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    provider = load_yaml(GRAFANA_DIR / "provisioning" / "dashboards" / "streamcrawl.yml")
    assert isinstance(provider, dict)
    assert mounts["./grafana/dashboards"] == provider["providers"][0]["options"]["path"]
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home.startswith(mounts["./grafana/dashboards"] + "/")
    assert (GRAFANA_DIR / "dashboards" / home.rsplit("/", 1)[1]).exists()
