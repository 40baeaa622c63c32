"""One VectorStore contract, every backend: the embedded Redis store always, the Weaviate adapter over an
in-memory fake of the weaviate-client v4 surface (``tests.fake_weaviate``) always, and a real Weaviate when
WEAVIATE_URL is set (skipped otherwise), e.g. ``WEAVIATE_URL=http://localhost:8080 pytest
tests/unit/test_vector_store_contract.py`` after ``docker-compose up -d weaviate``.

The adapter's own mapping, naming and client-lifecycle tests are in ``test_weaviate_adapter.py``.
"""

from __future__ import annotations

import json
import math
import os
import uuid

import numpy as np
import pytest

from shared.config import Settings
from shared.domain.storage import VectorItem
from shared.infra.redis.keys import Keys
from shared.infra.store.factory import make_vector_store
from shared.infra.store.redis_vectors import RedisVectorStore
from shared.infra.store.weaviate_store import WeaviateBatchError, WeaviateVectorStore
from tests.fake_weaviate import FakeWeaviate

WEAVIATE_URL = os.environ.get("WEAVIATE_URL")
needs_weaviate = pytest.mark.skipif(
    not WEAVIATE_URL, reason="WEAVIATE_URL is not set: no Weaviate server to run the contract against "
    "(e.g. WEAVIATE_URL=http://localhost:8080 after `docker-compose up -d weaviate`)")


# ------------------------------------------------------------------ backends
@pytest.fixture(params=["redis", "weaviate-fake", pytest.param("weaviate", marks=needs_weaviate)])
def store(request):
    if request.param == "redis":
        yield RedisVectorStore(request.getfixturevalue("redis_client"))
        return
    if request.param == "weaviate-fake":
        fake = FakeWeaviate()
        yield WeaviateVectorStore(lambda: fake, batch_size=50)
        return
    s = WeaviateVectorStore.from_settings(_real_settings())
    yield s
    s.close()


@pytest.fixture(params=["weaviate-fake", pytest.param("weaviate", marks=needs_weaviate)])
def wstore(request):
    """The Weaviate adapter only (fake or real): batch failures and native hybrid search."""
    if request.param == "weaviate-fake":
        fake = FakeWeaviate()
        yield WeaviateVectorStore(lambda: fake, batch_size=50)
        return
    s = WeaviateVectorStore.from_settings(_real_settings())
    yield s
    s.close()


def _real_settings() -> Settings:
    return Settings(vector_backend="weaviate", weaviate_url=WEAVIATE_URL,
                    weaviate_grpc_port=int(os.environ.get("WEAVIATE_GRPC_PORT", "50051")),
                    weaviate_api_key=os.environ.get("WEAVIATE_API_KEY") or None)


def _tenants(s):
    names = ["t" + uuid.uuid4().hex[:12], "t-" + uuid.uuid4().hex[:8]]
    yield names
    for t in names:
        s.drop_tenant(t)


@pytest.fixture()
def tenants(store):
    yield from _tenants(store)


@pytest.fixture()
def wtenants(wstore):
    yield from _tenants(wstore)


def vec(*xs):
    return [float(x) for x in xs]


ITEMS = [
    VectorItem("alpha", vec(1, 0, 0, 0), {"name": "ALPHA", "type": "person"}),
    VectorItem("beta", vec(0.8, 0.6, 0, 0), {"name": "BETA"}),
    VectorItem("gamma", vec(0, 1, 0, 0), {"name": "GAMMA"}),
    VectorItem("delta", vec(-1, 0, 0, 0), {"name": "DELTA"}),
]
QUERY = vec(1, 0.1, 0, 0)  # cos: alpha .995, beta .855, gamma .0995, delta -.995


