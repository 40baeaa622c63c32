"""A tenant's vectors know their embedder (``shared.infra.store.embedder_record``), and the index stage re-embeds
the whole tenant when the embedder changes (``shared.pipeline.reembed``): on the session's real Redis, with the
embedded vector store and the Weaviate adapter over its fake (whose shards check dimensions as the server's do).
The same on a real stack: ``tests/integration/test_embedders.py``."""

from __future__ import annotations

import numpy as np
import pytest

from shared.domain.models import Chunk, EntityFragment, ExtractionResult
from shared.infra.llm.embedding import HashingEmbedder
from shared.infra.llm.local_embedder import NAME, LocalEmbedder
from shared.infra.redis.keys import Keys
from shared.infra.store.embedder_record import (
    REEMBEDDING,
    EmbedderMismatch,
    EmbedderRecord,
    check_tenant,
    checked_embed,
    read_record,
    refusal,
    write_record,
)
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.redis_vectors import RedisVectorStore
from shared.infra.store.weaviate_store import WeaviateVectorStore
from shared.infra.tenancy.usage import CallContext
from shared.pipeline.index_stage import entity_text, run_index
from shared.pipeline.reembed import prepare
from tests.fake_weaviate import FakeWeaviate

TEXTS = ["Scrooge keeps his counting-house cold and his clerk poor.",
         "Marley's ghost comes in chains to warn Scrooge.",
         "The ghost of Christmas Yet to Come points at a grave.",
         "Bob Cratchit carries Tiny Tim home from church."]
PEOPLE = {"SCROOGE": "a miser", "MARLEY": "Scrooge's dead partner", "TINY TIM": "Bob Cratchit's son"}


@pytest.fixture(params=["redis", "weaviate-fake"])
def vectors(request, redis_client):
    if request.param == "redis":
        return RedisVectorStore(redis_client)
    fake = FakeWeaviate()
    return WeaviateVectorStore(lambda: fake, batch_size=2, redis=redis_client)


def fill(store: GraphStore, texts=TEXTS, people=PEOPLE, doc="d1") -> None:
    """Chunks and entities as the chunk and merge stages leave them: stored and marked for embedding."""
    chunks = [Chunk(id=f"{doc}-c{i}", doc_id=doc, index=i, text=t, tokens=len(t.split())) for i, t in enumerate(texts)]
    store.put_chunks(chunks)
    for name, description in people.items():
        store.save_extraction(ExtractionResult(chunk_id=chunks[0].id, entities=[
            EntityFragment(name=name, type="person", description=description, source_id=chunks[0].id)]))
        store.merge_entity(name, lambda n, frags: store.entities([n]).get(n) or _entity(n, frags))


def _entity(name, frags):
    from shared.domain.models import Entity

    return Entity(name=name, type="person", description=frags[0].description, source_ids=[frags[0].source_id])


def ctx(tenant: str, job: str = "job1") -> CallContext:
    return CallContext(tenant=tenant, stage="embed", job_id=job, queue="indexer")


def vector_of(vectors, tenant, kind, embedder, text):
    """The stored item nearest to ``embedder``'s vector of ``text`` (score 1: its own vector is stored)."""
    return vectors.search(tenant, kind, embedder.embed([text], None)[0], 1)[0]


def test_first_index_records_the_embedder_and_its_dimensions(redis_client, tenant, vectors):
    store = GraphStore(redis_client, tenant)
    fill(store)
    out = run_index(store, vectors, HashingEmbedder(64), ctx(tenant))
    assert out == {"entities": 3, "chunks": 4, "reembedded": False}
    assert read_record(redis_client, tenant) == EmbedderRecord("hashing-64", 64)
    check_tenant(store, vectors, HashingEmbedder(64))  # its own embedder may search


def test_another_embedder_re_embeds_the_whole_tenant_and_never_mixes(redis_client, tenant, vectors):
    store = GraphStore(redis_client, tenant)
    fill(store)
    run_index(store, vectors, HashingEmbedder(64), ctx(tenant))
    fill(store, ["Fezziwig throws a ball for his apprentices."], {"FEZZIWIG": "Scrooge's old master"}, doc="d2")
    local = LocalEmbedder()
    out = run_index(store, vectors, local, ctx(tenant, "job2"))
    # every entity and chunk, not only the second batch's
    assert out == {"entities": 4, "chunks": 5, "reembedded": True}
    assert vectors.count(tenant, "chunks") == 5 and vectors.count(tenant, "entities") == 4
    assert read_record(redis_client, tenant) == EmbedderRecord(NAME, 256)
    for c in store.chunks(store.all_chunk_ids()).values():  # each chunk's vector is the local model's of its text
        hit = vector_of(vectors, tenant, "chunks", local, c.text)
        assert hit.id == c.id and hit.score == pytest.approx(1.0, abs=1e-4)
    for e in store.all_entities().values():
        hit = vector_of(vectors, tenant, "entities", local, entity_text(e.name, e.description))
        assert hit.payload["name"] == e.name and hit.score == pytest.approx(1.0, abs=1e-4)
    _id, sample = vectors.sample_item(tenant, "chunks")
    assert len(sample) == 256  # was 64
    with pytest.raises(EmbedderMismatch, match="hashing-64|wordllama"):
        check_tenant(store, vectors, HashingEmbedder(64))
    again = run_index(store, vectors, local, ctx(tenant, "job3"))  # nothing new: nothing embedded
    assert again == {"entities": 0, "chunks": 0, "reembedded": False}


