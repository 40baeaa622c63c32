"""docker-compose.yml, images, Prometheus and Grafana provisioning.

Structure is checked always. The compose file is validated against the compose JSON schema vendored in
tests/data/compose-spec.json (the one docker-compose 1.29 validates with), with the values of .env.example (the
secrets have no defaults); ``docker-compose config`` runs in test_deploy_secrets.py, the image installs in
test_deploy_images.py. ``promtool`` checks run when it is installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shared.infra.messaging.queueing import QUEUES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DEPLOY = ROOT / "deploy"
SCHEMA = ROOT / "tests" / "data" / "compose-spec.json"
ENV_EXAMPLE = ROOT / ".env.example"
GRAFANA_DASHBOARDS = "/var/lib/grafana/dashboards/graphfleet"


def load_yaml(path: Path):
    """PyYAML when importable, else the system python3's yaml (Debian's python3-yaml) as a JSON bridge."""
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml is not None:
        return yaml.safe_load(path.read_text())
    for py in ("/usr/bin/python3", shutil.which("python3")):
        if py and os.path.exists(py) and os.path.realpath(py) != os.path.realpath(sys.executable):
            proc = subprocess.run([py, "-c", "import json,sys,yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)"],
                                  input=path.read_text(), capture_output=True, text=True, timeout=60)
            if proc.returncode == 0:
                return json.loads(proc.stdout)
    pytest.skip("no YAML parser: install PyYAML (pip install pyyaml) or Debian's python3-yaml")


@pytest.fixture(scope="module")
def compose() -> dict:
    return load_yaml(COMPOSE)


def worker_services(compose: dict) -> dict[str, dict]:
    return {n: s for n, s in compose["services"].items() if [str(c) for c in s.get("command") or []][3:4] == ["worker"]}


def queues_of(service: dict) -> list[str]:
    cmd = [str(c) for c in service["command"]]
    return cmd[cmd.index("-Q") + 1].split(",")


def default_of(value: str) -> str:
    """``${VAR:-default}`` -> ``default``; a literal stays as it is."""
    m = re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}]*)\}", str(value))
    return m.group(1) if m else str(value)


# ------------------------------------------------------------------ compose: validity
VARIABLE = re.compile(r"\$\$|\$\{(?P<braced>[A-Za-z_]\w*)(?:(?P<op>:?[-?])(?P<default>[^}]*))?\}"
                      r"|\$(?P<plain>[A-Za-z_]\w*)")
PORT = re.compile(r"^(?:(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]):)?"
                  r"(?:\d+(?:-\d+)?:)?\d+(?:-\d+)?(?:/(?:tcp|udp))?$")


def interpolate(node, env: dict[str, str]):
    """Compose variable substitution: ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``$VAR``, ``$$``."""
    if isinstance(node, dict):
        return {k: interpolate(v, env) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolate(v, env) for v in node]
    if not isinstance(node, str):
        return node

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("braced") or m.group("plain")
        op, default = m.group("op"), m.group("default") or ""
        value = env.get(name)
        if op == ":-" and not value or op == "-" and value is None:
            return default
        if op == ":?" and not value or op == "?" and value is None:
            raise ValueError(f"required variable {name} is not set: {default}")
        return value or ""

    return re.sub(VARIABLE, sub, node)


def read_env_file(path: Path) -> dict[str, str]:
    """``VAR=value`` lines (compose's .env / env_file format; no quotes, comments on their own lines)."""
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


@pytest.fixture(scope="module")
def example_env() -> dict[str, str]:
    return read_env_file(ENV_EXAMPLE)


def test_compose_validates_against_the_vendored_schema(compose, example_env):
    jsonschema = pytest.importorskip("jsonschema", reason="pip install jsonschema (a dev dependency)")
    config = interpolate(compose, example_env)  # as on a machine with .env copied from .env.example
    validator = jsonschema.Draft4Validator(json.loads(SCHEMA.read_text()))  # what docker-compose 1.29 uses
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10])
    for name, svc in config["services"].items():
        for port in svc.get("ports", []):
            assert PORT.match(str(port)), f"{name}: invalid port mapping {port!r}"


def test_schema_validation_catches_mistakes(compose, example_env):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft4Validator(json.loads(SCHEMA.read_text()))
    broken = interpolate(compose, example_env)
    broken["services"]["redis"]["restart_policy"] = "always"  # not a compose key
    broken["services"]["gateway"]["healthcheck"]["retries"] = "three"
    assert len(list(validator.iter_errors(broken))) >= 2


