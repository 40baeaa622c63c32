"""Embedders on a real stack (real Redis, real Celery worker processes, no LLM): the local embedder's calls are
booked as API embedding calls are (job usage, the tenant's ledger, the Prometheus metrics), a change of
embedder between two ingestions re-embeds the whole tenant in the second job's index stage, and a query in
between is refused naming both embedders (the query job's failure cause)."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from graphfleet_cli.local_client import LocalClient
from shared.domain.query.params import QueryParam
from shared.domain.tokens import truncate_text
from shared.infra.llm.embedding import HashingEmbedder
from shared.infra.llm.local_embedder import NAME, LocalEmbedder
from shared.infra.store.embedder_record import EmbedderRecord, read_record
from shared.infra.tenancy.ledger import usage_report
from shared.infra.tenancy.usage import read_usage
from shared.pipeline.index_stage import entity_text
from tests.conftest import SAMPLE
from tests.integration.helpers import start_stack

pytestmark = pytest.mark.integration

HASHING = {"GRAPHFLEET_EMBEDDING__PROVIDER": "hashing", "GRAPHFLEET_EMBEDDING__DIM": "64"}


def _docs(tmp_path):
    text = SAMPLE.read_text(encoding="utf-8-sig")
    first, second = tmp_path / "staves-1.md", tmp_path / "staves-2.md"
    first.write_text(text[20000:27000], encoding="utf-8")
    second.write_text(text[60000:66000], encoding="utf-8")
    return first, second


def _ingest(client: LocalClient, tenant: str, path) -> dict:
    view = client.wait(tenant, client.ingest_files(tenant, [path])["job_id"], timeout=600)
    assert view["status"] == "succeeded", view
    return view


def stored_vectors(client: LocalClient, tenant: str, kind: str) -> dict[str, np.ndarray]:
    from shared.infra.store.redis_vectors import RedisVectorStore

    return RedisVectorStore(client.redis).vectors(tenant, kind)


def assert_all_made_by(client: LocalClient, tenant: str, embed, dims: int) -> None:
    """Every stored vector of the tenant is ``embed``'s vector of its text: one embedder, no mixing."""
    store, stats = client.store(tenant), client.stats(tenant)
    chunks, entities = stored_vectors(client, tenant, "chunks"), stored_vectors(client, tenant, "entities")
    assert len(chunks) == stats["chunks"] and len(entities) == stats["entities"] > 0
    texts = {c.id: c.text for c in store.chunks(chunks).values()}
    texts_e = {e.name: truncate_text(entity_text(e.name, e.description), 2000) for e in store.all_entities().values()}
    for stored, wanted in ((chunks, texts), (entities, texts_e)):
        ids = sorted(stored)
        made = np.asarray(embed([wanted[i] for i in ids]), dtype=np.float32)
        matrix = np.vstack([stored[i] for i in ids])
        assert matrix.shape == (len(ids), dims)
        made /= np.maximum(np.linalg.norm(made, axis=1, keepdims=True), 1e-12)
        assert np.allclose(np.sum(matrix * made, axis=1), 1.0, atol=1e-3)


