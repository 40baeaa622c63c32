"""BM25 indexes that take a batch's documents without indexing the tenant's others again: the scoring (Lucene's
BM25, as bm25s computes it), ``BM25Index.updated`` against a fresh build, the snapshot form, and the query cache
updating a stale index from what the batch wrote (``BM25Cache._build``)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from shared.domain.models import Chunk, Entity, EntityFragment, ExtractionResult
from shared.domain.retrieval.bm25 import BM25Index, tokenize
from shared.infra.redis.keys import Keys
from shared.infra.store import index_codec
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.redis_graph import GraphStore

WORDS = [f"w{i}" for i in range(60)] + ["scrooge", "marley", "ghost", "the"]


def _corpus(rng: random.Random, n: int, start: int = 0) -> dict[str, str]:
    return {f"d{start + i}": " ".join(rng.choices(WORDS, k=rng.randint(0, 25))) for i in range(n)}


def _reference(docs: dict[str, str], query: str, k1: float = 1.5, b: float = 0.75) -> dict[str, float]:
    """Lucene's BM25, term by term, in plain Python: an empty document counts as one placeholder word."""
    toks = {i: tokenize(t) or ["\x00"] for i, t in docs.items()}
    avg = sum(map(len, toks.values())) / len(toks)
    out = dict.fromkeys(docs, 0.0)
    for word in tokenize(query):
        df = sum(word in t for t in toks.values())
        if not df:
            continue
        idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
        for i, t in toks.items():
            tf = t.count(word)
            if tf:
                out[i] += idf * tf / (tf + k1 * (1 - b + b * len(t) / avg))
    return out


def _by_id(index: BM25Index, query: str) -> dict[str, float]:
    s = index.scores(query)
    return {index.ids[i]: float(s[i]) for i in range(len(index))}


def test_scores_are_lucene_bm25_with_each_repeated_query_word_counted_again():
    docs = _corpus(random.Random(1), 300)
    index = BM25Index(list(docs), list(docs.values()))
    for query in ("scrooge marley", "w1 w2 w2", "ghost of nothing", "w59 the"):
        got, want = _by_id(index, query), _reference(docs, query)
        assert got.keys() == want.keys()
        assert max(abs(got[i] - want[i]) for i in docs) < 1e-5
    assert index.query("nothing here") == [] and BM25Index([], []).scores("w1").size == 0


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_an_update_scores_as_a_fresh_build_of_what_it_holds(seed):
    rng = random.Random(seed)
    docs = _corpus(rng, 200)
    base = BM25Index.build(docs.items())
    removed = rng.sample(sorted(docs), 30)
    changed = {i: "scrooge ghost " + docs[i] for i in rng.sample(sorted(set(docs) - set(removed)), 20)}
    added = {**_corpus(rng, 40, start=1000), **changed, "d-new": "an entirely unseen vocabulary"}
    updated = base.updated(removed, added.items())
    final = {**{i: t for i, t in docs.items() if i not in removed}, **added}
    fresh = BM25Index.build(final.items())
    assert sorted(updated.ids) == sorted(final) and len(base) == 200  # the former index is left as it was
    for query in ("scrooge ghost", "w3 w4 w5", "unseen vocabulary", "w10 w10"):
        assert _by_id(updated, query) == _by_id(fresh, query)
    assert [i for i, _ in updated.query("unseen")] == ["d-new"]


def test_digests_follow_their_documents_through_updates_and_snapshots():
    base = BM25Index.build([("a", "grey goose"), ("b", "red fox"), ("c", "blue whale")], digests=[1, 2, 3])
    updated = base.updated(["b"], [("a", "grey goose again"), ("d", "green frog")], digests=[10, 4])
    assert dict(zip(updated.ids, updated.digests.tolist(), strict=True)) == {"c": 3, "a": 10, "d": 4}
    with pytest.raises(ValueError):
        updated.updated([], [("e", "no digest")])  # an index that keeps digests needs one per document
    loaded = index_codec.bm25_from_bytes(index_codec.bm25_to_bytes(updated))
    assert list(loaded.ids) == list(updated.ids) and loaded.digests.tolist() == updated.digests.tolist()
    for query in ("goose", "frog whale", "again"):
        assert np.array_equal(loaded.scores(query), updated.scores(query))
    plain = index_codec.bm25_from_bytes(index_codec.bm25_to_bytes(BM25Index(["x"], ["text"])))
    assert plain.digests is None and plain.query("text")[0][0] == "x"


def test_a_snapshot_whose_postings_do_not_fit_is_refused():
    index = BM25Index(["a", "b"], ["grey goose", "red fox"])
    with pytest.raises(ValueError):
        BM25Index.of_arrays(index.ids, index.vocab, index.indptr, index.docs + 5, index.tf, index.lengths)
    with pytest.raises(ValueError):
        BM25Index.of_arrays(index.ids, index.vocab, index.indptr[:-1], index.docs, index.tf, index.lengths)


def _entity(store: GraphStore, chunk_id: str, name: str, description: str) -> None:
    store.save_extraction(ExtractionResult(chunk_id=chunk_id, entities=[
        EntityFragment(name=name, description=description, source_id=chunk_id)]))
    store.merge_entity(name, lambda n, frags: Entity(
        name=n, description=" ".join(f.description for f in frags), source_ids=[f.source_id for f in frags]))


def _batch(redis, tenant: str, start: int, n: int) -> None:
    """``n`` chunks, each naming one entity of its own, then what the index stage bumps."""
    store = GraphStore(redis, tenant)
    store.put_chunks([Chunk(id=f"c{i}", doc_id="d1", index=i, text=f"Passage {i} about creature{i}.", tokens=5)
                      for i in range(start, start + n)])
    for i in range(start, start + n):
        _entity(store, f"c{i}", f"CREATURE{i}", f"creature number {i}")
    for kind in ("entities", "chunks"):
        redis.incr(Keys(tenant).vector_version(kind))


def test_the_cache_indexes_only_what_a_batch_added_changed_or_removed(redis_client, tenant):
    _batch(redis_client, tenant, 0, 30)
    cache = BM25Cache(redis_client, capacity=4)
    cache.warm(tenant)
    assert cache.documents_indexed == 60  # 30 chunks, 30 entities
    store = GraphStore(redis_client, tenant)
    _batch(redis_client, tenant, 30, 5)
    _entity(store, "c31", "CREATURE2", "seen again in the marsh")  # a second fragment rewrites an old row
    store.delete_chunk("c7")
    redis_client.incr(Keys(tenant).vector_version("chunks"))
    cache.documents_indexed = 0
    cache.warm(tenant)
    assert cache.documents_indexed == 5 + 6  # the new chunks; the new entities and the one rewritten
    chunks, entities = cache(tenant, "chunks"), cache(tenant, "entities")
    assert "c7" not in chunks.ids and len(chunks) == 34
    assert [n for n, _ in entities.query("marsh")] == ["CREATURE2"]
    fresh = BM25Cache(redis_client, capacity=4, snapshot_bytes=0)
    for kind, index in (("chunks", chunks), ("entities", entities)):
        for query in ("creature2 marsh", "passage 33", "creature number"):
            assert _by_id(index, query) == _by_id(fresh(tenant, kind), query)

    _batch(redis_client, tenant, 35, 2)  # a cold process updates the snapshot the warm process stored
    cold = BM25Cache(redis_client, capacity=4)
    assert len(cold(tenant, "entities")) == len(entities) + 2 and cold.documents_indexed == 2
    assert cold.snapshot_loads == 0 and [n for n, _ in cold(tenant, "entities").query("creature36")] == [
        "CREATURE36"]
