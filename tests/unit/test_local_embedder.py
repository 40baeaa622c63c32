"""The local embedder (wordllama's model from its wheel): it knows meaning, opens no network connection, books
its calls as the API embedder's are booked (stage ``embed``, kind ``embedding``, cost 0, the LLM metrics), and is
built once per process. Also the gate of the wordllama pin in pyproject.toml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import REGISTRY

from shared.config import Settings, reset_settings_cache
from shared.infra.llm.embedding import SEMANTIC_AUC, SYNONYM_PROBE, HashingEmbedder, make_embedder, synonym_auc
from shared.infra.llm.local_embedder import DIMENSIONS, NAME, LocalEmbedder
from shared.infra.tenancy.usage import CallContext, UsageRecorder, job_usage, read_usage

ROOT = Path(__file__).resolve().parents[2]
WORDS = [w for pair in SYNONYM_PROBE for w in pair]


def test_the_local_model_passes_the_synonym_probe_and_hashing_does_not():
    local = LocalEmbedder()
    assert synonym_auc(local.embed(WORDS)) >= SEMANTIC_AUC
    assert synonym_auc(HashingEmbedder(256).embed(WORDS, None)) < SEMANTIC_AUC
    assert local.lexical is False and local.name == NAME == "wordllama-l2_supercat-256"


def test_local_vectors_are_unit_length_deterministic_and_of_the_models_dimensions():
    local = LocalEmbedder()
    texts = ["Scrooge keeps his counting-house cold.", "Marley was dead: to begin with.", "", "   "]
    first, again = np.asarray(local.embed(texts)), np.asarray(local.embed(texts))
    assert first.shape == (4, DIMENSIONS) == (4, local.dim)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)  # an empty text too: never NaN
    assert np.array_equal(first, again) and np.array_equal(first[2], first[3])
    assert local.embed([]) == []


def test_make_embedder_chooses_by_provider():
    assert isinstance(make_embedder(Settings()), LocalEmbedder)  # no endpoint: the local model
    assert isinstance(make_embedder(Settings(embedding={"provider": "hashing", "dim": 64})), HashingEmbedder)
    assert make_embedder(Settings(embedding={"provider": "hashing", "dim": 64})).name == "hashing-64"
    with pytest.raises(ValueError, match="GRAPHFLEET_LLM_BASE_URL"):
        make_embedder(Settings(embedding={"provider": "openai"}))
    assert Settings(llm_base_url="http://llm:8000/v1").embedding_provider == "openai"
    assert Settings(llm_base_url="http://llm:8000/v1", embedding={"provider": "local"}).embedding_provider == "local"


def test_the_provider_is_read_from_its_environment_variable(monkeypatch):
    monkeypatch.setenv("GRAPHFLEET_EMBEDDING__PROVIDER", "hashing")
    reset_settings_cache()
    assert Settings().embedding_provider == "hashing"
    monkeypatch.setenv("GRAPHFLEET_EMBEDDING__PROVIDER", "word2vec")
    with pytest.raises(ValueError, match="local"):
        Settings()


def test_texts_embedded_shortest_first_get_wordllamas_own_vectors_and_token_count(redis_client, tenant):
    """The embedder runs wordllama's embedding loop over the texts shortest first (a batch pads to its longest
    text): each text still gets exactly the vector the library's ``embed`` gives it, in the caller's order, and the
    usage record books the tokens the model embeds (the library's ``tokenize``: no special tokens)."""
    words = "the ghost of Christmas past shows Scrooge his school days and Fezziwig's ball".split()
    texts = [" ".join(words[: 1 + (i * 7) % len(words)]) * (1 + (i % 5 == 0) * 30) for i in range(150)]
    local = LocalEmbedder(UsageRecorder(redis_client), batch_size=16)
    got = local.embed(texts, CallContext(tenant=tenant, stage="embed", job_id="job1", queue="indexer"))
    assert np.array_equal(np.array(got, dtype=np.float32), local.model.embed(texts, norm=True, batch_size=16))
    tokens = sum(sum(enc.attention_mask) for enc in local.model.tokenize(texts))
    assert read_usage(redis_client, tenant)[0].prompt_tokens == tokens


def _sample(name: str, labels: dict) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_local_calls_are_booked_like_api_embedding_calls(redis_client, tenant):
    """Stage ``embed``, kind ``embedding``, the texts' tokens as prompt tokens, latency, cost 0: in the tenant's usage
    stream (the ledger), the job's counters and the metrics the LLM calls reach (``usage_listener``)."""
    from shared.infra.observability.metrics import usage_listener

    labels = {"model": NAME, "stage": "embed", "queue": "indexer", "tier": "standard"}
    requests_before = _sample("graphfleet_llm_requests_total", {**labels, "kind": "embedding"})
    tokens_before = _sample("graphfleet_llm_tokens_total", {**labels, "direction": "input"})
    local = LocalEmbedder(UsageRecorder(redis_client, listeners=[usage_listener]))
    ctx = CallContext(tenant=tenant, stage="embed", job_id="job1", queue="indexer")
    local.embed(["Scrooge and Marley", "the ghost of Christmas past"], ctx)
    local.embed(["Tiny Tim"], ctx)
    first, second = read_usage(redis_client, tenant)
    assert (first.stage, first.kind, first.model, first.cost_usd) == ("embed", "embedding", NAME, 0)
    assert first.job_id == "job1" and first.queue == "indexer"
    assert first.prompt_tokens > second.prompt_tokens > 0 and first.latency_s > 0 and not first.error
    usage = job_usage(redis_client, tenant, "job1")
    assert usage["calls"] == 2 and usage["cost_usd"] == 0.0
    assert usage["by_stage"]["embed"] == {"calls": 2, "prompt_tokens": first.prompt_tokens + second.prompt_tokens,
                                          "completion_tokens": 0}
    assert _sample("graphfleet_llm_requests_total", {**labels, "kind": "embedding"}) == requests_before + 2
    assert _sample("graphfleet_llm_tokens_total", {**labels, "direction": "input"}) == (
        tokens_before + usage["prompt_tokens"])
    assert _sample("graphfleet_llm_request_duration_seconds_count", {"model": NAME, "stage": "embed",
                                                                      "queue": "indexer"}) >= 2


def test_without_a_context_nothing_is_booked(redis_client, tenant):
    LocalEmbedder(UsageRecorder(redis_client)).embed(["no one to book it to"])
    assert read_usage(redis_client, tenant) == []


ONCE_PER_PROCESS = """
import json, sys
from wordllama import WordLlama
loads = []
real = WordLlama.load
WordLlama.load = classmethod(lambda cls, *a, **kw: loads.append(kw) or real.__func__(cls, *a, **kw))
from workers.runtime import build_runtime, runtime
first = runtime()
same = runtime() is first and runtime().embedder is first.embedder
again = build_runtime()  # a second runtime in the process (after a fork the worker builds one anew)
print(json.dumps({"loads": len(loads), "same": same, "shared_model": again.embedder.model is first.embedder.model,
                  "name": first.embedder.name, "kw": {k: str(v) for k, v in loads[0].items()}}))
"""


def test_the_embedder_is_built_once_per_process_and_the_model_read_once(redis_server):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHFLEET_")}
    env.update(PYTHONPATH=str(ROOT), GRAPHFLEET_REDIS_URL=redis_server.url)
    proc = subprocess.run([sys.executable, "-c", ONCE_PER_PROCESS], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["loads"] == 1 and out["same"] and out["shared_model"] and out["name"] == NAME
    assert out["kw"]["disable_download"] == "True" and out["kw"]["cache_dir"].endswith("wordllama")


NO_NETWORK = """
import json, os, socket, sys
attempts = []
def refuse(name):
    def call(*args, **kwargs):
        attempts.append(name)
        raise OSError(f"network blocked in this test: {name}")
    return call
socket.socket.connect = refuse("connect")
socket.socket.connect_ex = refuse("connect_ex")
socket.create_connection = refuse("create_connection")
socket.getaddrinfo = refuse("getaddrinfo")
from shared.config import Settings
from shared.infra.llm.embedding import SEMANTIC_AUC, SYNONYM_PROBE, make_embedder, synonym_auc
embedder = make_embedder(Settings())
words = [w for pair in SYNONYM_PROBE for w in pair]
auc = synonym_auc(embedder.embed(words, None))
vectors = embedder.embed(["Marley's ghost visits Scrooge on Christmas Eve."] * 3, None)
print(json.dumps({"name": embedder.name, "auc": auc, "min": SEMANTIC_AUC, "dims": len(vectors[0]),
                  "attempts": attempts}))
"""


def test_loading_and_embedding_with_the_local_model_opens_no_network_connection(tmp_path):
    """In a fresh process with every way to open a connection refused, no Hugging Face setting and an empty home
    (no cache of a download), the default embedder loads from the wheel, embeds and knows meaning."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GRAPHFLEET_", "HF_", "HUGGINGFACE", "TRANSFORMERS_", "XDG_CACHE", "WORDLLAMA"))}
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", NO_NETWORK], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["name"] == NAME and out["dims"] == DIMENSIONS
    assert out["auc"] >= out["min"], out
    assert out["attempts"] == [], out
    assert not any(tmp_path.rglob("*.safetensors")), "nothing was downloaded into the home or cache"


def test_the_stack_banner_says_which_embedder_runs():
    from graphfleet_cli.commands import llm_line

    assert llm_line(Settings()) == ("none: LLM-free (rule-based extraction, extractive answers); embeddings: local "
                                    f"({NAME}, no network); set GRAPHFLEET_LLM_BASE_URL to use an LLM")
    assert "embeddings: hashing (hashing-64, words only, no network)" in llm_line(
        Settings(embedding={"provider": "hashing", "dim": 64}))
    assert llm_line(Settings(llm_base_url="http://u:secret@llm:8000/v1")) == (
        "http://u:***@llm:8000/v1 (model gpt-4o-mini); "
        "embeddings: openai (text-embedding-3-small, at the LLM endpoint)")
    assert llm_line(Settings(llm_base_url="http://llm:8000/v1", embedding={"provider": "local"})).endswith(
        f"embeddings: local ({NAME}, no network)")
