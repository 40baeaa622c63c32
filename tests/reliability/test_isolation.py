"""Tenant isolation across every store: Redis keys, vectors, the LLM cache, usage, job ids; API keys
compared in constant time; no secret in any log."""

from __future__ import annotations

import hmac
import secrets
import time

import httpx
import pytest

from graphfleet_cli.stack import Stack
from shared.infra.jobs.store import TERMINAL, JobStore
from shared.infra.llm.client import LLMClient
from shared.infra.messaging.queueing import QUEUES
from shared.infra.redis.conn import free_port
from shared.infra.redis.keys import Keys
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.redis_vectors import RedisVectorStore
from shared.infra.tenancy.usage import CallContext, UsageRecorder, read_usage
from tests.conftest import SAMPLE, worker_env
from tests.gateway.helpers import ADMIN_HEADERS, ingest
from tests.reliability.conftest import sim, sim_stats

# Keys outside gf:t:{tenant}: that a run may create, and why they hold no tenant data:
GLOBAL_KEYS = {
    "gf:tenants": "registry of tenant ids (admin)",
    "gf:apikeys": "key_id -> tenant index (no secrets: keys are stored hashed under the tenant)",
    "gf:active_jobs": "tenant and job ids of jobs not yet ended, for the job watchdog (ids only)",
    "gf:watchdog": "the watchdog's progress fingerprints per active job (ids, hashes, times)",
    "gf:watchdog:lock": "the watchdog's sweep lock",
    "gf:index_updated_at": "tenant ids by the time of their last index update, the 1,000 latest (query warm-up)",
    "gf:layout": "the key layout version of this Redis (shared/infra/redis/key_migration.py)",
    "gf:layout:lock": "held while a process moves an old Redis to the hash-tagged layout",
    "unacked": "kombu: messages in flight (ids only; tasks carry references, not payloads)",
    "unacked_index": "kombu",
    "unacked_mutex": "kombu",
}
# kombu bindings; the model-wide LLM rate budget; consumer heartbeats (queue -> worker node names and times);
# whether an embedding model hashes words (one flag per model name)
GLOBAL_PREFIXES = ("_kombu.", "gf:rl:", "gf:consumers:", "gf:embedder_lexical:")
QUEUE_NAMES = {*QUEUES, "default"}


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


# ---------------------------------------------------------------- pure / in-process


def test_llm_cache_is_per_tenant(private_redis, monkeypatch, tmp_path):
    """Guarantee: the cache key is ``gf:t:{tenant}:llmcache:{digest}``. Same prompt, two tenants: A's second
    call is a cache hit, B's first call reaches the simulator. Checked: with the tenant dropped from the key
    (``Keys("shared").llm_cache`` in ``LLMClient.chat``) B gets A's answer and the simulator count stays 1."""
    from shared.config import Settings
    from shared.infra.redis.conn import connect

    redis = connect(private_redis.url)
    with sim() as llm:
        settings = Settings(llm_base_url=llm, llm_api_key="sk-test", redis_url=private_redis.url,
                            data_dir=tmp_path)
        client = LLMClient(settings, redis, UsageRecorder(redis))
        messages = [{"role": "user", "content": "Summarise: Scrooge met Marley's ghost."}]
        a1 = client.chat(messages, CallContext(tenant="tenanta", stage="test", job_id="j1"))
        a2 = client.chat(messages, CallContext(tenant="tenanta", stage="test", job_id="j1"))
        assert not a1.cache_hit and a2.cache_hit
        assert sim_stats(llm)["chat"]["calls"] == 1
        b1 = client.chat(messages, CallContext(tenant="tenantb", stage="test", job_id="j2"))
        assert not b1.cache_hit, "tenant B was served tenant A's cached answer"
        assert sim_stats(llm)["chat"]["calls"] == 2
    assert [r.tenant for r in read_usage(redis, "tenanta")] == ["tenanta", "tenanta"]
    assert [r.tenant for r in read_usage(redis, "tenantb")] == ["tenantb"]
    assert {_s(k) for k in redis.scan_iter("*llmcache*")} <= {
        k for t in ("tenanta", "tenantb") for k in (_s(x) for x in redis.scan_iter(Keys(t).p + "llmcache:*"))}