def test_a_query_of_another_embedder_is_refused_naming_both(redis_client, tenant, vectors):
    store = GraphStore(redis_client, tenant)
    fill(store)
    run_index(store, vectors, HashingEmbedder(64), ctx(tenant))
    calls = []

    class Counting(LocalEmbedder):
        def embed(self, texts, ctx=None):
            calls.append(texts)
            return super().embed(texts, ctx)

    embed = checked_embed(store, vectors, Counting(), ctx(tenant, "q1"))
    with pytest.raises(EmbedderMismatch) as refused:
        embed(["who is Scrooge?"])
    assert str(refused.value) == (
        f"embedder_mismatch: tenant {tenant}'s vectors were made by hashing-64 (64 dims); this deployment embeds with "
        f"{NAME} (256 dims): ingest again (any batch re-embeds the tenant) or set "
        "GRAPHFLEET_EMBEDDING__PROVIDER=hashing back")
    assert calls == []  # refused before the question is embedded (nothing booked)
    other = GraphStore(redis_client, tenant + "x")  # another tenant: its own record (none), nothing refused
    assert checked_embed(other, vectors, LocalEmbedder(), ctx(tenant + "x"))(["who?"])


def test_refusal_names_the_way_back_for_each_provider():
    local, api = EmbedderRecord(NAME, 256), EmbedderRecord("text-embedding-3-small", 1536)
    assert refusal("acme", local, local) is None
    assert refusal("acme", api, EmbedderRecord("text-embedding-3-small")) is None  # dims not known yet: by name
    assert refusal("acme", api, local).endswith(
        "or set GRAPHFLEET_EMBEDDING__PROVIDER=openai and GRAPHFLEET_EMBEDDING_MODEL=text-embedding-3-small back")
    assert "GRAPHFLEET_EMBEDDING__PROVIDER=local back" in refusal("acme", local, api)
    assert refusal("acme", EmbedderRecord("hashing-256", 128), EmbedderRecord("hashing-256", 256))  # dims differ
    busy = refusal("acme", EmbedderRecord(NAME, 256, REEMBEDDING, "j9"), local)
    assert busy.startswith("reembedding: tenant acme's vectors are being re-embedded with") and "job j9" in busy


def test_an_interrupted_re_embedding_refuses_queries_and_the_next_stage_finishes_it(redis_client, tenant, vectors):
    store = GraphStore(redis_client, tenant)
    fill(store)
    run_index(store, vectors, HashingEmbedder(64), ctx(tenant))
    local = LocalEmbedder()
    assert prepare(store, vectors, local, ctx(tenant, "job2"))  # the stage dies right after deciding
    assert read_record(redis_client, tenant) == EmbedderRecord(NAME, 256, REEMBEDDING, "job2")
    assert vectors.count(tenant, "chunks") == 0  # the old vectors are gone: nothing of two embedders mixes
    with pytest.raises(EmbedderMismatch, match="^reembedding: .* job job2"):
        check_tenant(store, vectors, local)
    out = run_index(store, vectors, local, ctx(tenant, "job3"))  # any later ingestion's index stage
    assert out["reembedded"] and out["chunks"] == 4 and out["entities"] == 3
    assert read_record(redis_client, tenant) == EmbedderRecord(NAME, 256)
    check_tenant(store, vectors, local)


def legacy(redis_client, tenant, vectors, embedder) -> GraphStore:
    """A tenant indexed before embedders were recorded: vectors, no record."""
    store = GraphStore(redis_client, tenant)
    fill(store)
    run_index(store, vectors, embedder, ctx(tenant))
    redis_client.delete(Keys(tenant).vector_embedder())
    return store


def test_an_unrecorded_hashing_tenant_is_told_by_its_vectors(redis_client, tenant, vectors):
    store = legacy(redis_client, tenant, vectors, HashingEmbedder(256))
    check_tenant(store, vectors, HashingEmbedder(256))  # the old LLM-free default still searches them
    with pytest.raises(EmbedderMismatch, match="made by hashing-256 \\(256 dims\\)"):  # same dims, told apart
        check_tenant(store, vectors, LocalEmbedder())
    assert read_record(redis_client, tenant) is None  # a query only reads
    out = run_index(store, vectors, LocalEmbedder(), ctx(tenant, "job2"))
    assert out["reembedded"] and read_record(redis_client, tenant) == EmbedderRecord(NAME, 256)


