"""The Weaviate adapter's specifics (always run, no server): tenant-name mapping, object ids and collection
names, the collection config, the lazy per-process client and its settings."""

from __future__ import annotations

import os
import re
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from weaviate.collections.classes.config import _CollectionConfigCreate

from shared.config import Settings
from shared.infra.store.factory import make_vector_store
from shared.infra.store.redis_vectors import RedisVectorStore
from shared.infra.store.weaviate_store import (
    WeaviateVectorStore,
    collection_config,
    collection_name,
    graphfleet_tenant,
    object_id,
    weaviate_tenant,
)
from tests.fake_weaviate import FakeWeaviate
from tests.unit.test_vector_store_contract import ITEMS


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
