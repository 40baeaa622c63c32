"""An in-memory fake of the weaviate-client v4 surface the Weaviate vector store adapter uses.

The fake checks every call against the installed client: arguments are bound to the real v4 method
signatures, objects are real ``DataObject`` / ``Filter`` / ``MetadataQuery`` values and collection configs
go through the client's own ``_CollectionConfigCreate`` validation. It reproduces the server behaviour the
adapter relies on: per-tenant shards created on batch import, "tenant not found" on reads of an absent
tenant, per-shard vector dimension checks, cosine distance, and insert_many raising when every object fails.
"""

from __future__ import annotations

import inspect
import math
import re
from types import SimpleNamespace

from weaviate.classes.data import DataObject
from weaviate.classes.query import MetadataQuery
from weaviate.collections.aggregations.over_all.sync import _OverAll
from weaviate.collections.classes.config import _CollectionConfigCreate
from weaviate.collections.collection.sync import Collection
from weaviate.collections.collections.sync import _Collections
from weaviate.collections.data.sync import _DataCollection
from weaviate.collections.queries.fetch_objects.query.sync import _FetchObjectsQuery
from weaviate.collections.queries.hybrid.query.sync import _HybridQuery
from weaviate.collections.queries.near_vector.query.sync import _NearVectorQuery
from weaviate.collections.tenants.sync import _Tenants
from weaviate.exceptions import WeaviateInsertManyAllFailedError


def _bind(real, *args, **kwargs) -> None:
    """Fail like the real client would on a wrong call: bind to the v4 method's signature (self = None)."""
    inspect.signature(real).bind(None, *args, **kwargs)


def _cosine_distance(a, b) -> float:
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    return 1.0 - sum(x * y for x, y in zip(a, b, strict=True)) / ((na * nb) or 1.0)


class _FakeTenantColl:
    def __init__(self, coll, tenant):
        self.name, self._coll, self._t = coll.name, coll, tenant
        self.data = SimpleNamespace(insert_many=self._insert_many, delete_many=self._delete_many)
        self.query = SimpleNamespace(near_vector=self._near_vector, hybrid=self._hybrid,
                                     fetch_objects=self._fetch_objects)
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

    def _fetch_objects(self, **kw):
        """Objects in uuid order (the server's default), with their named vectors when ``include_vector``."""
        _bind(_FetchObjectsQuery.fetch_objects, **kw)
        self._coll.client.calls.append("fetch_objects")
        rows = sorted(self._rows().items())[: kw.get("limit")]
        props = kw.get("return_properties")
        return SimpleNamespace(objects=[
            SimpleNamespace(properties={k: p[k] for k in props} if props else dict(p), metadata=None,
                            vector={"default": list(v)} if kw.get("include_vector") else {})
            for _, (p, v) in rows])

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
