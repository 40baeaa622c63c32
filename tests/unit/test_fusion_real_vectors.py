"""Hybrid search with the local model's real vectors: fused, it finds what the better of BM25 and the vectors
finds, on questions where each list alone misses something (rare names for BM25, paraphrases for vectors)."""

from __future__ import annotations

import pytest

from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.hybrid import hybrid_search
from shared.domain.storage import VectorItem
from tests.memory_graph import InMemoryVectorStore

PASSAGES = {
    "p1": "Zbigniew Kowalczyk founded the Gdansk shipyard union in 1978 and led its first strike.",
    "p2": "The physician examined the infant and prescribed rest and fluids for the fever.",
    "p3": "A large automobile factory opened near the ocean port, employing thousands of workers.",
    "p4": "The attorney argued that the purchase contract was void because it was signed under pressure.",
    "p5": "Quetzalcoatl was worshipped by the Aztecs as a feathered serpent god of wind and learning.",
    "p6": "The film premiered at the festival and the director thanked the cast for their work.",
    "p7": "Heavy rain flooded the valley roads, and the farmers moved their cattle to higher ground.",
    "p8": "The orchestra rehearsed the symphony for weeks before the opening night concert.",
    "p9": "Mount Kilimanjaro is the highest mountain in Africa and a dormant volcano in Tanzania.",
    "p10": "The startup raised money from investors to build a faster delivery network.",
    "p11": "Engineers repaired the bridge after an earthquake cracked two of its pillars.",
    "p12": "The bakery sold fresh bread every morning to the people of the village.",
    "p13": "Error E4021 on the controller means the disk is full: free some space and retry the job.",
    "p14": "Error E7733 on the controller means the network cable is unplugged: check the port.",
    "p15": "Error E1190 on the controller means the fan has stopped: let the unit cool down first.",
    "p16": "Dock workers in Szczecin formed a shipyard union and led a strike for higher wages.",
}
QUESTIONS = [  # (question, the passage that answers it)
    ("Who founded the Gdansk shipyard union?", "p1"),
    ("What does E7733 mean?", "p14"),
    ("What is wrong when the controller shows E1190?", "p15"),
    ("Is E4021 about the network cable or about the fan?", "p13"),
    ("Which union did Kowalczyk start?", "p1"),
    ("Which deity did the Aztecs call Quetzalcoatl?", "p5"),
    ("Where is Kilimanjaro?", "p9"),
    ("What did the doctor give the sick baby?", "p2"),
    ("Which lawyer said the buy agreement was invalid?", "p4"),
    ("Where did the big car plant open by the sea?", "p3"),
    ("What happened when the movie was first shown?", "p6"),
    ("How did the company get funding for quicker shipping?", "p10"),
]


def _found(ranked: list[tuple[str, float]], gold: str, k: int) -> float:
    return 1.0 if gold in [i for i, _ in ranked[:k]] else 0.0


@pytest.fixture(scope="module")
def searchable():
    from shared.infra.llm.local_embedder import LocalEmbedder

    embedder = LocalEmbedder()
    store = InMemoryVectorStore()
    vectors = embedder.embed(list(PASSAGES.values()))
    store.upsert("t", "chunks", [VectorItem(i, v, {}) for i, v in zip(PASSAGES, vectors, strict=True)])
    return embedder, store, BM25Index.build(PASSAGES.items())


@pytest.mark.parametrize("k", [1, 2, 3])
def test_fusion_is_never_below_its_better_input(searchable, k):
    embedder, store, index = searchable
    scores = {"bm25": 0.0, "vector": 0.0, "fused": 0.0}
    for question, gold in QUESTIONS:
        (vec,) = embedder.embed([question])
        for name, weight in (("bm25", 1.0), ("vector", 0.0), ("fused", 0.5)):
            ranked = hybrid_search(question, vec, store, "t", "chunks", index, 5, weight, 0.0, "zscore")
            scores[name] += _found(ranked, gold, k)
    assert scores["bm25"] < len(QUESTIONS) and scores["vector"] < len(QUESTIONS)  # each list alone misses some
    assert scores["fused"] >= max(scores["bm25"], scores["vector"]), scores
