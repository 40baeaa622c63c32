import sys
from pathlib import Path

from shared.domain.retrieval.bm25 import BM25Index, tokenize
from shared.domain.retrieval.fusion import fuse, rrf, weighted
from shared.domain.retrieval.hybrid import hybrid_search
from tests.memory_graph import hash_embed

sys.path.insert(0, str(Path(__file__).parent))
from test_query_fakes import bm25_provider_for, make_graph  # noqa: E402


def test_tokenize_lowercases_splits_and_drops_stopwords():
    assert tokenize("The Quick, brown FOX!") == ["quick", "brown", "fox"]
    assert tokenize("周冠宇 drives") == ["周", "冠", "宇", "drives"]
    assert tokenize("") == []


def test_bm25_handles_empty_corpus_and_empty_docs():
    assert BM25Index.build([]).query("anything") == []
    assert len(BM25Index.build([])) == 0
    idx = BM25Index.build([("a", ""), ("b", "the of and"), ("c", "kerosene barrels")])
    assert idx.query("kerosene") == [("c", idx.query("kerosene")[0][1])]
    assert idx.query("the") == [] and idx.query("") == [] and idx.query("x", top_k=0) == []


def test_rrf_and_weighted_fusion():
    a = [("x", 9.0), ("y", 5.0)]
    b = [("y", 0.9), ("z", 0.8)]
    assert rrf([a, b])[0][0] == "y"
    assert rrf([a, b], [1.0, 0.0])[0][0] == "x"
    assert weighted([a, b], [1.0, 0.0])[0][0] == "x"
    a3, b3 = [("x", 9.0), ("y", 8.0), ("w", 0.0)], [("y", 0.9), ("z", 0.8), ("v", 0.0)]
    assert weighted([a3, b3], [0.5, 0.5])[0][0] == "y"
    assert fuse(a, b, 1.0, "weighted")[0][0] == "x"
    assert fuse(a, b, 0.0, "rrf")[0][0] in {"y", "z"}


def test_bm25_fusion_ranks_an_exact_keyword_match_first():
    reader, store = make_graph()
    bm25 = bm25_provider_for(reader)
    q = "zeppelin quartermaster kerosene"
    # with weak embeddings the vector side alone may miss it; hybrid keeps the exact match on top
    for method in ("rrf", "weighted"):
        hits = hybrid_search(
            q,
            hash_embed(["unrelated christmas words"])[0],
            store,
            "t1",
            "chunks",
            bm25("t1", "chunks"),
            3,
            weight=0.5,
            method=method,
        )
        assert hits[0][0] == "chunk-7"


def test_hybrid_search_weights_and_threshold():
    reader, store = make_graph()
    bm25 = bm25_provider_for(reader)("t1", "chunks")
    vec = hash_embed(["Tiny Tim crutch"])[0]
    pure_vec = hybrid_search("Tiny Tim crutch", vec, store, "t1", "chunks", bm25, 2, weight=0.0)
    assert pure_vec[0][0] == "chunk-4"
    pure_kw = hybrid_search("Tiny Tim crutch", None, store, "t1", "chunks", bm25, 2, weight=1.0)
    assert pure_kw[0][0] == "chunk-4"
    none = hybrid_search(
        "nothing matches here", vec, store, "t1", "chunks", None, 5, weight=0.0, cosine_threshold=0.999
    )
    assert all(score >= 0.999 for _, score in none)
    ents = hybrid_search(
        "Marley partner",
        hash_embed(["Marley partner"])[0],
        store,
        "t1",
        "entities",
        bm25_provider_for(reader)("t1", "entities"),
        3,
        key_field="name",
    )
    assert ents[0][0] == "MARLEY"


def test_native_hybrid_used_when_store_offers_it():
    class Native:
        def hybrid_search(self, tenant, kind, text, vector, top_k, alpha, min_score):
            from shared.domain.storage import VectorHit

            return [VectorHit("n1", 0.7, {}), VectorHit("n2", 0.5, {})][:top_k]

    assert hybrid_search("q", [0.1], Native(), "t1", "chunks", None, 1) == [("n1", 0.7)]
