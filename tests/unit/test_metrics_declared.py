"""Every metric family exists from the first scrape (zero-valued placeholders), and the queue-consumer gauge
(``graphfleet_queue_consumers``) reads the workers' heartbeats from a real Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from shared.infra.messaging.consumers import record_consumer as beat
from shared.infra.messaging.consumers import retire_consumer as retire
from shared.infra.messaging.queueing import QUEUES
from shared.infra.observability.metrics import METRIC_NAMES, PLACEHOLDER, metrics_response
from shared.infra.redis.keys import consumers_key

ROOT = Path(__file__).resolve().parents[2]

FRESH_GATEWAY = """
import sys
from fastapi.testclient import TestClient
from api_gateway.app import create_app
with TestClient(create_app()) as client:
    resp = client.get("/metrics")
    assert resp.status_code == 200, resp.text
    sys.stdout.write(resp.text)
"""


def families(text: str) -> dict[str, list]:
    out = {}
    for fam in text_string_to_metric_families(text):
        name = fam.name + ("_total" if fam.type == "counter" else "")
        out[name] = fam.samples
    return out


def test_a_fresh_gateway_process_exposes_every_family(redis_server, tmp_path):
    """A gateway process that served no request, ran no task and made no LLM call: its /metrics (multiprocess
    mode, empty directory) holds every name of METRIC_NAMES, each with at least one sample."""
    mp = tmp_path / "metrics"
    mp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHFLEET_")}
    env.update({"PROMETHEUS_MULTIPROC_DIR": str(mp), "GRAPHFLEET_REDIS_URL": redis_server.url,
                "GRAPHFLEET_BROKER_URL": redis_server.broker_url or "",
                "GRAPHFLEET_DATA_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)})
    proc = subprocess.run([sys.executable, "-c", FRESH_GATEWAY], capture_output=True, text=True, env=env,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = families(proc.stdout)
    names = set(METRIC_NAMES)
    if (redis_server.broker_url or "").startswith("amqp"):  # RabbitMQ cannot say cheaply: absent, never a made-up 0
        names.discard("graphfleet_queue_unacked")
    missing = names - set(got)
    assert not missing, missing
    assert all(got[name] for name in names), [n for n in names if not got[n]]
    llm = got["graphfleet_llm_requests_total"]
    assert [(s.labels["model"], s.value) for s in llm] == [(PLACEHOLDER, 0.0)]
    # the consumer gauge has a series per known queue, 0 without workers
    consumers = {s.labels["queue"]: s.value for s in got["graphfleet_queue_consumers"]}
    assert set(QUEUES) <= set(consumers)


RESUME = """
import json, sys
from prometheus_client.parser import text_string_to_metric_families
from shared.infra.observability.metrics import metrics_response, record_job_resumed

def kinds():
    for fam in text_string_to_metric_families(metrics_response()[0].decode()):
        if fam.name == "graphfleet_job_resumes":
            return [(s.labels["kind"], s.value) for s in fam.samples]

before = kinds()
record_job_resumed("ingest", "merge")
print(json.dumps([before, kinds()]))
"""


def test_placeholder_only_while_a_family_has_no_sample(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", RESUME], capture_output=True, text=True, env=env, timeout=60,
                          cwd=ROOT, check=True)
    before, after = json.loads(proc.stdout)
    assert before == [[PLACEHOLDER, 0.0]]
    assert after == [["ingest", 1.0]]


def consumers(redis, queues) -> dict[str, float]:
    body = metrics_response(redis=redis, queues=queues)[0].decode()
    return {s.labels["queue"]: s.value for s in families(body)["graphfleet_queue_consumers"]}


def test_consumers_counts_fresh_heartbeats(redis_client):
    queues = ["hb-extractor", "hb-merger", "hb-reporter"]
    redis_client.delete(*(consumers_key(q) for q in queues))
    try:
        assert consumers(redis_client, queues) == dict.fromkeys(queues, 0.0)  # none yet: 0, not absent
        beat(redis_client, "extractor@host-a", ["hb-extractor"])
        beat(redis_client, "extractor@host-b", ["hb-extractor"])
        beat(redis_client, "query@host-a", ["hb-merger"])
        # a worker that died long ago (heartbeat 10 minutes old by Redis's clock) does not count
        now = redis_client.time()[0]
        redis_client.zadd(consumers_key("hb-reporter"), {"reporter@gone": now - 600})
        assert consumers(redis_client, queues) == {"hb-extractor": 2.0, "hb-merger": 1.0, "hb-reporter": 0.0}
        retire(redis_client, "extractor@host-a", ["hb-extractor"])  # clean shutdown: gone at once
        assert consumers(redis_client, queues)["hb-extractor"] == 1.0
        assert redis_client.ttl(consumers_key("hb-extractor")) > 0  # the heartbeat keys expire on their own
    finally:
        redis_client.delete(*(consumers_key(q) for q in queues))


def test_no_queue_family_when_redis_is_unreachable():
    """The collector exports nothing (alert GraphfleetQueueMetricsAbsent) rather than zeros it did not read."""
    from shared.infra.redis.conn import connect, free_port

    dead = connect(f"redis://127.0.0.1:{free_port()}/0")
    body = metrics_response(redis=dead, queues=["extractor"])[0].decode()
    got = families(body)
    assert "graphfleet_queue_depth" not in got and "graphfleet_queue_consumers" not in got
    assert "graphfleet_llm_requests_total" in got
