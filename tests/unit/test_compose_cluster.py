"""docker-compose.cluster.yml, the clustered layout (docs/scaling.md), validated as docker-compose.yml is
(tests/unit/test_deploy_config.py): against the vendored compose schema with the values of .env.example plus
the broker's, and with ``docker-compose config`` when installed. Then its essentials: the state is a
``redis+cluster://`` URL, the broker a separate RabbitMQ or Sentinel URL, the init service creates the cluster
with replicas, every queue has one worker type."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from shared.infra.messaging.queueing import QUEUES
from tests.unit.test_deploy_config import (
    ENV_EXAMPLE,
    PORT,
    ROOT,
    SCHEMA,
    interpolate,
    load_yaml,
    queues_of,
    read_env_file,
    worker_services,
)

CLUSTER = ROOT / "docker-compose.cluster.yml"
AMQP = "amqp://graphfleet:change-me-rabbitmq-password@rabbitmq:5672/graphfleet"
SENTINEL = ";".join(f"sentinel://:change-me-redis-password@sentinel-{i}:26379" for i in (1, 2, 3))


@pytest.fixture(scope="module")
def compose() -> dict:
    return load_yaml(CLUSTER)


def env_for(broker: str = AMQP) -> dict[str, str]:
    return {**read_env_file(ENV_EXAMPLE), "RABBITMQ_PASSWORD": "change-me-rabbitmq-password",
            "FLEET_BROKER_URL": broker}


def app_services(compose: dict) -> dict[str, dict]:
    return {**worker_services(compose), "gateway": compose["services"]["gateway"]}


def test_validates_against_the_vendored_schema(compose):
    jsonschema = pytest.importorskip("jsonschema", reason="pip install jsonschema (a dev dependency)")
    validator = jsonschema.Draft4Validator(json.loads(SCHEMA.read_text()))
    for broker in (AMQP, SENTINEL):
        config = interpolate(compose, env_for(broker))
        errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
        assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10])
        for name, svc in config["services"].items():
            for port in svc.get("ports", []):
                assert PORT.match(str(port)), f"{name}: invalid port mapping {port!r}"


@pytest.mark.skipif(not shutil.which("docker-compose"), reason="docker-compose not installed; the schema test "
                                                                "covers validation")
def test_docker_compose_config(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in env_for().items()))
    for args in (["config", "-q"], ["--profile", "sentinel", "config", "-q"]):
        proc = subprocess.run(["docker-compose", "-f", str(CLUSTER), "--env-file", str(env_file), *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=120,
                              env={"PATH": "/usr/local/bin:/usr/bin:/bin", "FLEET_ENV_FILE": str(env_file)})
        assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("missing", ["REDIS_PASSWORD", "FLEET_BROKER_URL", "RABBITMQ_PASSWORD"])
def test_secrets_and_the_broker_are_required(compose, missing):
    env = env_for()
    del env[missing]
    with pytest.raises(ValueError, match=missing):
        interpolate(compose, env)


@pytest.mark.parametrize("broker", [AMQP, SENTINEL])
def test_state_on_the_cluster_broker_apart(compose, broker):
    from shared.config import Settings
    from shared.infra.messaging.queueing import broker_options, broker_url
    from shared.infra.redis.conn import is_cluster

    services = interpolate(compose, env_for(broker))["services"]
    for name in app_services(compose):
        env = services[name]["environment"]
        state = env["GRAPHFLEET_STATE_REDIS_URL"]
        assert state == "redis+cluster://:change-me-redis-password@redis-node-1:6379", name
        assert env["GRAPHFLEET_BROKER_URL"] == broker and not is_cluster(broker), name
        assert "GRAPHFLEET_REDIS_URL" not in env, f"{name}: the state is GRAPHFLEET_STATE_REDIS_URL"
        assert env["PROMETHEUS_MULTIPROC_DIR"] in services[name]["tmpfs"], name
    env = services["gateway"]["environment"]
    settings = Settings(state_redis_url=env["GRAPHFLEET_STATE_REDIS_URL"], broker_url=env["GRAPHFLEET_BROKER_URL"],
                        broker_sentinel_master=env["GRAPHFLEET_BROKER_SENTINEL_MASTER"])
    assert is_cluster(settings.redis_url) and broker_url(settings) == broker
    options = broker_options(settings, broker)
    if broker.startswith("amqp"):
        assert all(q.queue_arguments == {"x-queue-type": "quorum"} for q in options["task_queues"])
    else:
        assert options["broker_transport_options"]["master_name"] == "graphfleet"


def test_six_cluster_nodes_and_an_init_with_replicas(compose):
    services = interpolate(compose, env_for())["services"]
    nodes = {n: s for n, s in services.items() if re.fullmatch(r"redis-node-\d", n)}
    assert len(nodes) == 6
    volumes = set()
    for name, svc in nodes.items():
        cmd = [str(c) for c in svc["command"]]
        assert cmd[cmd.index("--cluster-enabled") + 1] == "yes", name
        assert cmd[cmd.index("--cluster-announce-hostname") + 1] == name, name
        assert cmd[cmd.index("--maxmemory-policy") + 1] == "noeviction", name
        assert cmd[cmd.index("--appendonly") + 1] == "yes", name
        assert cmd[cmd.index("--requirepass") + 1] == cmd[cmd.index("--masterauth") + 1], name
        volumes.update(v.split(":")[0] for v in svc["volumes"])
        assert svc["healthcheck"]["test"], name
    assert len(volumes) == 6, "each node keeps its own data and nodes.conf"
    init = services["redis-cluster-init"]
    script = " ".join(str(c) for c in init["command"])
    assert "--cluster create" in script and "--cluster-replicas 1" in script and "--cluster-yes" in script
    assert "cluster_state:ok" in script  # idempotent: an existing cluster is left alone
    assert {n: d["condition"] for n, d in init["depends_on"].items()} == dict.fromkeys(nodes, "service_healthy")
    assert init["restart"] == "no"
    for name in app_services(compose):
        dep = services[name]["depends_on"]["redis-cluster-init"]
        assert dep["condition"] == "service_completed_successfully", name


def test_every_queue_has_exactly_one_worker_type(compose):
    main = load_yaml(ROOT / "docker-compose.yml")
    workers = worker_services(compose)
    consumed = [q for s in workers.values() for q in queues_of(s)]
    assert sorted(consumed) == sorted(QUEUES)
    # the same worker types as docker-compose.yml, started the same way
    assert {n: s["command"] for n, s in workers.items()} == {n: s["command"] for n, s in worker_services(main).items()}
    for name, svc in workers.items():
        assert svc["environment"]["WORKER_NAME"] == svc["command"][svc["command"].index("-n") + 1].split("@")[0]
        assert "$$WORKER_NAME@$$HOSTNAME" in " ".join(svc["healthcheck"]["test"]), name


def test_brokers(compose):
    services = interpolate(compose, env_for(SENTINEL))["services"]
    rabbit = services["rabbitmq"]
    assert "profiles" not in rabbit and rabbit["environment"]["RABBITMQ_DEFAULT_VHOST"] == "graphfleet"
    assert "consumer_timeout 3600000" in rabbit["environment"]["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"]
    sentinel_group = {n: s for n, s in services.items() if s.get("profiles") == ["sentinel"]}
    assert set(sentinel_group) == {"redis-broker", "redis-broker-replica", "sentinel-1", "sentinel-2", "sentinel-3"}
    replica = [str(c) for c in sentinel_group["redis-broker-replica"]["command"]]
    assert replica[replica.index("--replicaof") + 1] == "redis-broker"
    for i in (1, 2, 3):
        script = " ".join(str(c) for c in sentinel_group[f"sentinel-{i}"]["command"])
        assert "sentinel monitor $SENTINEL_MASTER redis-broker 6379 2" in script  # quorum 2 of 3
        assert f"sentinel-{i}:26379" in SENTINEL
    for name, svc in services.items():
        assert svc.get("restart") in ("unless-stopped", "no"), name
        assert svc.get("healthcheck", {}).get("test") or name == "redis-cluster-init", f"{name} has no healthcheck"
