"""The simulator's ``/v1/embeddings`` over real HTTP: the local model's vectors by default (they know meaning,
through graphfleet's own client), hashed bags of words with ``embeddings="hashing"`` (they do not), the
``dimensions`` parameter, usage, faults, and one model load per process."""

from __future__ import annotations

import argparse
import base64

import httpx
import numpy as np
import openai
import pytest

from llm_simulator import embeddings
from llm_simulator.cli import add_arguments, config_from_args
from llm_simulator.config import SimConfig
from llm_simulator.server import create_app
from shared.config import Settings
from shared.domain.tokens import count_tokens
from shared.infra.llm.client import LLMClient
from shared.infra.llm.embedding import SEMANTIC_AUC, SYNONYM_PROBE, LLMEmbedder, is_lexical, synonym_auc
from shared.infra.llm.local_embedder import LocalEmbedder
from shared.infra.tenancy.usage import CallContext, UsageRecorder, read_usage
from tests.unit.sim_support import stats

MODEL = "text-embedding-3-small"
TEXTS = ["Scrooge is a miser in London", "the miser Scrooge", "a cheerful dance at the party"]


def _vectors(url: str, texts, **body) -> np.ndarray:
    resp = httpx.post(url + "/embeddings", json={"model": MODEL, "input": texts, **body}, timeout=30)
    assert resp.status_code == 200, resp.text
    rows = sorted(resp.json()["data"], key=lambda row: row["index"])
    return np.array([row["embedding"] for row in rows])


@pytest.mark.parametrize("kind", ["local", "hashing"])
def test_the_synonym_probe_through_graphfleets_client(start, redis_client, tenant, kind):
    """Through ``LLMClient`` (HTTP, base64 vectors, usage booked) the default simulator's embeddings know
    meaning, as a real embedding model's do; ``embeddings="hashing"`` is the old bag of words: lexical."""
    url, _ = start() if kind == "local" else start(embeddings="hashing")
    settings = Settings(llm_base_url=url, llm_api_key="sk-x", embedding_model=f"probe-{kind}-{tenant}")
    client = LLMClient(settings, redis_client, UsageRecorder(redis_client))
    embedder, ctx = LLMEmbedder(client, settings.embedding_model), CallContext(tenant=tenant, stage="query")
    words = [w for pair in SYNONYM_PROBE for w in pair]
    auc = synonym_auc(embedder.embed(words, ctx))
    assert is_lexical(embedder, ctx) is (kind == "hashing")
    if kind == "local":
        assert auc >= SEMANTIC_AUC
    else:
        assert auc < SEMANTIC_AUC
    records = read_usage(redis_client, tenant)
    assert [r.stage for r in records] == ["embed", "embed"]
    assert records[0].prompt_tokens == sum(count_tokens(w, settings.embedding_model) for w in words)


def test_local_vectors_are_the_local_embedders(start):
    """256 unit-length dimensions, the same as graphfleet's local embedder gives for the same texts;
    deterministic (the same bytes for the same request), the same for a text alone or in a batch."""
    url, client = start()
    resp = client.embeddings.create(model=MODEL, input=TEXTS)
    vecs = np.array([d.embedding for d in sorted(resp.data, key=lambda d: d.index)])
    assert vecs.shape == (3, 256)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vecs, np.array(LocalEmbedder().embed(TEXTS)), atol=1e-6)
    assert vecs[0] @ vecs[1] > 0.5 > vecs[0] @ vecs[2]  # the miser Scrooge, not the dance
    body = {"model": MODEL, "input": TEXTS, "encoding_format": "base64"}
    first, again = (httpx.post(url + "/embeddings", json=body).json()["data"] for _ in range(2))
    assert [r["embedding"] for r in first] == [r["embedding"] for r in again]
    decoded = np.frombuffer(base64.b64decode(first[1]["embedding"]), dtype="<f4")
    assert np.allclose(decoded, vecs[1]) and np.allclose(_vectors(url, TEXTS[1])[0], vecs[1], atol=1e-6)
    assert resp.usage.prompt_tokens == resp.usage.total_tokens == sum(count_tokens(t, MODEL) for t in TEXTS)
    assert stats(url)["embeddings"]["inputs"] == 3 + 3 + 3 + 1