# ------------------------------------------------------------------ the contract (every backend)
def test_search_ranks_by_cosine_and_returns_payloads(store, tenants):
    t = tenants[0]
    store.upsert(t, "entities", ITEMS)
    hits = store.search(t, "entities", QUERY, top_k=3)
    assert [h.id for h in hits] == ["alpha", "beta", "gamma"]
    # within 1e-3: the embedded store keeps its vectors as float16 (``redis_vectors``)
    assert hits[0].score == pytest.approx(1 / math.sqrt(1.01), abs=1e-3)
    assert hits[1].score == pytest.approx(0.86 / math.sqrt(1.01), abs=1e-3)
    assert hits[0].payload == {"name": "ALPHA", "type": "person"}
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))
    assert [h.id for h in store.search(t, "entities", QUERY, top_k=10)] == ["alpha", "beta", "gamma", "delta"]
    assert store.search(t, "entities", QUERY, top_k=0) == []


def test_min_score_threshold(store, tenants):
    t = tenants[0]
    store.upsert(t, "entities", ITEMS)
    assert [h.id for h in store.search(t, "entities", QUERY, top_k=10, min_score=0.5)] == ["alpha", "beta"]
    assert [h.id for h in store.search(t, "entities", QUERY, top_k=1, min_score=0.5)] == ["alpha"]
    assert [h.id for h in store.search(t, "entities", QUERY, top_k=10, min_score=0.0)] == ["alpha", "beta", "gamma"]
    assert store.search(t, "entities", vec(0, 0, 1, 0), top_k=10, min_score=0.5) == []


def test_tenant_and_kind_isolation(store, tenants):
    a, b = tenants
    store.upsert(a, "entities", ITEMS)
    store.upsert(a, "chunks", [VectorItem("c1", vec(0, 0, 1, 0), {"doc_id": "d1"})])
    assert store.search(b, "entities", QUERY, top_k=5) == []
    assert store.count(b, "entities") == 0 and store.count(b, "chunks") == 0
    assert store.count(a, "entities") == 4 and store.count(a, "chunks") == 1
    assert [h.id for h in store.search(a, "chunks", QUERY, top_k=5)] == ["c1"]
    store.upsert(b, "entities", [VectorItem("alpha", vec(0, 1, 0, 0), {"name": "B-ALPHA"})])  # same id, other tenant
    assert store.search(a, "entities", QUERY, top_k=1)[0].payload["name"] == "ALPHA"
    assert [(h.id, h.payload["name"]) for h in store.search(b, "entities", QUERY, top_k=5)] == [("alpha", "B-ALPHA")]


def test_delete_by_ids_and_count(store, tenants):
    a, b = tenants
    store.upsert(a, "entities", ITEMS)
    store.upsert(a, "chunks", [VectorItem("alpha", vec(1, 0, 0, 0), {"doc_id": "d1"})])  # same id, other kind
    store.delete(a, "entities", ["alpha", "missing"])
    store.delete(a, "entities", [])
    store.delete(b, "entities", ["beta"])  # a tenant with no data: no-op
    assert store.count(a, "entities") == 3 and store.count(a, "chunks") == 1
    assert "alpha" not in [h.id for h in store.search(a, "entities", QUERY, top_k=10)]
    store.delete(a, "entities", iter(["beta", "gamma"]))  # any iterable (document deletion passes a list)
    assert [h.id for h in store.search(a, "entities", QUERY, top_k=10)] == ["delta"]


def test_drop_tenant(store, tenants):
    a, b = tenants
    for t in (a, b):
        store.upsert(t, "entities", ITEMS[:2])
        store.upsert(t, "chunks", [VectorItem("c1", vec(0, 0, 1, 0), {"doc_id": "d1"})])
    store.drop_tenant(a)
    assert store.count(a, "entities") == 0 and store.count(a, "chunks") == 0
    assert store.search(a, "entities", QUERY, top_k=5) == []
    assert store.count(b, "entities") == 2 and store.count(b, "chunks") == 1
    store.drop_tenant(a)  # idempotent
    store.upsert(a, "entities", ITEMS[:1])  # a dropped tenant can be written again
    assert store.count(a, "entities") == 1