# ------------------------------------------------------------------ compose: content
def test_compose_file_format(compose):
    assert str(compose["version"]) == "3.8"
    assert {"redis", "weaviate", "gateway", "prometheus", "grafana"} <= set(compose["services"])


def test_every_queue_has_exactly_one_worker_type(compose):
    workers = worker_services(compose)
    consumed = [q for s in workers.values() for q in queues_of(s)]
    assert set(consumed) == set(QUEUES), f"missing: {set(QUEUES) - set(consumed)} extra: {set(consumed) - set(QUEUES)}"
    assert len(consumed) == len(set(consumed)), "a queue is consumed by two worker types"
    for name, svc in workers.items():
        cmd = [str(c) for c in svc["command"]]
        assert cmd[:4] == ["celery", "-A", "workers.celery_app", "worker"], name
        assert cmd[cmd.index("-P") + 1] in ("threads", "solo", "prefork"), name
        assert 1 <= int(cmd[cmd.index("-c") + 1]) <= 64, name
        node = cmd[cmd.index("-n") + 1]
        assert node.endswith("@%h") and node.split("@")[0] == svc["environment"]["WORKER_NAME"], name
        assert "$$WORKER_NAME@$$HOSTNAME" in " ".join(svc["healthcheck"]["test"]), name  # pings its own node
        assert svc["depends_on"]["redis"]["condition"] == "service_healthy", name
    clusterer = [s for s in workers.values() if "clusterer" in queues_of(s)][0]
    assert clusterer["command"][clusterer["command"].index("-c") + 1] == "1"  # CPU-bound: scale containers


def test_services_have_healthchecks_and_restart_policies(compose):
    for name, svc in compose["services"].items():
        assert svc.get("restart") in ("unless-stopped", "always", "on-failure"), name
        assert svc.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"


def test_application_environment(compose, example_env):
    services = interpolate(compose, example_env)["services"]
    for name, svc in {**worker_services(compose), "gateway": services["gateway"]}.items():
        svc = services[name]
        env = svc["environment"]
        assert env["GRAPHFLEET_REDIS_URL"] == "redis://:change-me-redis-password@redis:6379/0", name
        assert env["GRAPHFLEET_WEAVIATE_API_KEY"] == example_env["GRAPHFLEET_WEAVIATE_API_KEY"], name
        assert svc["env_file"] == ".env", f"{name}: GRAPHFLEET_* settings of .env would not reach it"
        assert env["GRAPHFLEET_VECTOR_BACKEND"] == "weaviate", name
        assert env["GRAPHFLEET_WEAVIATE_URL"] == "http://weaviate:8080", name
        assert env["GRAPHFLEET_WEAVIATE_GRPC_PORT"] == "50051", name
        assert "GRAPHFLEET_LLM_BASE_URL" in env, name
        # multiprocess metrics dir on a tmpfs: empty at every container start
        assert env["PROMETHEUS_MULTIPROC_DIR"] in svc.get("tmpfs", []), name
    for name, svc in worker_services(compose).items():
        assert svc["environment"].get("GRAPHFLEET_METRICS_PORT") == "9808", f"{name} exports no metrics"
    assert services["gateway"]["environment"]["GRAPHFLEET_METRICS_TOKEN"] == example_env["GRAPHFLEET_METRICS_TOKEN"]
    env = compose["services"]["gateway"]["environment"]
    visibility = int(default_of(env["GRAPHFLEET_WORKERS__VISIBILITY_TIMEOUT_S"]))
    hard = int(default_of(env["GRAPHFLEET_WORKERS__TASK_TIME_LIMIT_S"]))
    soft = int(default_of(env["GRAPHFLEET_WORKERS__TASK_SOFT_TIME_LIMIT_S"]))
    assert soft < hard, "the soft limit must come first"
    # hard may exceed the visibility timeout: live workers renew their leases (workers/lease.py), at most every
    # quarter of the visibility timeout (shared/infra/messaging/queueing.py: lease_renew_interval)
    assert 60 <= visibility <= 300, "a killed worker's messages must come back in minutes, not an hour"


def test_compose_settings_are_real_settings(compose, example_env):
    """Every GRAPHFLEET_* variable of the compose file is read by shared.config.Settings (no dead config)."""
    from shared.config import Settings

    env = interpolate(compose["x-graphfleet-env"], example_env)
    fields = set(Settings.model_fields)
    for key in env:
        if key.startswith("GRAPHFLEET_"):
            assert key.removeprefix("GRAPHFLEET_").split("__")[0].lower() in fields, key
    flat = {k.removeprefix("GRAPHFLEET_").lower(): v for k, v in env.items() if k.startswith("GRAPHFLEET_")}
    s = Settings(**{k: v for k, v in flat.items() if k in fields})
    assert s.vector_backend == "weaviate" and s.weaviate_grpc_port == 50051 and s.weaviate_api_key
    s.check_llm_mode()  # .env.example configures an LLM: production starts


