"""Synonym edges (``shared.domain.retrieval.synonyms``): two surface forms of one entity are joined by their name
vectors (the local model's), the graph walk crosses the edge to a passage that names only the other form, and the
index stage keeps the edges in step with the tenant's entities (real Redis; ``embedding.synonym_threshold``)."""

from __future__ import annotations

import numpy as np
import pytest

from shared.config import Settings
from shared.domain.models import Chunk, Entity, EntityFragment, ExtractionResult
from shared.domain.retrieval.synonyms import SynonymPolicy, name_text, synonym_edges, synonym_links
from shared.domain.retrieval.walk_build import build_walk
from shared.domain.storage import NAME_VECTORS, VectorHit
from shared.infra.llm.local_embedder import LocalEmbedder
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.redis_vectors import RedisVectorStore
from shared.infra.store.synonym_store import SynonymStore
from shared.infra.tenancy.usage import CallContext
from shared.pipeline.index_stage import run_index

WOOD, FULL, WELLES = "ED WOOD", "EDWARD D. WOOD JR.", "ORSON WELLES"
POLICY = SynonymPolicy(threshold=0.7, neighbours=5)


def cosine(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_the_local_model_puts_two_forms_of_one_name_near_and_another_name_far():
    wood, full, welles = LocalEmbedder().embed([name_text(n) for n in (WOOD, FULL, WELLES)])
    assert cosine(wood, full) >= POLICY.threshold > cosine(wood, welles)


def test_links_keep_the_nearest_names_above_the_threshold_and_never_the_name_itself():
    hits = [VectorHit(WOOD, 1.0, {}), VectorHit("B", 0.71, {}), VectorHit(FULL, 0.9, {}), VectorHit("C", 0.5, {})]
    assert synonym_links(WOOD, hits, POLICY) == [(FULL, 0.9), ("B", 0.71)]
    assert synonym_links(WOOD, hits, SynonymPolicy(0.7, neighbours=1)) == [(FULL, 0.9)]


def test_a_pair_found_from_both_sides_is_one_undirected_edge():
    assert synonym_edges({WOOD: [(FULL, 0.9)], FULL: [(WOOD, 0.8)], "A": [("A", 1.0)]}) == [(WOOD, FULL, 0.9)]


def graph(edges=()):
    """p1 names ED WOOD, p2 names only EDWARD D. WOOD JR., p3 names ORSON WELLES; no relation joins them."""
    return build_walk(["p1", "p2", "p3"], {WOOD: ["p1"], FULL: ["p2"], WELLES: ["p3"]}, edges)


def test_the_walk_crosses_a_synonym_edge_to_the_passage_of_the_other_form():
    seeds = [(WOOD, 1.0)]
    assert [p for p, _ in graph().rank(seeds, [], 3)] == ["p1"]
    ranked = [p for p, _ in graph([(WOOD, FULL, 0.8)]).rank(seeds, [], 3)]
    assert ranked[:2] == ["p1", "p2"] and "p3" not in ranked


def ctx(tenant: str) -> CallContext:
    return CallContext(tenant=tenant, stage="embed", job_id="job1", queue="indexer")


def add_entity(store: GraphStore, chunk: Chunk, name: str) -> None:
    store.save_extraction(ExtractionResult(chunk_id=chunk.id, entities=[
        EntityFragment(name=name, type="person", description="a film director", source_id=chunk.id)]))
    store.merge_entity(name, lambda n, frags: Entity(name=n, type="person", description=frags[0].description,
                                                     source_ids=[frags[0].source_id]))


def test_the_index_stage_links_synonyms_and_the_walk_of_a_query_worker_crosses_them(redis_client, tenant):
    store, vectors, embedder = GraphStore(redis_client, tenant), RedisVectorStore(redis_client), LocalEmbedder()
    chunks = [Chunk(id=f"c{i}", doc_id="d1", index=i, text=t, tokens=4)
              for i, t in enumerate(["Ed Wood made films.", "Edward D. Wood Jr. was born in 1924.", "Welles."])]
    store.put_chunks(chunks)
    for chunk, name in zip(chunks, (WOOD, FULL, WELLES), strict=True):
        add_entity(store, chunk, name)
    run_index(store, vectors, embedder, ctx(tenant), batch=1, synonyms=POLICY)  # one batch per entity
    assert SynonymStore(redis_client, tenant).edges() == [(WOOD, FULL, pytest.approx(0.75, abs=0.05))]
    assert vectors.count(tenant, NAME_VECTORS) == 3
    walk = BM25Cache(redis_client, synonyms=True).walk(tenant)
    assert [p for p, _ in walk.rank([(WOOD, 1.0)], [], 3)][:2] == ["c0", "c1"]
    assert [p for p, _ in BM25Cache(redis_client).walk(tenant).rank([(WOOD, 1.0)], [], 3)] == ["c0"]


def test_a_deleted_entity_loses_its_edges_and_turning_synonyms_off_forgets_them(redis_client, tenant):
    store, vectors, embedder = GraphStore(redis_client, tenant), RedisVectorStore(redis_client), LocalEmbedder()
    chunks = [Chunk(id=f"c{i}", doc_id="d1", index=i, text=f"text {i}", tokens=2) for i in range(2)]
    store.put_chunks(chunks)
    add_entity(store, chunks[0], WOOD)
    add_entity(store, chunks[1], FULL)
    run_index(store, vectors, embedder, ctx(tenant), synonyms=POLICY)
    assert len(SynonymStore(redis_client, tenant).edges()) == 1
    store.remove_chunk_fragments(chunks[1].id)
    store.merge_entity(FULL, lambda n, frags: None)  # its only passage is gone: the merge deletes it
    run_index(store, vectors, embedder, ctx(tenant), synonyms=POLICY)
    assert SynonymStore(redis_client, tenant).links() == {}  # on both sides
    assert vectors.count(tenant, NAME_VECTORS) == 1
    run_index(store, vectors, embedder, ctx(tenant), synonyms=None)
    assert vectors.count(tenant, NAME_VECTORS) == 0


def test_synonyms_are_off_unless_a_threshold_is_set():
    assert Settings().embedding.synonym_policy() is None
    on = Settings(embedding={"synonym_threshold": 0.8, "synonym_neighbours": 3}).embedding.synonym_policy()
    assert on == SynonymPolicy(0.8, 3)