def test_a_dropped_tenant_takes_the_dimensions_of_its_next_vectors(store, tenants):
    """What re-embedding a tenant with another embedder needs (``shared.pipeline.reembed``): once dropped, its
    collections take the new embedder's dimensions, and another tenant keeps its own."""
    a, b = tenants
    for t in (a, b):
        store.upsert(t, "chunks", ITEMS)
    store.drop_tenant(a)
    wide = [VectorItem(f"w{i}", [float(i == j) + 0.1 for j in range(8)], {"doc_id": "d1"}) for i in range(3)]
    store.upsert(a, "chunks", wide)
    assert store.count(a, "chunks") == 3
    assert [h.id for h in store.search(a, "chunks", wide[1].vector, top_k=1)] == ["w1"]
    assert len(store.sample_item(a, "chunks")[1]) == 8
    assert [h.id for h in store.search(b, "chunks", QUERY, top_k=1)] == ["alpha"]
    assert len(store.sample_item(b, "chunks")[1]) == 4


def test_sample_item_is_one_stored_item_with_its_vector(store, tenants):
    a, b = tenants
    assert store.sample_item(a, "chunks") is None
    store.upsert(a, "entities", ITEMS)
    item_id, vector = store.sample_item(a, "entities")
    given = {it.id: it.vector for it in ITEMS}[item_id]
    cosine = sum(x * y for x, y in zip(vector, given, strict=True)) / math.hypot(*vector) / math.hypot(*given)
    assert cosine == pytest.approx(1.0, abs=1e-5)
    assert store.sample_item(a, "chunks") is None and store.sample_item(b, "entities") is None


def test_idempotent_upsert(store, tenants):
    t = tenants[0]
    store.upsert(t, "entities", ITEMS)
    store.upsert(t, "entities", ITEMS)
    store.upsert(t, "entities", [VectorItem("alpha", vec(0, 0, 0, 1), {"name": "ALPHA2"})])
    store.upsert(t, "entities", [VectorItem("alpha", vec(0, 0, 0, 1), {"name": "ALPHA2"})])
    assert store.count(t, "entities") == 4
    top = store.search(t, "entities", vec(0, 0, 0, 1), top_k=1)
    assert [(h.id, h.payload) for h in top] == [("alpha", {"name": "ALPHA2"})]
    store.upsert(t, "entities", [])


def test_large_upsert_spans_batches(store, tenants):
    t = tenants[0]
    items = [VectorItem(f"c{i:04d}", vec(1, i / 500, 0, 0), {"doc_id": f"d{i % 7}"}) for i in range(420)]
    store.upsert(t, "chunks", items)
    assert store.count(t, "chunks") == 420
    assert [h.id for h in store.search(t, "chunks", vec(1, 0, 0, 0), top_k=3)] == ["c0000", "c0001", "c0002"]
    store.delete(t, "chunks", [it.id for it in items[:300]])
    assert store.count(t, "chunks") == 120


def test_unknown_tenant_and_kind_read_empty(store, tenants):
    t = tenants[0]
    assert store.search(t, "entities", QUERY, top_k=5) == []
    assert store.count(t, "chunks") == 0
    store.delete(t, "chunks", ["x"])
    store.drop_tenant(t)


# ------------------------------------------------------------------ Weaviate adapter (fake and real server)
def test_batch_failures_are_surfaced_naming_the_failed_objects(wstore, wtenants):
    t = wtenants[0]
    wstore.upsert(t, "entities", ITEMS)  # the tenant's vector dimension is now 4
    mixed = [VectorItem("ok1", vec(0, 0, 1, 0), {}), VectorItem("bad1", vec(1, 0, 0), {}),
             VectorItem("ok2", vec(0, 0, 0, 1), {}), VectorItem("bad2", vec(0, 1, 0), {})]
    with pytest.raises(WeaviateBatchError) as err:
        wstore.upsert(t, "entities", mixed)
    assert "2/4 objects failed to import" in str(err.value) and "bad1" in str(err.value)
    assert err.value.failed_ids == ["bad1", "bad2"] and err.value.errors[0][0] == "bad1"
    assert wstore.count(t, "entities") == 6  # the good objects of the batch landed
    with pytest.raises(WeaviateBatchError) as err:  # every object failing: the client raises, we convert
        wstore.upsert(t, "entities", [VectorItem("bad3", vec(1, 0), {})])
    assert err.value.failed_ids == ["bad3"] and "1/1 objects failed" in str(err.value)


