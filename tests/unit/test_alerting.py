"""Alert delivery: Prometheus -> the compose ``alertmanager`` service -> receivers routed by severity; and the
redis_exporter scrape. Structure always (YAML); ``amtool check-config`` and ``amtool config routes test`` when
amtool is installed (Debian: apt-get install -y prometheus-alertmanager)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
AM_CONFIG = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
COMPOSE = ROOT / "docker-compose.yml"


def load(path: Path):
    return yaml.safe_load(path.read_text())


def severities() -> set[str]:
    return {r["labels"]["severity"] for g in load(ALERTS)["groups"] for r in g["rules"] if "alert" in r}


def pinned(image: str) -> bool:
    return bool(re.fullmatch(r"[\w./-]+:v?\d+\.\d+\.\d+[\w.-]*", image))


def container_port(service: dict, default: int) -> int:
    for arg in service.get("command") or []:
        if str(arg).startswith("--web.listen-address="):
            return int(str(arg).rsplit(":", 1)[1])
    return default


def mounted_config(service: dict, flag: str) -> Path:
    """The host file behind ``--<flag>=<container path>`` through the service's bind mounts."""
    (target,) = [str(a).split("=", 1)[1] for a in service["command"] if str(a).startswith(f"--{flag}=")]
    for vol in service["volumes"]:
        src, dst = vol.split(":")[:2]
        if src.startswith("./") and target.startswith(dst.rstrip("/") + "/"):
            return ROOT / src[2:] / target[len(dst.rstrip("/")) + 1 :]
    raise AssertionError(f"{target} is not bind-mounted from the repository")


def test_prometheus_sends_alerts_to_the_compose_alertmanager():
    services = load(COMPOSE)["services"]
    am = services["alertmanager"]
    assert pinned(am["image"]) and am["image"].startswith("prom/alertmanager:"), am["image"]
    assert mounted_config(am, "config.file") == AM_CONFIG
    cfg = load(PROMETHEUS)
    targets = [t for a in cfg["alerting"]["alertmanagers"] for sc in a["static_configs"] for t in sc["targets"]]
    assert targets == [f"alertmanager:{container_port(am, 9093)}"]
    assert "alertmanager" in services["prometheus"].get("depends_on", [])
    mounted = mounted_config(services["prometheus"], "config.file")
    assert mounted == PROMETHEUS
    for rules in cfg["rule_files"]:  # relative to the mounted directory
        assert (PROMETHEUS.parent / rules).exists(), rules


def test_redis_exporter_is_scraped():
    services = load(COMPOSE)["services"]
    exporter = services["redis-exporter"]
    assert pinned(exporter["image"]) and exporter["image"].startswith("oliver006/redis_exporter:"), exporter["image"]
    addr = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", exporter["environment"]["REDIS_ADDR"])  # compose defaults
    assert addr.removesuffix("/0") == "redis://redis:6379"
    assert "redis" in exporter["depends_on"]
    jobs = {j["job_name"]: j for j in load(PROMETHEUS)["scrape_configs"]}
    assert [t for sc in jobs["redis"]["static_configs"] for t in sc["targets"]] == ["redis-exporter:9121"]


def test_alertmanager_routes_every_severity():
    cfg = load(AM_CONFIG)
    receivers = {r["name"]: r for r in cfg["receivers"]}
    route = cfg["route"]
    assert route["receiver"] in receivers
    routed = {}
    for sub in route["routes"]:
        (matcher,) = sub["matchers"]
        m = re.fullmatch(r'severity="(\w+)"', matcher)
        assert m, matcher
        routed[m.group(1)] = sub["receiver"]
    assert severities() <= set(routed), severities() - set(routed)
    assert routed["critical"] != routed["warning"]
    for name, receiver in receivers.items():
        configs = [k for k in receiver if k.endswith("_configs")]
        assert configs, f"receiver {name} notifies no one"
    assert any("email_configs" in r for r in receivers.values())
    assert any("webhook_configs" in r for r in receivers.values())


amtool = pytest.mark.skipif(not shutil.which("amtool"),
                            reason="amtool not installed (Debian: apt-get install -y prometheus-alertmanager)")


@amtool
def test_amtool_check_config():
    proc = subprocess.run(["amtool", "check-config", str(AM_CONFIG)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


@amtool
@pytest.mark.parametrize(("labels", "receiver"), [
    (["severity=critical", "alertname=GraphfleetQueueHasNoConsumer", "queue=merger"], "oncall"),
    (["severity=warning", "alertname=GraphfleetRedisMemoryHigh"], "team"),
    (["alertname=Unlabelled"], "default"),
])
def test_amtool_routes_by_severity(labels, receiver):
    proc = subprocess.run(["amtool", "config", "routes", "test", f"--config.file={AM_CONFIG}", *labels],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split() == [receiver]