def test_api_keys_and_the_admin_key_are_compared_in_constant_time(api, alice, monkeypatch):
    """Guarantee: both comparisons go through ``hmac.compare_digest``. Checked: replacing either with ``==``
    leaves the spy uncalled for that path and the matching assertion fails."""
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert api.get("/v1/tenant", headers=alice["headers"]).status_code == 200
    assert len(calls) == 1 and len(calls[0][0]) == len(calls[0][1]) == 64  # HMAC-SHA256 hex digests
    tampered = alice["key"][:-4] + ("AAAA" if not alice["key"].endswith("AAAA") else "BBBB")
    assert api.get("/v1/tenant", headers={"X-API-Key": tampered}).status_code == 401
    assert len(calls) == 2
    assert api.get("/v1/tenants/alice", headers=ADMIN_HEADERS).status_code == 200
    assert len(calls) == 3 and len(calls[2][0]) == 32  # SHA-256 digests of presented and real admin key


def test_one_tenant_cannot_reach_another_tenants_jobs_documents_or_queries(api, alice, bob, gw_redis):
    r = ingest(api, alice, "Marley was dead: to begin with.")
    job_id = r.json()["job_id"]
    assert api.get(f"/v1/jobs/{job_id}", headers=alice["headers"]).status_code == 200
    assert api.get(f"/v1/jobs/{job_id}", headers=bob["headers"]).status_code == 404
    assert api.post(f"/v1/jobs/{job_id}/cancel", headers=bob["headers"]).status_code == 404
    assert JobStore(gw_redis, "alice").status(job_id) == "queued"  # bob's cancel did nothing
    assert api.get("/v1/documents", headers=bob["headers"]).json()["total"] == 0
    doc_id = api.get("/v1/documents", headers=alice["headers"]).json()["items"][0]["id"]
    assert api.get(f"/v1/documents/{doc_id}", headers=bob["headers"]).status_code == 404
    q = api.post("/v1/queries", json={"query": "Who is Marley?", "mode": "naive"}, headers=alice["headers"])
    assert q.status_code == 202, q.text
    assert api.get(f"/v1/queries/{q.json()['query_id']}", headers=bob["headers"]).status_code == 404
    # a tenant named in the body or the path is ignored: the key decides
    r = api.post("/v1/documents", json={"documents": [{"text": "x"}], "tenant": "alice"}, headers=bob["headers"])
    assert r.status_code == 422


# ---------------------------------------------------------------- a whole run with workers and the gateway


def _wait_job(redis, tenant: str, job_id: str, timeout: float = 600) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        view = JobStore(redis, tenant).view(job_id)
        if view and view["status"] in TERMINAL:
            return view
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} of {tenant} did not finish")


def _foreign_keys(redis, tenants: list[str]) -> list[str]:
    out = []
    for key in (_s(k) for k in redis.scan_iter("*", count=1000)):
        if any(key.startswith(Keys(t).p) for t in tenants) or key in GLOBAL_KEYS or key in QUEUE_NAMES:
            continue
        if key.startswith(GLOBAL_PREFIXES):
            continue
        out.append(key)
    return out


