"""bench/harness/synthetic_tenant.py (the tenant of bench/suites/cold_query.py), at 200 passages against a real Redis:
the tenant is complete for a local query, its vectors are those a stack without an LLM searches, and the warm-up
writes every snapshot a cold worker loads. No timing."""

from types import SimpleNamespace

from bench.harness.synthetic_tenant import build_tenant, drop_snapshots, local_context, snapshot_sizes, warm_snapshots
from shared.infra.llm.local_embedder import DIMENSIONS, NAME
from shared.infra.store.embedder_record import EmbedderRecord, check_tenant, read_record
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.redis_vectors import RedisVectorStore

PASSAGES = 200


def test_a_synthetic_tenant_gives_a_local_context_of_passages_entities_and_relations(redis_server, redis_client,
                                                                                    tenant):
    built = build_tenant(redis_server.url, tenant, PASSAGES)
    sizes = built.sizes
    assert sizes["passages"] == sizes["chunks"] == PASSAGES
    assert sizes["entities"] > 3 * PASSAGES and sizes["relations"] > 3 * PASSAGES and sizes["communities"] > 0
    # chunk_top_k: a few passages, so the graph rows get room in the budget (passages fill it first by default)
    result = local_context(redis_client, tenant, next(built.questions()), chunk_top_k=5)
    assert result.sources.chunks and result.sources.entities and result.sources.relations
    assert "-----Sources-----" in result.context and "-----Relationships-----" in result.context
    # the default budget: passages first, graph rows still found (and left out for want of room)
    default = {s.name: s for s in local_context(redis_client, tenant, next(built.questions())).budget.sections}
    assert default["sources"].kept and default["entities"].candidates and default["relationships"].candidates


def test_its_vectors_are_the_local_embedders_and_the_warm_up_writes_every_snapshot(redis_server, redis_client,
                                                                                  tenant):
    build_tenant(redis_server.url, tenant, PASSAGES, communities=False)
    store, vectors = GraphStore(redis_client, tenant), RedisVectorStore(redis_client)
    assert vectors.count(tenant, "chunks") == PASSAGES
    assert vectors.count(tenant, "entities") == store.graph_sizes()["entities"]
    assert read_record(redis_client, tenant) == EmbedderRecord(NAME, DIMENSIONS)  # written by the index stage
    check_tenant(store, vectors, SimpleNamespace(name=NAME, dim=DIMENSIONS))  # no refusal: no re-embedding either
    assert not any(snapshot_sizes(redis_client, tenant).values())
    warm_snapshots(redis_server.url, tenant)
    assert all(snapshot_sizes(redis_client, tenant).values())
    drop_snapshots(redis_client, tenant)
    assert not any(snapshot_sizes(redis_client, tenant).values())