def test_dimensions_truncate_and_renormalise(start):
    """``dimensions`` (OpenAI's parameter) serves the model's first dimensions at unit length (its
    embeddings are Matryoshka); the local model has 256, so more is a 400, as OpenAI answers past a
    model's size. ``embedding_dim`` is the default; the hashing vectors have any size."""
    url, _ = start()
    full, short = _vectors(url, TEXTS), _vectors(url, TEXTS, dimensions=64)
    assert short.shape == (3, 64)
    expected = full[:, :64] / np.linalg.norm(full[:, :64], axis=1, keepdims=True)
    assert np.allclose(short, expected, atol=1e-5)
    assert short[0] @ short[1] > 0.5 > short[0] @ short[2]
    for bad in (257, 0, -3, "64", 1.5, True):
        resp = httpx.post(url + "/embeddings", json={"model": MODEL, "input": TEXTS, "dimensions": bad})
        assert resp.status_code == 400 and resp.json()["error"]["type"] == "invalid_request_error", bad
    assert stats(url)["embeddings"]["calls"] == 2  # the refused requests were not served
    small_url, _ = start(embedding_dim=32)
    assert _vectors(small_url, TEXTS).shape == (3, 32)
    assert np.allclose(_vectors(small_url, TEXTS), _vectors(url, TEXTS, dimensions=32), atol=1e-6)
    hash_url, _ = start(embeddings="hashing")
    wide = _vectors(hash_url, TEXTS, dimensions=1024)
    assert wide.shape == (3, 1024) and np.allclose(np.linalg.norm(wide, axis=1), 1.0, atol=1e-5)


def test_empty_text_gets_a_fixed_unit_vector(start):
    """No token, no model vector: a fixed unit vector (never NaN, which JSON cannot carry)."""
    url, _ = start()
    vecs = _vectors(url, ["", "Scrooge", ""])
    assert np.isfinite(vecs).all() and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vecs[0], vecs[2]) and not np.allclose(vecs[0], vecs[1])


def test_faults_apply_to_embeddings(start):
    """Injected 5xx and the per-model requests-per-minute limit answer embedding requests as chat ones."""
    url, client = start(error_rate=1.0)
    with pytest.raises(openai.APIStatusError) as failed:
        client.embeddings.create(model=MODEL, input=TEXTS)
    assert failed.value.status_code in (500, 502, 503)
    limited_url, limited = start(rate_limit_rpm=1)
    limited.embeddings.create(model=MODEL, input=TEXTS)
    with pytest.raises(openai.RateLimitError) as refused:
        limited.embeddings.create(model=MODEL, input=TEXTS)
    assert float(refused.value.response.headers["retry-after"]) > 0
    assert stats(url)["errors"]["5xx"] == 1 and stats(url)["embeddings"]["calls"] == 0
    assert stats(limited_url)["errors"]["429"] == 1 and stats(limited_url)["embeddings"]["calls"] == 1


def test_the_model_loads_once_per_process_and_a_request_embeds_in_one_call(start, monkeypatch):
    """Every simulator of a process holds the one model loaded with the first; a request never loads it
    and embeds all its inputs in one call of the model; the hashing simulator loads nothing."""
    url, _ = start()
    model = embeddings.local_model()
    assert create_app(SimConfig(port=0)).state.simulator.vectors.model is model
    assert create_app(SimConfig(port=0, embeddings="hashing")).state.simulator.vectors.model is None

    def no_load():
        raise AssertionError("a request loaded the model")

    calls = []
    real = model.embed
    monkeypatch.setattr(embeddings, "local_model", no_load)
    monkeypatch.setattr(model, "embed", lambda texts, **kw: (calls.append(len(texts)), real(texts, **kw))[1])
    assert _vectors(url, TEXTS * 40).shape == (120, 256)
    assert calls == [120]


def test_embeddings_option():
    parser = add_arguments(argparse.ArgumentParser())
    assert config_from_args(parser.parse_args([])).embeddings == "local"
    cfg = config_from_args(parser.parse_args(["--embeddings", "hashing", "--embedding-dim", "512"]))
    assert cfg == SimConfig(embeddings="hashing", embedding_dim=512)
    with pytest.raises(SystemExit):
        parser.parse_args(["--embeddings", "random"])
    with pytest.raises(ValueError, match="256"):
        SimConfig(embedding_dim=512)  # the local model has 256 dimensions
    with pytest.raises(ValueError, match="embeddings"):
        SimConfig(embeddings="bag")
