"""docker-compose.yml's secure defaults: required secrets (``${VAR:?}``), .env.example covering every variable,
every GRAPHFLEET_* line of the env file reaching the gateway and the workers (``env_file``), Redis / Weaviate /
Grafana authentication, and Prometheus scraping the gateway's token-protected /metrics."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_deploy_config import (
    COMPOSE,
    DEPLOY,
    ENV_EXAMPLE,
    ROOT,
    VARIABLE,
    load_yaml,
    read_env_file,
    worker_services,
)

DOCKER_COMPOSE_MISSING = ("docker-compose binary not installed (Debian: apt-get install -y docker-compose); "
                          "the vendored-schema test covers validation")


def compose_env(**extra) -> dict[str, str]:
    """This process's environment without anything that would feed compose's interpolation."""
    secrets = set(read_env_file(ENV_EXAMPLE))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHFLEET_", "COMPOSE_", "FLEET_"))
           and k not in secrets}
    return {**env, **extra}


def docker_compose(env_file: Path, *args: str) -> subprocess.CompletedProcess:
    """``docker-compose --env-file <env_file> ...``, with that file also as the containers' env_file."""
    return subprocess.run(["docker-compose", "-f", str(COMPOSE), "--env-file", str(env_file), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env=compose_env(FLEET_ENV_FILE=str(env_file)))


@pytest.mark.skipif(not shutil.which("docker-compose"), reason=DOCKER_COMPOSE_MISSING)
def test_docker_compose_config_validates_with_the_example_env_file():
    for args in (["config", "-q"], ["--profile", "tools", "config", "-q"]):
        proc = docker_compose(ENV_EXAMPLE, *args)
        assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def compose() -> dict:
    return load_yaml(COMPOSE)


@pytest.fixture(scope="module")
def example_env() -> dict[str, str]:
    return read_env_file(ENV_EXAMPLE)


REQUIRED_SECRETS = ("REDIS_PASSWORD", "GRAPHFLEET_WEAVIATE_API_KEY", "GRAPHFLEET_ADMIN_KEY",
                    "GRAPHFLEET_API_KEY_PEPPER", "GRAPHFLEET_METRICS_TOKEN", "GRAFANA_ADMIN_PASSWORD",
                    "FLOWER_BASIC_AUTH")


@pytest.mark.skipif(not shutil.which("docker-compose"), reason=DOCKER_COMPOSE_MISSING)
@pytest.mark.parametrize("secret", REQUIRED_SECRETS)
def test_docker_compose_refuses_to_start_without_each_secret(tmp_path, secret):
    lines = [line for line in ENV_EXAMPLE.read_text().splitlines() if not line.startswith(secret + "=")]
    env_file = tmp_path / "env"
    env_file.write_text("\n".join(lines) + "\n")
    proc = docker_compose(env_file, "config", "-q")
    assert proc.returncode != 0 and secret in proc.stderr, proc.stderr


@pytest.mark.skipif(not shutil.which("docker-compose"), reason=DOCKER_COMPOSE_MISSING)
def test_every_graphfleet_setting_of_the_env_file_reaches_every_graphfleet_service(tmp_path, compose):
    """GRAPHFLEET_* variables the compose file does not list (the pepper, RATELIMIT__*) still apply."""
    env_file = tmp_path / "env"
    env_file.write_text(ENV_EXAMPLE.read_text() + "GRAPHFLEET_RATELIMIT__ENABLED=true\n"
                        "GRAPHFLEET_RATELIMIT__TPM={\"gpt-4o-mini\": 200000}\nGRAPHFLEET_ONLY_IN_ENV_FILE=yes\n")
    proc = docker_compose(env_file, "config")
    assert proc.returncode == 0, proc.stderr
    import yaml

    services = yaml.safe_load(proc.stdout)["services"]
    graphfleet = [*worker_services(compose), "gateway"]
    for name in graphfleet:
        env = services[name]["environment"]
        assert env.get("GRAPHFLEET_ONLY_IN_ENV_FILE") == "yes", name
        assert env.get("GRAPHFLEET_RATELIMIT__ENABLED") == "true", name
        assert env.get("GRAPHFLEET_RATELIMIT__TPM") == '{"gpt-4o-mini": 200000}', name
        assert env.get("GRAPHFLEET_API_KEY_PEPPER") == "change-me-api-key-pepper", name
        assert env["GRAPHFLEET_REDIS_URL"] == "redis://:change-me-redis-password@redis:6379/0", name


def test_env_example_lists_every_variable_and_only_settings(compose, example_env):
    """Every ${VAR} of the compose file has a line in .env.example, and every GRAPHFLEET_* line there is a
    setting of shared.config.Settings or a compose knob (the time limits)."""
    from shared.config import Settings

    used = {m.group("braced") or m.group("plain") for m in VARIABLE.finditer(COMPOSE.read_text())} - {None}
    listed = set(example_env) | set(re.findall(r"^# ([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), re.M))
    used -= {"WORKER_NAME", "HOSTNAME", "REDIS_PASSWORD_FILE"}  # $$ container-side variables
    assert not used - listed, f"missing from .env.example: {sorted(used - listed)}"
    fields = set(Settings.model_fields)
    for key in example_env:
        if key.startswith("GRAPHFLEET_") and key not in used:
            assert key.removeprefix("GRAPHFLEET_").split("__")[0].lower() in fields, key


def test_secrets_are_required_and_services_authenticate(compose):
    services = compose["services"]
    redis_cmd = [str(c) for c in services["redis"]["command"]]
    assert redis_cmd[redis_cmd.index("--requirepass") + 1].startswith("${REDIS_PASSWORD:?")
    assert "PONG" in " ".join(services["redis"]["healthcheck"]["test"])  # NOAUTH would not fail redis-cli
    weaviate = services["weaviate"]["environment"]
    assert weaviate["AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED"] == "false"
    assert weaviate["AUTHENTICATION_APIKEY_ENABLED"] == "true"
    assert weaviate["AUTHENTICATION_APIKEY_ALLOWED_KEYS"].startswith("${GRAPHFLEET_WEAVIATE_API_KEY:?")
    assert services["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
    gateway = services["gateway"]["environment"]
    for key in ("GRAPHFLEET_ADMIN_KEY", "GRAPHFLEET_API_KEY_PEPPER", "GRAPHFLEET_METRICS_TOKEN"):
        assert gateway[key].startswith(f"${{{key}:?"), key
    assert "--requirepass" not in json.dumps(services["gateway"]), "the password belongs in the URL only"


def test_prometheus_scrapes_the_gateway_with_the_metrics_token(compose):
    cfg = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")
    (gateway,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "graphfleet-gateway"]
    token_file = gateway["authorization"]["credentials_file"]
    prometheus = compose["services"]["prometheus"]
    assert prometheus["environment"]["GRAPHFLEET_METRICS_TOKEN"].startswith("${GRAPHFLEET_METRICS_TOKEN:?")
    assert token_file.rsplit("/", 1)[0] in prometheus["tmpfs"]
    assert token_file in " ".join(prometheus["entrypoint"]) and "$$GRAPHFLEET_METRICS_TOKEN" in " ".join(
        prometheus["entrypoint"])


