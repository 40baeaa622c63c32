"""One VectorStore contract, every backend: the embedded Redis store always, the Weaviate adapter over an
in-memory fake of the weaviate-client v4 surface always, and a real Weaviate when WEAVIATE_URL is set
(skipped otherwise), e.g. ``WEAVIATE_URL=http://localhost:8080 pytest tests/unit/test_vector_store_contract.py``
after ``docker-compose up -d weaviate``.

The fake checks every call against the installed client: arguments are bound to the real v4 method
signatures, objects are real ``DataObject`` / ``Filter`` / ``MetadataQuery`` values and collection configs
go through the client's own ``_CollectionConfigCreate`` validation. It reproduces the server behaviour the
adapter relies on: per-tenant shards created on batch import, "tenant not found" on reads of an absent
tenant, per-shard vector dimension checks, cosine distance, and insert_many raising when every object fails.
"""

from __future__ import annotations

import inspect
import math
import os
import re
import uuid
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from weaviate.classes.data import DataObject
from weaviate.classes.query import MetadataQuery
from weaviate.collections.aggregations.over_all.sync import _OverAll
from weaviate.collections.classes.config import _CollectionConfigCreate
from weaviate.collections.collection.sync import Collection
from weaviate.collections.collections.sync import _Collections
from weaviate.collections.data.sync import _DataCollection
from weaviate.collections.queries.hybrid.query.sync import _HybridQuery
from weaviate.collections.queries.near_vector.query.sync import _NearVectorQuery
from weaviate.collections.tenants.sync import _Tenants
from weaviate.exceptions import WeaviateInsertManyAllFailedError

from shared.config import Settings
from shared.domain.storage import VectorItem
from shared.infra.keys import Keys
from shared.infra.store.factory import make_vector_store
from shared.infra.store.redis_vectors import RedisVectorStore
from shared.infra.store.weaviate_store import (
    WeaviateBatchError,
    WeaviateVectorStore,
    collection_config,
    collection_name,
    graphfleet_tenant,
    object_id,
    weaviate_tenant,
)

WEAVIATE_URL = os.environ.get("WEAVIATE_URL")
needs_weaviate = pytest.mark.skipif(
    not WEAVIATE_URL, reason="WEAVIATE_URL is not set: no Weaviate server to run the contract against "
    "(e.g. WEAVIATE_URL=http://localhost:8080 after `docker-compose up -d weaviate`)")


def _bind(real, *args, **kwargs) -> None:
    """Fail like the real client would on a wrong call: bind to the v4 method's signature (self = None)."""
    inspect.signature(real).bind(None, *args, **kwargs)


def _cosine_distance(a, b) -> float:
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    return 1.0 - sum(x * y for x, y in zip(a, b, strict=True)) / ((na * nb) or 1.0)


