"""The live stack of the end-to-end gateway tests and an HTTP client per tenant.

Everything is real: Redis, Celery worker processes, the gateway as a uvicorn subprocess, HTTP via
httpx. The only fake is the LLM simulator, run in-process so a test can raise its latency.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from graphfleet_cli.stack import Stack
from llm_simulator.config import SimConfig
from llm_simulator.server import start_in_thread
from shared.infra.jobs.store import TERMINAL
from shared.infra.messaging.broker_probe import jobs_with_messages, make_probe
from shared.infra.messaging.queueing import QUEUES
from shared.infra.redis.conn import connect, free_port
from shared.infra.redis.keys import Keys
from tests.conftest import worker_env
from tests.gateway.helpers import ADMIN

MAX_BODY_BYTES = 2_000_000
MAX_DOCUMENT_BYTES = 500_000
WORKER_THREADS = 4
FAST_LIMITS = {"requests_per_minute": 100_000}
SAFETY_TIMEOUT_S = 600.0  # a hung pipeline fails instead of blocking forever; never a pass criterion
POLL_S = 0.1


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class TenantApi:
    """An httpx client bound to one tenant's API key."""

    def __init__(self, base_url: str, tenant: str, api_key: str, key_id: str):
        self.id, self.key, self.key_id = tenant, api_key, key_id
        self.headers = {"X-API-Key": api_key}
        self.http = httpx.Client(base_url=base_url, headers=self.headers, timeout=120.0)

    def get(self, path: str, **kw) -> httpx.Response:
        return self.http.get(path, **kw)

    def post(self, path: str, **kw) -> httpx.Response:
        return self.http.post(path, **kw)

    def delete(self, path: str, **kw) -> httpx.Response:
        return self.http.delete(path, **kw)

    def ingest(self, *texts: str, ids: list[str] | None = None, headers: dict | None = None) -> httpx.Response:
        docs = [{"text": t, **({"id": ids[i]} if ids else {})} for i, t in enumerate(texts)]
        return self.post("/v1/documents", json={"documents": docs}, headers=headers or {})

    def wait_job(self, job_id: str) -> dict:
        """Poll ``GET /v1/jobs/{id}`` until it ends; every unfinished answer must carry Retry-After."""
        deadline = time.monotonic() + SAFETY_TIMEOUT_S
        while True:
            r = self.get(f"/v1/jobs/{job_id}")
            assert r.status_code == 200, r.text
            body = r.json()
            if body["status"] in TERMINAL:
                assert "Retry-After" not in r.headers
                return body
            assert int(r.headers["Retry-After"]) >= 1
            assert time.monotonic() < deadline, f"job {job_id} did not finish: {body}"
            time.sleep(POLL_S)

    def ingest_and_wait(self, *texts: str, ids: list[str] | None = None) -> dict:
        r = self.ingest(*texts, ids=ids)
        assert r.status_code == 202, r.text
        view = self.wait_job(r.json()["job_id"])
        assert view["status"] == "succeeded", view
        return view

    def submit_query(self, **fields) -> httpx.Response:
        return self.post("/v1/queries", json=fields)

    def wait_query(self, query_id: str) -> dict:
        deadline = time.monotonic() + SAFETY_TIMEOUT_S
        while True:
            r = self.get(f"/v1/queries/{query_id}")
            assert r.status_code == 200, r.text
            body = r.json()
            if body["status"] in TERMINAL:
                return body
            assert int(r.headers["Retry-After"]) >= 1
            assert time.monotonic() < deadline, f"query {query_id} did not finish: {body}"
            time.sleep(POLL_S)

    def query(self, **fields) -> dict:
        r = self.submit_query(**fields)
        assert r.status_code in (200, 202), r.text
        body = r.json()
        return body if body["status"] in TERMINAL else self.wait_query(body["query_id"])

    def close(self) -> None:
        self.http.close()