def test_batch_failure_does_not_stop_later_batches(wstore, wtenants):
    t = wtenants[0]
    wstore.upsert(t, "chunks", [VectorItem("seed", vec(1, 0, 0, 0), {})])
    items = [VectorItem(f"b{i}", vec(1, 0, 0), {}) for i in range(3)]  # wrong dimension, first batch
    items += [VectorItem(f"g{i:03d}", vec(0, 1, 0, i / 100), {}) for i in range(120)]
    wstore.batch_size = 50
    with pytest.raises(WeaviateBatchError) as err:
        wstore.upsert(t, "chunks", items)
    assert err.value.failed_ids == ["b0", "b1", "b2"] and "3/123" in str(err.value)
    assert wstore.count(t, "chunks") == 121


HYBRID_ITEMS = [
    VectorItem("c1", vec(1, 0, 0, 0), {"doc_id": "d1", "text": "Scrooge counts his money"}),
    VectorItem("c2", vec(0, 1, 0, 0), {"doc_id": "d1", "text": "Tiny Tim and his crutch"}),
    VectorItem("c3", vec(0.7, 0.7, 0, 0), {"doc_id": "d2", "text": "Bob Cratchit carries Tiny Tim"}),
]


def test_native_hybrid_search(wstore, wtenants):
    t = wtenants[0]
    wstore.upsert(t, "chunks", HYBRID_ITEMS)
    pure_vec = wstore.hybrid_search(t, "chunks", "Scrooge", vec(0, 1, 0, 0), top_k=3, alpha=1.0)
    assert [h.id for h in pure_vec] == ["c2", "c3", "c1"]
    assert pure_vec[0].payload == {"doc_id": "d1", "text": "Tiny Tim and his crutch"}
    pure_kw = wstore.hybrid_search(t, "chunks", "Scrooge", vec(0, 1, 0, 0), top_k=3, alpha=0.0)
    assert [h.id for h in pure_kw] == ["c1"]
    near = wstore.hybrid_search(t, "chunks", "Scrooge", vec(0, 1, 0, 0), top_k=3, alpha=1.0, min_score=0.5)
    assert [h.id for h in near] == ["c2", "c3"]
    assert all(0.0 <= h.score <= 1.0 + 1e-6 for h in pure_vec + pure_kw)
    assert [h.id for h in wstore.hybrid_search(t, "chunks", "Tiny Tim", None, top_k=3)] in (["c2", "c3"], ["c3", "c2"])
    assert wstore.hybrid_search("absent-tenant", "chunks", "Tim", vec(0, 1, 0, 0), top_k=3) == []


# ------------------------------------------------------------------ reachable from the retrieval code
def _factory_store(redis, fake):
    s = make_vector_store(Settings(vector_backend="weaviate", weaviate_url="http://weaviate.invalid:8080"), redis)
    assert isinstance(s, WeaviateVectorStore) and s._client is None  # built lazily: no connection yet
    s._connect = lambda: fake
    return s


def test_factory_store_serves_the_query_engine(redis_client, tenant):
    from shared.domain.query.engine import answer_query
    from shared.domain.query.params import QueryParam
    from tests.memory_graph import hash_embed
    from tests.unit.test_query_fakes import CHUNKS, bm25_provider_for, make_graph

    reader, mem = make_graph(tenant)
    fake = FakeWeaviate()
    s = _factory_store(redis_client, fake)
    for kind in ("entities", "chunks"):
        items = list(mem.data[(tenant, kind)].values())
        if kind == "chunks":  # chunk text feeds Weaviate's own BM25 (native hybrid)
            items = [VectorItem(i.id, i.vector, {**i.payload, "text": CHUNKS[i.id][1]}) for i in items]
        s.upsert(tenant, kind, items)
    param = QueryParam(mode="naive", query="Who is Scrooge's clerk?")
    native = answer_query(param, reader, s, hash_embed, None, None)  # no BM25 index: Weaviate's hybrid
    assert "hybrid" in fake.calls and "near_vector" not in fake.calls
    assert native.sources.chunks
    fake.calls.clear()
    fused = answer_query(param, reader, s, hash_embed, None, bm25_provider_for(reader))  # BM25 fused here
    assert "near_vector" in fake.calls and "hybrid" not in fake.calls
    assert fused.sources.chunks
    local = answer_query(QueryParam(mode="local", query="Scrooge"), reader, s, hash_embed, None,
                         bm25_provider_for(reader))
    assert "SCROOGE" in local.sources.entities