def test_an_unrecorded_tenant_of_the_current_embedder_is_recorded_without_re_embedding(redis_client, tenant, vectors):
    local = LocalEmbedder()
    store = legacy(redis_client, tenant, vectors, local)
    check_tenant(store, vectors, local)  # an unknown embedder of the same dimensions: not refused
    before = vectors.sample_item(tenant, "chunks")
    out = run_index(store, vectors, local, ctx(tenant, "job2"))
    assert out == {"entities": 0, "chunks": 0, "reembedded": False}
    assert read_record(redis_client, tenant) == EmbedderRecord(NAME, 256)
    assert vectors.sample_item(tenant, "chunks") == before


def test_an_unrecorded_tenant_of_unknown_vectors_is_re_embedded(redis_client, tenant, vectors):
    class Other:  # an embedder whose vectors the current one cannot make again
        name, dim, lexical = "some-old-model", 256, False

        def embed(self, texts, ctx=None):
            return [list(np.roll(v, 7)) for v in LocalEmbedder().embed(texts)]

    store = legacy(redis_client, tenant, vectors, Other())
    check_tenant(store, vectors, LocalEmbedder())  # cannot be told at query time (same dims): answered as before
    with pytest.raises(EmbedderMismatch, match="an unrecorded embedder \\(256 dims\\); this deployment embeds with h"):
        check_tenant(store, vectors, HashingEmbedder(64))  # dims differ: refused
    out = run_index(store, vectors, LocalEmbedder(), ctx(tenant, "job2"))
    assert out["reembedded"] and out["chunks"] == 4
    assert read_record(redis_client, tenant) == EmbedderRecord(NAME, 256)


def test_records_are_the_tenants_own(redis_client, tenant, vectors):
    a, b = GraphStore(redis_client, tenant + "a"), GraphStore(redis_client, tenant + "b")
    fill(a)
    fill(b)
    run_index(a, vectors, HashingEmbedder(64), ctx(a.tenant))
    run_index(b, vectors, HashingEmbedder(64), ctx(b.tenant))
    run_index(a, vectors, LocalEmbedder(), ctx(a.tenant, "job2"))
    assert read_record(redis_client, a.tenant).name == NAME
    assert read_record(redis_client, b.tenant) == EmbedderRecord("hashing-64", 64)
    assert len(vectors.sample_item(b.tenant, "chunks")[1]) == 64 and vectors.count(b.tenant, "chunks") == 4
    assert Keys(a.tenant).vector_embedder().startswith(f"gf:t:{{{a.tenant}}}:")


def test_an_emptied_tenant_keeps_no_record(redis_client, tenant):
    vectors = RedisVectorStore(redis_client)
    store = GraphStore(redis_client, tenant)
    write_record(redis_client, tenant, EmbedderRecord("hashing-64", 64))
    out = run_index(store, vectors, LocalEmbedder(), ctx(tenant))  # nothing stored: re-embedding nothing
    assert out == {"entities": 0, "chunks": 0, "reembedded": True}
    assert read_record(redis_client, tenant) is None


def test_an_entity_merged_again_while_its_batch_is_embedded_is_embedded_again(redis_client, tenant, vectors):
    """The stage read SCROOGE's row, then a merge changed its description before the stage stored the vector: the
    stage must not drop the merge's mark, so the next stage embeds the description that stands."""
    store = GraphStore(redis_client, tenant)
    fill(store)
    hashing = HashingEmbedder(64)
    run_index(store, vectors, hashing, ctx(tenant))

    def merge_again(description: str, chunk: str) -> None:
        store.save_extraction(ExtractionResult(chunk_id=chunk, entities=[
            EntityFragment(name="SCROOGE", type="person", description=description, source_id=chunk)]))
        store.merge_batch("entities", ["SCROOGE"], lambda n, frags: _entity(n, sorted(frags, key=lambda f: f.source_id,
                                                                                       reverse=True)))

    class MergedMeanwhile(HashingEmbedder):
        def embed(self, texts, ctx=None):
            if any(t.startswith("SCROOGE:") for t in texts):
                merge_again("a reformed man", "d1-c3")  # after the stage read the row it embeds
            return super().embed(texts, ctx)

    merge_again("a miser who counts", "d1-c2")
    assert run_index(store, vectors, MergedMeanwhile(64), ctx(tenant, "job2"))["entities"] == 1
    assert store.entities(["SCROOGE"])["SCROOGE"].description == "a reformed man"
    assert vector_of(vectors, tenant, "entities", hashing, "SCROOGE: a miser who counts").id == "SCROOGE"
    assert store.dirty_members("embed_entities") == ["SCROOGE"]  # the merge's mark stands
    assert run_index(store, vectors, hashing, ctx(tenant, "job3"))["entities"] == 1
    hit = vector_of(vectors, tenant, "entities", hashing, "SCROOGE: a reformed man")
    assert hit.id == "SCROOGE" and hit.score > 0.999