def test_redis_and_weaviate(compose):
    redis_cmd = " ".join(map(str, compose["services"]["redis"]["command"]))
    assert "--appendonly yes" in redis_cmd and "--maxmemory-policy noeviction" in redis_cmd
    assert "--maxmemory " in redis_cmd
    assert any(v.endswith(":/data") for v in compose["services"]["redis"]["volumes"])
    weaviate = compose["services"]["weaviate"]
    image, tag = weaviate["image"].rsplit(":", 1)
    assert image == "cr.weaviate.io/semitechnologies/weaviate" and re.fullmatch(r"1\.\d+\.\d+", tag)
    assert tuple(map(int, tag.split("."))) >= (1, 27, 0), "weaviate-client v4 needs a server >= 1.27"
    assert {p.split(":")[-1] for p in weaviate["ports"]} == {"8080", "50051"}
    assert any(v.endswith(":/var/lib/weaviate") for v in weaviate["volumes"])
    env = weaviate["environment"]
    assert env["PERSISTENCE_DATA_PATH"] == "/var/lib/weaviate" and env["CLUSTER_HOSTNAME"]
    assert env["DEFAULT_VECTORIZER_MODULE"] == "none"  # graphfleet provides its own vectors


def test_grafana_and_prometheus_mounts_exist(compose):
    for name in ("prometheus", "grafana"):
        for vol in compose["services"][name]["volumes"]:
            src = vol.split(":")[0]
            if src.startswith("./"):
                assert (ROOT / src).exists(), f"{name} mounts missing {src}"
    grafana = compose["services"]["grafana"]
    assert f"./deploy/grafana/dashboards:{GRAFANA_DASHBOARDS}:ro" in grafana["volumes"]
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro" in grafana["volumes"]
    home = grafana["environment"].get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    if home:
        assert home.startswith(GRAFANA_DASHBOARDS + "/")
        assert (DEPLOY / "grafana" / "dashboards" / home.rsplit("/", 1)[1]).exists(), home


# ------------------------------------------------------------------ images
def test_gateway_image_carries_no_worker_code():
    dockerfile = (DEPLOY / "images" / "gateway.Dockerfile").read_text()
    copies = [line for line in dockerfile.splitlines() if line.startswith("COPY")]
    assert not any("workers" in line for line in copies)
    assert not any(line.split()[1] == "." for line in copies), "gateway image must not copy the whole repo"
    reqs = (DEPLOY / "images" / "gateway-requirements.txt").read_text().lower()
    assert not {"igraph", "leidenalg", "weaviate-client", "openai"} & _req_names(reqs)
    worker = (DEPLOY / "images" / "worker.Dockerfile").read_text()
    assert "pip install ." in worker and "COPY workers" in worker


def _req_names(text: str) -> set[str]:
    names = set()
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.add(line.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip())
    return names


# Import api_gateway.app as the gateway image would: worker-only modules are blocked, and so is every
# installed distribution outside the closure of deploy/images/gateway-requirements.txt (optional imports
# inside try/except keep working, as they would in the image).
GATEWAY_IMPORT = r"""
import importlib.abc, importlib.metadata as md, re, sys
from packaging.requirements import Requirement

def norm(n):
    return re.sub(r"[-_.]+", "-", n).lower()

reqs = [Requirement(l.split("#")[0].strip()) for l in open(sys.argv[1]) if l.split("#")[0].strip()]
closure, stack = set(), [(r.name, frozenset(r.extras)) for r in reqs]
while stack:
    name, extras = stack.pop()
    if norm(name) in closure:
        continue
    closure.add(norm(name))
    try:
        requires = md.requires(name) or []
    except md.PackageNotFoundError:
        continue
    for spec in requires:
        r = Requirement(spec)
        if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in (extras or {""})):
            stack.append((r.name, frozenset(r.extras)))
blocked = {"igraph", "leidenalg", "workers"}
for top, dists in md.packages_distributions().items():
    if top not in ("shared", "api_gateway") and not any(norm(d) in closure for d in dists):
        blocked.add(top)

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError("not in the gateway image: " + name, name=name)

sys.meta_path.insert(0, Block())
import api_gateway.app
"""