def embedding_metrics(stack) -> tuple[float, float]:
    """(requests, input tokens) of the local embedder in the stack's metrics, as the gateway's /metrics shows them."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(stack.metrics_dir))
    requests = tokens = 0.0
    for family in registry.collect():
        for s in family.samples:
            if s.labels.get("model") != NAME or s.labels.get("stage") != "embed":
                continue
            if s.name == "graphfleet_llm_requests_total" and s.labels.get("kind") == "embedding":
                requests += s.value
            elif s.name == "graphfleet_llm_tokens_total" and s.labels.get("direction") == "input":
                tokens += s.value
    return requests, tokens


def test_switching_embedders_refuses_queries_until_the_next_ingestion_re_embeds_the_tenant(
        redis_server, tmp_path, tenant):
    first_doc, second_doc = _docs(tmp_path)
    client = LocalClient(redis_server.url)
    hashing = start_stack(redis_server.url, tmp_path / "hashing", None, **HASHING)
    try:
        first = _ingest(client, tenant, first_doc)
        assert read_record(client.redis, tenant) == EmbedderRecord("hashing-64", 64)
        assert_all_made_by(client, tenant, lambda texts: HashingEmbedder(64).embed(texts, None), 64)
        assert first["usage"]["cost_usd"] == 0 and "embed" not in first["usage"]["by_stage"]  # hashing books nothing
        answered = client.query(tenant, QueryParam(mode="local", query="Who is Scrooge?"))
        assert answered["status"] == "succeeded", answered
    finally:
        hashing.stop()
    before = client.stats(tenant)

    local = start_stack(redis_server.url, tmp_path / "local", None)  # the default: the local model
    try:
        refused = f"embedder_mismatch: tenant {tenant}'s vectors were made by hashing-64 (64 dims); this " \
                  f"deployment embeds with {NAME} (256 dims): ingest again (any batch re-embeds the tenant) or set " \
                  "GRAPHFLEET_EMBEDDING__PROVIDER=hashing back"
        for mode in ("local", "naive", "hybrid", "global"):  # global: its entity anchor reads the entity vectors
            q = client.query(tenant, QueryParam(mode=mode, query="Who is Scrooge's clerk?"))
            assert (q["status"], q["error"]) == ("failed", refused), (mode, q)
        assert not [r for r in read_usage(client.redis, tenant) if r.stage == "embed"]  # refused before embedding

        second = _ingest(client, tenant, second_doc)
        after = client.stats(tenant)
        assert after["documents"] == 2 and after["chunks"] > before["chunks"]
        # the whole tenant re-embedded in the second job's index stage: the first document's chunks and entities too
        assert read_record(client.redis, tenant) == EmbedderRecord(NAME, 256)
        assert_all_made_by(client, tenant, LocalEmbedder().embed, 256)

        # booked like API embedding calls: the job's usage, the tenant's ledger, the metrics
        embed = second["usage"]["by_stage"]["embed"]
        assert embed["calls"] >= 2 and embed["prompt_tokens"] > 0 and second["usage"]["cost_usd"] == 0
        records = [r for r in read_usage(client.redis, tenant) if r.job_id == second["id"] and r.stage == "embed"]
        assert {(r.kind, r.model, r.cost_usd, r.queue) for r in records} == {("embedding", NAME, 0.0, "indexer")}
        assert len(records) == embed["calls"] and sum(r.prompt_tokens for r in records) == embed["prompt_tokens"]
        ledger = usage_report(client.redis, tenant, None, None, "model")
        by_model = {g["key"]: g for g in ledger["groups"]}
        assert by_model[NAME]["prompt_tokens"] == embed["prompt_tokens"] and by_model[NAME]["cost_usd"] == 0
        assert embedding_metrics(local) == (embed["calls"], embed["prompt_tokens"])

        answered = client.query(tenant, QueryParam(mode="local", query="Who is Scrooge's clerk?"))
        assert answered["status"] == "succeeded", answered
        asked = client.job(tenant, answered["query_id"])["usage"]["by_stage"]["embed"]
        assert asked["calls"] >= 1 and asked["prompt_tokens"] > 0  # the question (and the answer's sentences)
        assert client.query(tenant, QueryParam(mode="global", query="What happens?"))["status"] == "succeeded"
    finally:
        local.stop()

    back = start_stack(redis_server.url, tmp_path / "back", None, **HASHING)
    try:  # back to hashing: a batch of documents the tenant already has re-embeds it as well
        again = _ingest(client, tenant, second_doc)
        assert client.stats(tenant) == after and again["usage"]["prompt_tokens"] == 0
        assert read_record(client.redis, tenant) == EmbedderRecord("hashing-64", 64)
        assert_all_made_by(client, tenant, lambda texts: HashingEmbedder(64).embed(texts, None), 64)
    finally:
        back.stop()
        client.close()


def test_the_gateway_shows_the_refusal_as_the_query_failure_and_an_ingestion_lifts_it(live):
    """A live stack embedding at its (simulated) endpoint; the tenant's vectors are then re-made by the local model,
    as a deployment of the other embedder's ingestion leaves them. ``?wait`` answers the refused query at once:
    200, ``failed``, the cause naming both embedders; the next ingestion through the gateway re-embeds it back."""
    from shared.infra.store.redis_graph import GraphStore
    from shared.infra.store.redis_vectors import RedisVectorStore
    from shared.infra.tenancy.usage import CallContext
    from shared.pipeline.index_stage import run_index
    from tests.gateway.e2e_corpus import SYNTHETIC

    api = live.new_tenant("embedder")
    api.ingest_and_wait(*SYNTHETIC.values())
    endpoint = read_record(live.redis, api.id)
    assert endpoint.name == "text-embedding-3-small" and endpoint.dims
    store, vectors = GraphStore(live.redis, api.id), RedisVectorStore(live.redis)
    out = run_index(store, vectors, LocalEmbedder(), CallContext(tenant=api.id, stage="embed", job_id="elsewhere"))
    assert out["reembedded"] and read_record(live.redis, api.id) == EmbedderRecord(NAME, 256)

    for mode in ("local", "global"):
        r = api.post("/v1/queries?wait=30", json={"mode": mode, "query": "Who is Oskarr Brandwhistle?"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "failed", body
        assert body["error"].startswith(f"embedder_mismatch: tenant {api.id}'s vectors were made by {NAME} (256 dims); "
                                        "this deployment embeds with text-embedding-3-small"), body
        assert body["error"].endswith("or set GRAPHFLEET_EMBEDDING__PROVIDER=local back")
        assert api.get(f"/v1/queries/{body['query_id']}").json()["error"] == body["error"]

    job = api.ingest_and_wait("Oskarr Brandwhistle later charted the reefs of Kestrelmoor for the Society.")
    assert job["usage"]["by_stage"]["embed"]["calls"] >= 1
    assert read_record(live.redis, api.id) == endpoint
    assert vectors.count(api.id, "chunks") == store.stats()["chunks"]
    assert api.query(mode="local", query="Who is Oskarr Brandwhistle?")["status"] == "succeeded"


@pytest.mark.own_servers  # graphfleet up starts its own Redis: the session's layout changes nothing
def test_the_readme_command_choosing_the_hashing_embedder_runs_as_written(tmp_path):
    """README.md, *Embeddings*: ``GRAPHFLEET_EMBEDDING__PROVIDER=hashing .venv/bin/graphfleet up`` starts the stack
    (on a free port, as the README's other examples are run) and its banner names the embedder."""
    import re
    import shlex

    from shared.infra.redis.conn import free_port
    from tests.integration.cli_proc import BIN, ROOT, UpProcess, cli_env

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Embeddings"):readme.index("## HTTP gateway")]
    commands = re.findall(r"`(GRAPHFLEET_EMBEDDING__PROVIDER=\w+ \.venv/bin/graphfleet up)`", section)
    assert commands == ["GRAPHFLEET_EMBEDDING__PROVIDER=hashing .venv/bin/graphfleet up"]
    assignment, program, verb = shlex.split(commands[0])
    assert (ROOT / program).resolve() == (BIN / "graphfleet").resolve() and verb == "up"
    name, value = assignment.split("=", 1)
    with UpProcess(["--port", str(free_port()), "--processes", "1"], cli_env(tmp_path / "data", **{name: value})) as up:
        up.wait_for("Ctrl-C to stop")
        assert "embeddings: hashing (hashing-256, words only, no network)" in up.field("LLM"), up.lines
        assert up.stop() == 0