# ------------------------------------------------------------------ in-memory fake of weaviate-client v4
class _FakeTenantColl:
    def __init__(self, coll, tenant):
        self.name, self._coll, self._t = coll.name, coll, tenant
        self.data = SimpleNamespace(insert_many=self._insert_many, delete_many=self._delete_many)
        self.query = SimpleNamespace(near_vector=self._near_vector, hybrid=self._hybrid)
        self.aggregate = SimpleNamespace(over_all=self._over_all)

    def _rows(self) -> dict:
        if self._t not in self._coll.shards:
            raise RuntimeError(f"tenant not found: {self._t!r}")
        return self._coll.shards[self._t]

    def _insert_many(self, objects):
        _bind(_DataCollection.insert_many, objects)
        assert all(isinstance(o, DataObject) for o in objects)
        shard = self._coll.shards.setdefault(self._t, {})  # auto tenant creation on batch import
        errors = {}
        for i, o in enumerate(objects):
            vec = list(o.vector["default"])
            dims = {len(v) for _, v in shard.values()}
            if dims and len(vec) not in dims:
                errors[i] = SimpleNamespace(message=f"new node has a vector with length {len(vec)}. "
                                                    f"Existing nodes have vectors with length {dims.pop()}")
            else:
                shard[str(o.uuid)] = (dict(o.properties), vec)
        self._coll.client.calls.append("insert_many")
        if errors and len(errors) == len(objects):
            raise WeaviateInsertManyAllFailedError("\n".join(e.message for e in errors.values()))
        return SimpleNamespace(errors=errors, has_errors=bool(errors))

    def _delete_many(self, where):
        _bind(_DataCollection.delete_many, where=where)
        assert where.target == "_id" and where.operator.value == "ContainsAny"
        rows = self._rows()
        matches = [u for u in where.value if rows.pop(u, None) is not None]
        return SimpleNamespace(failed=0, matches=len(matches), successful=len(matches), objects=None)

    def _result(self, scored, limit, return_properties):
        objs = [SimpleNamespace(properties={k: props[k] for k in return_properties}, metadata=meta)
                for props, meta in scored[:limit]]
        return SimpleNamespace(objects=objs)

    def _near_vector(self, near_vector, **kw):
        _bind(_NearVectorQuery.near_vector, near_vector, **kw)
        assert kw["target_vector"] == "default" and isinstance(kw["return_metadata"], MetadataQuery)
        self._coll.client.calls.append("near_vector")
        scored = []
        for props, vec in self._rows().values():
            d = _cosine_distance(near_vector, vec)
            if kw.get("distance") is None or d <= kw["distance"]:
                scored.append((props, SimpleNamespace(distance=d)))
        scored.sort(key=lambda pm: pm[1].distance)
        return self._result(scored, kw["limit"], kw["return_properties"])

    def _hybrid(self, query, **kw):
        """Relative-score fusion of a term-overlap keyword score on ``text`` and cosine similarity."""
        _bind(_HybridQuery.hybrid, query, **kw)
        assert kw["query_properties"] == ["text"] and kw["target_vector"] == "default"
        self._coll.client.calls.append("hybrid")
        alpha, terms, rows = kw["alpha"], set(query.lower().split()), list(self._rows().values())
        kw_scores = {i: len(terms & set(p["text"].lower().split())) for i, (p, _) in enumerate(rows)}
        limit = kw.get("max_vector_distance")
        dists = {i: _cosine_distance(kw["vector"], v) for i, (_, v) in enumerate(rows)} if kw["vector"] else {}
        vec_scores = {i: 1.0 - d for i, d in dists.items() if limit is None or d <= limit}
        kw_scores = {i: s for i, s in kw_scores.items() if s > 0} if alpha < 1 else {}
        vec_scores = vec_scores if alpha > 0 else {}
        fused: dict[int, float] = {}
        for weight, scores in ((1 - alpha, kw_scores), (alpha, vec_scores)):
            if scores:
                lo, hi = min(scores.values()), max(scores.values())
                for i, s in scores.items():
                    fused[i] = fused.get(i, 0.0) + weight * ((s - lo) / (hi - lo) if hi > lo else 1.0)
        scored = sorted(((rows[i][0], SimpleNamespace(score=s)) for i, s in fused.items()), key=lambda pm: -pm[1].score)
        return self._result(scored, kw["limit"], kw["return_properties"])

    def _over_all(self, **kw):
        _bind(_OverAll.over_all, **kw)
        return SimpleNamespace(total_count=len(self._rows()))


class _FakeColl:
    def __init__(self, client, name):
        self.client, self.name, self.shards = client, name, {}
        self.tenants = SimpleNamespace(exists=self._exists, remove=self._remove)

    def _exists(self, tenant):
        _bind(_Tenants.exists, tenant)
        return tenant in self.shards

    def _remove(self, tenants):
        _bind(_Tenants.remove, tenants)
        for t in tenants:
            self.shards.pop(t, None)

    def with_tenant(self, tenant):
        _bind(Collection.with_tenant, tenant)
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", tenant), tenant
        return _FakeTenantColl(self, tenant)


class FakeWeaviate:
    def __init__(self):
        self.colls, self.created, self.calls, self.closed = {}, [], [], False
        self.collections = SimpleNamespace(exists=self._exists, create=self._create, get=self._get,
                                           list_all=self._list_all)

    def _exists(self, name):
        _bind(_Collections.exists, name)
        return name in self.colls

    def _get(self, name):
        _bind(_Collections.get, name)
        return self.colls[name]

    def _list_all(self, simple=True):
        _bind(_Collections.list_all, simple=simple)
        return {n: object() for n in self.colls}

    def _create(self, **kw):
        _bind(_Collections.create, **kw)
        config = _CollectionConfigCreate(**kw)._to_dict()  # the client's own validation and wire format
        assert config["multiTenancyConfig"] == {"enabled": True, "autoTenantCreation": True,
                                                "autoTenantActivation": True}
        vectors = config.get("vectorConfig") or {}
        assert vectors["default"]["vectorizer"] == {"none": {}}, "vectors are self-provided"
        assert vectors["default"]["vectorIndexConfig"]["distance"] == "cosine"
        self.created.append(kw["name"])
        self.colls[kw["name"]] = _FakeColl(self, kw["name"])

    def close(self):
        self.closed = True


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
    assert hits[0].score == pytest.approx(1 / math.sqrt(1.01), abs=1e-4)
    assert hits[1].score == pytest.approx(0.86 / math.sqrt(1.01), abs=1e-4)
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