@dataclass
class LiveStack:
    stack: Stack
    url: str
    sim_url: str
    sim_config: SimConfig
    stop_sim: object
    redis: object
    admin: httpx.Client
    tenants: list[TenantApi] = field(default_factory=list)

    def new_tenant(self, prefix: str, **limits) -> TenantApi:
        tenant = unique(prefix)
        r = self.admin.post("/v1/tenants", json={"id": tenant, "limits": {**FAST_LIMITS, **limits}})
        assert r.status_code == 201, r.text
        key = self.admin.post(f"/v1/tenants/{tenant}/keys", json={"name": "e2e"})
        assert key.status_code == 201, key.text
        api = TenantApi(self.url, tenant, key.json()["api_key"], key.json()["key_id"])
        self.tenants.append(api)
        return api

    @contextlib.contextmanager
    def slow_llm(self, latency_ms: float):
        """Raise the simulator's latency (the worker's LLM calls become slow) for the ``with`` block."""
        before = self.sim_config.latency_ms
        self.sim_config.latency_ms = latency_ms
        try:
            yield
        finally:
            self.sim_config.latency_ms = before

    def sim_stats(self) -> dict:
        return httpx.get(self.sim_url.removesuffix("/v1") + "/stats").json()

    def messages_for(self, job_or_tenant_id: str) -> int:
        """Task messages of a job (or tenant) still queued or held unacknowledged by a worker."""
        if not self.stack.broker_url:  # one Redis: it is the broker
            return len(jobs_with_messages(self.redis, {job_or_tenant_id}, [*QUEUES, "default"]))
        from shared.config import get_settings
        from shared.infra.messaging.queueing import make_celery, settings_for

        settings = settings_for(get_settings(), self.stack.redis_url, self.stack.broker_url)
        probe = make_probe(settings, app=make_celery(settings))  # RabbitMQ: asks the workers what they hold
        try:
            return len(probe.jobs_with_messages({job_or_tenant_id}, [*QUEUES, "default"]))
        finally:
            probe.close()

    def wait_settled(self, job_or_tenant_id: str) -> None:
        """Until no worker holds or will receive a task of that job (or tenant)."""
        deadline = time.monotonic() + SAFETY_TIMEOUT_S
        while self.messages_for(job_or_tenant_id):
            assert time.monotonic() < deadline, f"tasks of {job_or_tenant_id} never drained"
            time.sleep(POLL_S)

    def job_count(self, tenant: str) -> int:
        return self.redis.zcard(Keys(tenant).jobs())

    def document_count(self, tenant: str) -> int:
        return self.redis.zcard(Keys(tenant).docs())

    def stop(self) -> None:
        for api in self.tenants:
            api.close()
        self.admin.close()
        self.stack.stop()
        self.redis.close()
        self.stop_sim()


def start_live(redis_url: str, data_dir: Path, broker_url: str | None = None) -> LiveStack:
    """``broker_url``: the session's broker when apart from the state, named here rather than read from whatever
    settings an earlier test left cached (a Redis Cluster state cannot be its own broker)."""
    config = SimConfig(port=0, seed=7)
    sim_url, stop_sim = start_in_thread(config)
    env = worker_env(sim_url, GRAPHFLEET_ADMIN_KEY=ADMIN, GRAPHFLEET_GATEWAY_MAX_BODY_BYTES=MAX_BODY_BYTES,
                     GRAPHFLEET_CHUNKING__MAX_DOCUMENT_BYTES=MAX_DOCUMENT_BYTES,
                     **({"GRAPHFLEET_BROKER_URL": broker_url} if broker_url else {}))
    stack = Stack(data_dir=data_dir, redis_url=redis_url, worker_concurrency=WORKER_THREADS, extra_env=env,
                  gateway_port=free_port())
    try:
        stack.start()
    except BaseException:
        stack.stop()
        stop_sim()
        raise
    admin = httpx.Client(base_url=stack.gateway_url, headers={"X-API-Key": ADMIN}, timeout=60.0)
    return LiveStack(stack, stack.gateway_url, sim_url, config, stop_sim, connect(redis_url), admin)