@pytest.mark.integration
def test_two_tenants_full_run_is_isolated_and_logs_no_secrets(private_redis, tmp_path, monkeypatch):
    """One run through the gateway and the workers for two tenants ingesting the same document:

    * every key is under ``gf:t:{tenant}:`` (or a listed global key without tenant data);
    * neither tenant's keys, vectors or usage mention the other;
    * the second tenant pays for its own LLM calls (no cache entry crosses tenants);
    * one tenant's key cannot read the other's job;
    * no log line (workers at DEBUG, gateway) contains an API key, the admin key, the pepper or the LLM key.
    """
    monkeypatch.setenv("GRAPHFLEET_WORKER_LOG_LEVEL", "DEBUG")
    llm_key = "sk-llm-" + secrets.token_hex(16)
    admin_key = "adm-" + secrets.token_hex(16)
    pepper = "pep-" + secrets.token_hex(16)
    doc = SAMPLE.read_text(encoding="utf-8-sig")[40_000:52_000]
    with sim() as llm:
        env = {**worker_env(llm), "GRAPHFLEET_LLM_API_KEY": llm_key, "GRAPHFLEET_ADMIN_KEY": admin_key,
               "GRAPHFLEET_API_KEY_PEPPER": pepper}
        stack = Stack(data_dir=tmp_path / "stack", redis_url=private_redis.url, worker_concurrency=4,
                      gateway_port=free_port(), extra_env=env).start()
        try:
            gw = httpx.Client(base_url=stack.gateway_url, timeout=30)
            deadline = time.time() + 60
            while True:
                try:
                    if gw.get("/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.time() < deadline, "gateway did not start"
                time.sleep(0.2)
            admin = {"X-API-Key": admin_key}
            who = {t: _http_tenant(gw, admin, t) for t in ("alice", "bob")}
            redis = stack_redis(private_redis)
            views, calls = {}, {}
            for t in ("alice", "bob"):  # one after the other: bob could only profit from alice's cache entries
                before = sim_stats(llm)["chat"]["calls"]
                r = gw.post("/v1/documents", json={"documents": [{"text": doc, "title": "stave"}]},
                            headers=who[t]["headers"])
                assert r.status_code == 202, r.text
                views[t] = _wait_job(redis, t, r.json()["job_id"])
                assert views[t]["status"] == "succeeded", views[t].get("error")
                calls[t] = sim_stats(llm)["chat"]["calls"] - before
                q = gw.post("/v1/queries?wait=60", json={"query": "Who visits Scrooge?", "mode": "local"},
                            headers=who[t]["headers"])
                assert q.status_code in (200, 202), q.text
            bad = gw.get("/v1/tenant", headers={"X-API-Key": who["alice"]["key"][:-6] + "XXXXXX"})
            assert bad.status_code == 401
            assert gw.get(f"/v1/jobs/{views['alice']['id']}", headers=who["bob"]["headers"]).status_code == 404
            logs_dir = stack.log_dir
        finally:
            stack.stop()

    # the LLM cache did not cross tenants: bob made the same LLM calls alice made
    assert calls["alice"] > 0 and calls["bob"] == calls["alice"], calls
    # and the same tokens, but for the embedder probe (one 20-word embedding call) a new deployment books to its
    # first ingestion, alice's, whose end waits for the query workers' warm-up
    chat, embed = ({t: v["usage"]["prompt_tokens"] - v["usage"]["by_stage"]["embed"]["prompt_tokens"]
                    for t, v in views.items()},
                   {t: v["usage"]["by_stage"]["embed"]["calls"] for t, v in views.items()})
    assert chat["bob"] == chat["alice"] > 0, chat
    assert embed["bob"] <= embed["alice"] <= embed["bob"] + 1, embed
    # every key is under a tenant prefix or a listed global key
    assert _foreign_keys(redis, ["alice", "bob"]) == []
    alice_keys = {_s(k) for k in redis.scan_iter(Keys("alice").p + "*")}
    bob_keys = {_s(k) for k in redis.scan_iter(Keys("bob").p + "*")}
    assert alice_keys and bob_keys
    for key in bob_keys:
        assert "alice" not in key
    # vectors: same graph, separate stores; a third tenant sees nothing
    vectors = RedisVectorStore(redis)
    for kind in ("chunks", "entities"):
        assert vectors.count("alice", kind) == vectors.count("bob", kind) > 0
        assert vectors.count("carol", kind) == 0
        assert set(vectors.payloads("alice", kind)) == set(vectors.payloads("bob", kind))
    assert GraphStore(redis, "alice").stats() == GraphStore(redis, "bob").stats()
    # usage records carry their own tenant only
    for t in ("alice", "bob"):
        records = read_usage(redis, t)
        assert records and {r.tenant for r in records} == {t}
        assert {r.job_id for r in records} & {views[o]["id"] for o in ("alice", "bob") if o != t} == set()
    # no secret in any log
    text = "\n".join(p.read_text(errors="replace") for p in sorted(logs_dir.glob("*.log")))
    assert "graphfleet.extract_chunk" in text, "worker logs are empty: the check below would prove nothing"
    secrets_ = {"llm key": llm_key, "admin key": admin_key, "pepper": pepper,
                **{f"{t} api key": who[t]["key"] for t in who},
                **{f"{t} key secret": who[t]["key"].split("_", 2)[2] for t in who}}  # may contain "_"
    leaked = [name for name, value in secrets_.items() if value in text]
    assert leaked == [], f"secrets in logs: {leaked}"


def _http_tenant(gw: httpx.Client, admin: dict, tenant: str) -> dict:
    r = gw.post("/v1/tenants", json={"id": tenant}, headers=admin)
    assert r.status_code == 201, r.text
    r = gw.post(f"/v1/tenants/{tenant}/keys", json={"name": "isolation"}, headers=admin)
    assert r.status_code == 201, r.text
    key = r.json()["api_key"]
    return {"key": key, "headers": {"X-API-Key": key}}


def stack_redis(server):
    from shared.infra.redis.conn import connect

    return connect(server.url)
