"""deploy/k8s: the manifests parse and agree with the image, the settings, the ports and topics.

Read, not applied: no cluster here. Stateless stages are Deployments, stateful ones StatefulSets
with a volume per pod; fetchers and parsers scale on their groups' lag through KEDA.
"""

from __future__ import annotations

import functools
import importlib.util
import tomllib
from pathlib import Path
from typing import Any

import yaml

from schemas import fetch, pages
from streamcrawl.service import service_spec
from streamcrawl.settings import Settings
from streamcrawl.spec import Input
from streamcrawl.stack import ROLES
from tests.deploy.container import dockerfile_env
from tests.deploy.settings_names import check
from tests.deploy.tools import DEPLOY, PROMETHEUS_DIR, load_yaml, load_yaml_documents, promtool
from tests.support import REPO

K8S = DEPLOY / "k8s"
STATEFUL = ("frontier", "linkgraph", "storage")
SCALED_ON_LAG = {"fetcher": fetch.TOPIC.suffix, "parser": pages.TOPIC.suffix}


@functools.cache
def _documents() -> list[dict[str, Any]]:
    """Every manifest (parsed once; the tests only read them)."""
    documents = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            documents.extend(d for d in load_yaml_documents(path) if isinstance(d, dict))
    return documents


def _find(kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in _documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def _config() -> dict[str, str]:
    data: dict[str, str] = _find("ConfigMap", "streamcrawl-config")["data"]
    return data


def _version() -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    version: str = project["project"]["version"]
    return version


def _workload(role: str) -> dict[str, Any]:
    return _find("StatefulSet" if role in STATEFUL else "Deployment", f"streamcrawl-{role}")


def test_kustomize_lists_every_manifest() -> None:
    kustomization = load_yaml(K8S / "kustomization.yaml")
    assert isinstance(kustomization, dict)
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk
    (image,) = kustomization["images"]
    assert image == {"name": "streamcrawl", "newTag": _version()}


def test_each_stage_runs_the_image_with_its_command_ports_and_probes() -> None:
    env = dockerfile_env()
    metrics_port = int(env["STREAMCRAWL_HTTP__PORT"])
    for role in ROLES:
        pod = _workload(role)["spec"]["template"]
        (container,) = pod["spec"]["containers"]
        assert container["image"] == f"streamcrawl:{_version()}"
        assert container["command"] == ["python", "-m", role]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["metrics"] == metrics_port
        if "api" in ports:
            assert ports["api"] == int(env[f"STREAMCRAWL_{role.upper()}__API_PORT"])
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        security = pod["spec"]["securityContext"]
        assert security["runAsNonRoot"] is True and security["runAsUser"] == 10001
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["envFrom"] == [{"configMapRef": {"name": "streamcrawl-config"}}]
        names = {item["name"]: item for item in container["env"]}
        assert names["STREAMCRAWL_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == (
            "metadata.name"
        )
        assert names["STREAMCRAWL_HTTP__HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == (
            "status.podIP"
        )
        # Pods of a Deployment are not restarted under their name: static members would hold
        # a scaled-in pod's partitions for a session timeout. A StatefulSet's pods are.
        static = names.get("STREAMCRAWL_LOOP__STATIC_MEMBERSHIP", {}).get("value", "true")
        assert static == ("false" if _workload(role)["kind"] == "Deployment" else "true"), role
        problems = [p for name in names if (p := check(role, name))]
        assert not [p for p in problems if not p.startswith("unchecked")], problems


def test_the_config_names_real_settings() -> None:
    problems = [p for name in _config() if (p := check(None, name))]
    assert not problems
    assert int(_config()["STREAMCRAWL_KAFKA__PARTITIONS"]) >= 1


def test_stateful_stages_keep_a_volume_per_pod() -> None:
    state_dir = dockerfile_env()["STREAMCRAWL_STATE__DIRECTORY"]
    for role in STATEFUL:
        statefulset = _workload(role)
        (claim,) = statefulset["spec"]["volumeClaimTemplates"]
        assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
        (container,) = statefulset["spec"]["template"]["spec"]["containers"]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert mounts[claim["metadata"]["name"]] == state_dir
        assert statefulset["spec"]["serviceName"] == f"streamcrawl-{role}"
    storage = _workload("storage")["spec"]["template"]["spec"]
    (pages_volume,) = storage["volumes"]
    claim_name = pages_volume["persistentVolumeClaim"]["claimName"]
    assert _find("PersistentVolumeClaim", claim_name)["spec"]["accessModes"] == ["ReadWriteMany"]
    (container,) = storage["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[pages_volume["name"]] == dockerfile_env()["STREAMCRAWL_STORAGE__ROOT"]


def test_services_select_their_pods_and_are_scraped() -> None:
    monitor = _find("ServiceMonitor", "streamcrawl")
    selector = monitor["spec"]["selector"]["matchLabels"]
    (endpoint,) = monitor["spec"]["endpoints"]
    for role in ROLES:
        service = _find("Service", f"streamcrawl-{role}")
        pod_labels = _workload(role)["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= pod_labels.items()
        assert selector.items() <= service["metadata"]["labels"].items()
        assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_fetchers_and_parsers_scale_on_their_groups_lag() -> None:
    config = _config()
    prefix, partitions = (
        config["STREAMCRAWL_KAFKA__TOPIC_PREFIX"],
        config["STREAMCRAWL_KAFKA__PARTITIONS"],
    )
    scaled = [d for d in _documents() if d["kind"] == "ScaledObject"]
    assert {d["spec"]["scaleTargetRef"]["name"] for d in scaled} == {
        f"streamcrawl-{role}" for role in SCALED_ON_LAG
    }
    for role, topic in SCALED_ON_LAG.items():
        spec = _find("ScaledObject", f"streamcrawl-{role}")["spec"]
        assert _workload(role)["kind"] == "Deployment"
        (trigger,) = spec["triggers"]
        assert trigger["type"] == "kafka"
        metadata = trigger["metadata"]
        settings = Settings(kafka={"topic_prefix": prefix})
        service = service_spec(settings, role, (Input(metadata["topic"], lambda raw: raw),))
        assert metadata["consumerGroup"] == service.group_id
        assert metadata["topic"] == f"{prefix}{topic}"
        assert metadata["bootstrapServers"] == config["STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS"]
        assert int(metadata["lagThreshold"]) > 0
        assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"] <= int(partitions)


def test_the_operator_evaluates_the_unit_tested_rules() -> None:
    rule = _find("PrometheusRule", "streamcrawl")
    alerts = load_yaml(PROMETHEUS_DIR / "alerts.yml")
    assert isinstance(alerts, dict)
    assert rule["spec"]["groups"] == alerts["groups"]
    spec = importlib.util.spec_from_file_location("build", K8S / "build_prometheus_rule.py")
    assert spec is not None and spec.loader is not None
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    assert (K8S / "prometheus-rule.yaml").read_text() == builder.render(), (
        "run deploy/k8s/build_prometheus_rule.py"
    )


def test_the_topic_job_creates_the_topics() -> None:
    (container,) = _find("Job", "streamcrawl-topics")["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["streamcrawl", "topics", "create"]
    assert container["image"] == f"streamcrawl:{_version()}"


def test_the_plain_prometheus_scrape_config_is_valid(tmp_path: Path) -> None:
    config = yaml.safe_load(_find("ConfigMap", "streamcrawl-prometheus")["data"]["prometheus.yml"])
    config["rule_files"] = [str(PROMETHEUS_DIR / "alerts.yml")]
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(config))
    checked = promtool("check", "config", local)
    if "kubernetes_sd_configs not found" in checked.stdout + checked.stderr:
        # Debian builds Prometheus without Kubernetes discovery: check the rest of the job.
        for job in config["scrape_configs"]:
            assert job.pop("kubernetes_sd_configs")[0]["role"] == "pod"
            job["static_configs"] = [{"targets": ["pod:9400"]}]
        local.write_text(yaml.safe_dump(config))
        checked = promtool("check", "config", local)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (job,) = config["scrape_configs"]
    relabels = {r.get("target_label"): r for r in job["relabel_configs"]}
    assert relabels["job"]["source_labels"] == [
        "__meta_kubernetes_pod_label_app_kubernetes_io_name"
    ]