def test_gateway_imports_only_what_its_image_installs():
    if not (ROOT / "api_gateway" / "app.py").exists():
        pytest.skip("api_gateway.app does not exist yet")
    pytest.importorskip("packaging")
    reqs = DEPLOY / "images" / "gateway-requirements.txt"
    proc = subprocess.run([sys.executable, "-c", GATEWAY_IMPORT, str(reqs)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]


# ------------------------------------------------------------------ Prometheus and Grafana
def test_prometheus_config_structure(compose):
    cfg = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")
    assert cfg["rule_files"] == ["alerts.yml", "recording.yml"]
    assert (DEPLOY / "prometheus" / "alerts.yml").exists(), "alerts.yml (written with the dashboards) is missing"
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert "graphfleet-gateway" in jobs and "graphfleet-workers" in jobs
    gateway = json.dumps(jobs["graphfleet-gateway"])
    assert '"gateway"' in gateway and "8000" in gateway
    workers = jobs["graphfleet-workers"]
    names = {n for sd in workers.get("dns_sd_configs", []) for n in sd["names"]}
    assert names == set(worker_services(compose)), "every worker service (and only those) is scraped"
    assert all(sd["port"] == 9808 for sd in workers["dns_sd_configs"])
    for sd in workers.get("file_sd_configs", []):
        for pattern in sd["files"]:
            assert list((DEPLOY / "prometheus").glob(pattern)), f"no file matches {pattern}"
            for f in (DEPLOY / "prometheus").glob(pattern):
                assert isinstance(load_yaml(f), list)
    assert all(j.get("metrics_path", "/metrics") == "/metrics" for j in jobs.values())


def test_grafana_provisioning():
    ds = load_yaml(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml")
    (prom,) = [d for d in ds["datasources"] if d["type"] == "prometheus"]
    assert prom["uid"] == "prometheus" and prom["url"] == "http://prometheus:9090" and prom["isDefault"]
    dash = load_yaml(DEPLOY / "grafana" / "provisioning" / "dashboards" / "graphfleet.yml")
    (provider,) = dash["providers"]
    assert provider["type"] == "file" and provider["options"]["path"] == GRAFANA_DASHBOARDS


def test_dashboards_use_the_provisioned_datasource():
    files = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))
    assert files, "no dashboards in deploy/grafana/dashboards"
    for f in files:
        uids = set(re.findall(r'"datasource":\s*\{[^{}]*"uid":\s*"([^"]+)"', f.read_text()))
        assert uids <= {"prometheus", "${datasource}", "$datasource", "-- Grafana --"}, f"{f.name}: {uids}"


def test_alert_rules_structure():
    from shared.infra.observability.metrics import METRIC_NAMES

    rules = load_yaml(DEPLOY / "prometheus" / "alerts.yml")
    names = set()
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert {"alert", "expr", "labels", "annotations"} <= set(rule), rule
            assert rule["labels"]["severity"] in ("warning", "critical", "info")
            assert "summary" in rule["annotations"]
            for metric in _metric_refs(rule["expr"]):
                assert metric in METRIC_NAMES or metric == "up", f"{rule['alert']}: unknown metric {metric}"
            names.add(rule["alert"])
    assert {"GraphfleetQueueBacklogGrowing", "GraphfleetLLMRateLimitStorm", "GraphfleetTaskFailureRatioHigh",
            "GraphfleetWorkerDown", "GraphfleetLLMSpendAboveBudget"} <= names


def _metric_refs(expr: str) -> set[str]:
    refs = set(re.findall(r"\b(graphfleet_[a-z0-9_]+|up)\b", expr))
    return {re.sub(r"_(bucket|count|sum)$", "", r) if not r.endswith("_total") else r for r in refs}


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool not installed (Debian: apt-get install prometheus)")
def test_promtool_checks(tmp_path):
    # a copy whose token file exists (in the container the prometheus entrypoint writes it)
    shutil.copytree(DEPLOY / "prometheus", tmp_path / "prometheus")
    config = tmp_path / "prometheus" / "prometheus.yml"
    token = tmp_path / "metrics_token"
    token.write_text("t")
    text = config.read_text()
    assert "credentials_file: /run/prometheus-secrets/metrics_token" in text
    config.write_text(text.replace("/run/prometheus-secrets/metrics_token", str(token)))
    for args in (["check", "config", "prometheus.yml"], ["check", "rules", "alerts.yml"]):
        proc = subprocess.run(["promtool", *args], capture_output=True, text=True, cwd=tmp_path / "prometheus",
                              timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "WARNING" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
