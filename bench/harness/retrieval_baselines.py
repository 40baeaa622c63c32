"""bench/suites/retrieval.py's baselines: whole passage documents ranked without a graph, packed by one packer."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from bench.harness.datasets import Dataset
from bench.harness.retrieval_records import question_record
from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.fusion import zscore
from shared.domain.tokens import count_tokens, count_tokens_batch

BUDGET_MODEL = "gpt-4"  # cl100k_base
BM25_TOP_K = 300
HYBRID_BM25_WEIGHT = 0.5
BASELINE_MODES = ("bm25", "hybrid_baseline", "dense")  # the rankings' names, and the records' system and mode


@dataclass
class Ranking:
    keys: list[str]  # passage keys, best first
    ms: float  # what ranking them took (the question's embedding included)


class Packer:
    """Whole documents packed best first into a token allowance; one ``retrieval_question`` per question."""

    def __init__(self, docs: dict[str, str]):
        self.docs = docs
        self.tokens = dict(zip(docs, count_tokens_batch(list(docs.values()), BUDGET_MODEL), strict=True))

    def pack(self, ranked: list[str], allowance: int) -> tuple[str, list[str]]:
        """(context, kept keys): each document that still fits (+1 token for its line break), in rank order."""
        kept, used = [], 0
        for key in ranked:
            if used + self.tokens[key] + 1 <= allowance:
                kept.append(key)
                used += self.tokens[key] + 1
        return "\n".join(self.docs[k] for k in kept), kept

    def records(self, ds: Dataset, head: dict, rankings: dict[str, list[str] | Ranking],
                allowances: dict[str, tuple[int, str | None]] | None, budget: int) -> list[dict]:
        """One ``retrieval_question`` per question; allowance per question (None: the whole budget)."""
        out = []
        for q in ds.questions:
            allowance, source = (allowances or {}).get(q["qid"], (budget, None))
            ranking = rankings[q["qid"]]
            ranked = ranking.keys if isinstance(ranking, Ranking) else ranking
            t0 = time.perf_counter()
            context, kept = self.pack(ranked, allowance)
            pack_ms = (time.perf_counter() - t0) * 1000
            tokens = count_tokens(context, BUDGET_MODEL)
            rec = question_record(head, q, context, ds.passages, ranked=ranked, kept=set(kept), context_tokens=tokens)
            if isinstance(ranking, Ranking):
                rec["context_ms"] = round(ranking.ms + pack_ms, 3)
            out.append({**rec, "allowance": allowance, "allowance_from": source, "total_tokens": tokens,
                        "carries_passages": True})
        return out


class Bm25(Packer):
    """BM25 over a set's passage documents."""

    def __init__(self, docs: dict[str, str], top_k: int = BM25_TOP_K):
        super().__init__(docs)
        self.top_k = top_k
        self.index = BM25Index.build(docs.items())

    def scored(self, query: str) -> list[tuple[str, float]]:
        return self.index.query(query, top_k=self.top_k)

    def rank(self, query: str) -> list[str]:
        return [key for key, _score in self.scored(query)]


class Dense:
    """The documents' unit vectors (one embedding pass, timed: ``embed_cost``) and cosine ranking."""

    def __init__(self, docs: dict[str, str], top_k: int = BM25_TOP_K, embedder=None):
        if embedder is None:
            from shared.infra.llm.local_embedder import LocalEmbedder

            embedder = LocalEmbedder()  # loads the model: not part of the timed pass below
        self.embedder, self.top_k, self.keys = embedder, top_k, list(docs)
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = embedder.embed(list(docs.values()))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        self.matrix = np.asarray(vectors, dtype=np.float32).reshape(len(self.keys), -1)
        self.embed_cost = {"model": getattr(embedder, "name", type(embedder).__name__), "passages": len(self.keys),
                           "seconds": round(wall, 3), "cpu_seconds": round(cpu, 3),
                           "passages_per_s": round(len(self.keys) / wall, 1) if wall > 0 else None}

    def scored(self, query: str) -> list[tuple[str, float]]:
        """The ``top_k`` documents by cosine with the question, highest first (ties keep corpus order)."""
        vec = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        if not self.keys:
            return []
        sims = self.matrix @ vec
        order = np.argsort(-sims, kind="stable")[: self.top_k]
        return [(self.keys[i], float(sims[i])) for i in order]


def hybrid(keyword: list[tuple[str, float]], dense: list[tuple[str, float]], bm25_weight: float,
           top_k: int) -> list[str]:
    """The "no graph" hybrid order: z-score fusion of BM25's and the dense list at (W, 1 - W), top ``top_k``."""
    return [key for key, _score in zscore([keyword, dense], [bm25_weight, 1.0 - bm25_weight])[:top_k]]


class Baselines(Bm25):
    """BM25, dense and their fusion over one set's documents, each question ranked once per baseline."""

    def __init__(self, docs: dict[str, str], top_k: int = BM25_TOP_K, bm25_weight: float = HYBRID_BM25_WEIGHT,
                 embedder=None):
        super().__init__(docs, top_k)
        self.bm25_weight = bm25_weight
        self.dense = Dense(docs, top_k, embedder)

    @property
    def embed_cost(self) -> dict:
        return self.dense.embed_cost

    def rank_all(self, questions: list[dict]) -> dict[str, dict[str, Ranking]]:
        """{baseline: {qid: Ranking}}; the hybrid's time is its two lists' plus the fusion."""
        out: dict[str, dict[str, Ranking]] = {name: {} for name in BASELINE_MODES}
        for q in questions:
            t0 = time.perf_counter()
            keyword = self.scored(q["question"])
            t1 = time.perf_counter()
            dense = self.dense.scored(q["question"])
            t2 = time.perf_counter()
            fused = hybrid(keyword, dense, self.bm25_weight, self.top_k)
            t3 = time.perf_counter()
            out["bm25"][q["qid"]] = Ranking([k for k, _ in keyword], (t1 - t0) * 1000)
            out["dense"][q["qid"]] = Ranking([k for k, _ in dense], (t2 - t1) * 1000)
            out["hybrid_baseline"][q["qid"]] = Ranking(fused, (t3 - t0) * 1000)
        return out