# ------------------------------------------------------------------ Weaviate adapter specifics (always run)
def test_tenant_mapping_identity_for_graphfleet_tenants():
    for t in ["default", "acme-corp", "t_123", "a", "z" * 64]:
        assert weaviate_tenant(t) == t and graphfleet_tenant(t) == t


def test_tenant_mapping_is_valid_deterministic_and_injective():
    samples = ["Acme", "acme", "a.b", "a_b", "a-b", "aX2EXb", "a b", "ümlaut", "X", "x", "H" + "0" * 63,
               "é" * 30, "é" * 31, "ß" * 40, "a" * 64, "a" * 65, "a" * 200, "a" * 201, "日本語", "_", "-", "T.x"]
    mapped = [weaviate_tenant(s) for s in samples]
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", m) for m in mapped)
    assert len(set(mapped)) == len(samples)
    assert weaviate_tenant("a.b") == "aX2EXb" and weaviate_tenant("Acme") == "X41Xcme"
    assert mapped == [weaviate_tenant(s) for s in samples]
    assert graphfleet_tenant("aX2EXb") == "a.b" and graphfleet_tenant(weaviate_tenant("a" * 65)) is None
    # not produced by the encoder ("X61X" would be "a"), or not decodable at all
    for bad in ("aXb", "X2E", "aX2e", "X61X", "XX", "XzzX", "X" + "F" * 30 + "X"):
        with pytest.raises(ValueError):
            graphfleet_tenant(bad)
    with pytest.raises(ValueError):
        weaviate_tenant("")


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(min_size=1, max_size=80), st.text(min_size=1, max_size=80))
def test_tenant_mapping_round_trips_and_never_collides(a, b):
    wa = weaviate_tenant(a)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", wa)
    assert graphfleet_tenant(wa) in (a, None)  # None only for hashed (over-long) encodings
    if a != b:
        assert wa != weaviate_tenant(b)


def test_ids_and_collection_names():
    assert collection_name("entities") == "GraphfleetEntities" and collection_name("chunks") == "GraphfleetChunks"
    assert collection_name("community_reports") == "GraphfleetCommunityReports"
    with pytest.raises(ValueError):
        collection_name("Bad Kind")
    assert object_id("entities", "x") == object_id("entities", "x") != object_id("chunks", "x")
    assert uuid.UUID(object_id("entities", "x")).version == 5


def test_collection_config_is_accepted_by_the_client():
    cfg = _CollectionConfigCreate(**collection_config("GraphfleetChunks"))._to_dict()
    assert cfg["class"] == "GraphfleetChunks"
    props = {p["name"]: p for p in cfg["properties"]}
    assert set(props) == {"item_id", "name", "doc_id", "text", "payload_json"}
    assert props["text"]["tokenization"] == "word" and props["item_id"]["tokenization"] == "field"


def test_client_is_lazy_and_recreated_after_fork(monkeypatch):
    made = []
    s = WeaviateVectorStore(lambda: made.append(FakeWeaviate()) or made[-1])
    assert made == []
    s.upsert("t1", "entities", ITEMS[:1])
    s.count("t1", "entities")
    assert len(made) == 1 and made[0].created == ["GraphfleetEntities"]
    monkeypatch.setattr(os, "getpid", lambda: -12345)  # as seen from a forked child
    assert s.count("t1", "entities") == 0  # the child's own (new) client and caches
    assert len(made) == 2 and not made[0].closed  # the parent's client is left alone
    s.close()
    assert made[1].closed and not made[0].closed


def test_from_settings_requires_url():
    with pytest.raises(RuntimeError, match="WEAVIATE_URL"):
        WeaviateVectorStore.from_settings(Settings(vector_backend="weaviate"))
    assert isinstance(WeaviateVectorStore.from_settings(Settings(weaviate_url="http://w:8080")), WeaviateVectorStore)
    assert isinstance(make_vector_store(Settings(), None), RedisVectorStore)