def test_writes_bump_the_version_counters_bm25_caches_use(redis_client, tenant):
    s = _factory_store(redis_client, FakeWeaviate())
    key = Keys(tenant).vector_version("entities")
    before = int(redis_client.get(key) or 0)
    s.upsert(tenant, "entities", ITEMS)
    s.delete(tenant, "entities", ["alpha"])
    s.drop_tenant(tenant)
    assert int(redis_client.get(key)) == before + 3


# ------------------------------------------------------------------ the embedded store's row blocks
def test_rows_span_blocks_and_a_deleted_row_is_reused_without_mixing(redis_client, tenant, monkeypatch):
    import shared.infra.store.redis_vectors as rv

    monkeypatch.setattr(rv, "BLOCK_BYTES", 3 * 8)  # 3 rows of 4 float16 a block: 10 items take 4 blocks
    s = RedisVectorStore(redis_client)
    items = [VectorItem(f"e{i}", vec(1, i, i * i, 1), {"n": i}) for i in range(10)]
    s.upsert(tenant, "entities", items)
    assert sum(redis_client.exists(Keys(tenant).vector_block("entities", b)) for b in range(5)) == 4
    s.delete(tenant, "entities", ["e4"])
    s.upsert(tenant, "entities", [VectorItem("new", vec(0, 0, 0, 1), {"n": "new"})])  # takes e4's row
    assert redis_client.hget(Keys(tenant).vector_rows("entities"), "new") == b"4"
    cold = RedisVectorStore(redis_client)  # another process: reads what was stored
    got = cold.vectors(tenant, "entities")
    assert set(got) == {f"e{i}" for i in range(10) if i != 4} | {"new"}
    for it in [*items[:4], *items[5:], VectorItem("new", vec(0, 0, 0, 1))]:
        want = np.asarray(it.vector) / np.linalg.norm(it.vector)
        assert np.allclose(got[it.id], want, atol=1e-3), it.id
    hit = cold.search(tenant, "entities", vec(0, 0, 0, 1), top_k=1)[0]
    assert (hit.id, hit.payload) == ("new", {"n": "new"})


def test_vectors_of_another_dimension_are_refused_naming_both(redis_client, tenant):
    s = RedisVectorStore(redis_client)
    s.upsert(tenant, "chunks", [VectorItem("c1", vec(1, 0, 0, 0))])
    with pytest.raises(ValueError, match="4 dimensions; refusing vectors of 3"):
        s.upsert(tenant, "chunks", [VectorItem("c2", vec(1, 0, 0))])
    assert set(s.vectors(tenant, "chunks")) == {"c1"}


def test_a_collection_of_the_earlier_layout_is_moved_to_the_blocks_when_first_read(redis_client, tenant):
    k = Keys(tenant)
    old = {"old-a": np.array([1, 0, 0], dtype=np.float32), "old-b": np.array([0, 3, 4], dtype=np.float32)}
    redis_client.hset(k.vectors("chunks"), mapping={i: v.tobytes() for i, v in old.items()})
    redis_client.hset(k.vector_meta("chunks"), mapping={i: json.dumps({"id": i}) for i in old})
    s = RedisVectorStore(redis_client)
    s.upsert(tenant, "chunks", [VectorItem("old-a", vec(0, 1, 0), {"id": "newer"})])  # written since: kept
    hits = s.search(tenant, "chunks", vec(0, 0.6, 0.8), top_k=2)
    assert [(h.id, h.payload) for h in hits] == [("old-b", {"id": "old-b"}), ("old-a", {"id": "newer"})]
    assert hits[0].score == pytest.approx(1.0, abs=1e-3)
    assert not redis_client.exists(k.vectors("chunks")) and s.count(tenant, "chunks") == 2
