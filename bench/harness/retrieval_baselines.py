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


class Bm25:
    """BM25 over a set's passage documents, and the packer every baseline shares."""

    def __init__(self, docs: dict[str, str], top_k: int = BM25_TOP_K):
        self.docs, self.top_k = docs, top_k
        self.tokens = dict(zip(docs, count_tokens_batch(list(docs.values()), BUDGET_MODEL), strict=True))
        self.index = BM25Index.build(docs.items())

    def scored(self, query: str) -> list[tuple[str, float]]:
        return self.index.query(query, top_k=self.top_k)

    def pack(self, ranked: list[str], allowance: int) -> tuple[str, list[str]]:
        """(context, kept keys): each document that still fits (+1 token for its line break), in rank order."""
        kept, used = [], 0
        for key in ranked:
            if used + self.tokens[key] + 1 <= allowance:
                kept.append(key)
                used += self.tokens[key] + 1
        return "\n".join(self.docs[k] for k in kept), kept

    def records(self, ds: Dataset, head: dict, rankings: dict[str, Ranking],
                allowances: dict[str, tuple[int, str | None]] | None, budget: int) -> list[dict]:
        """One ``retrieval_question`` per question, packed into its allowance (None: the whole budget)."""
        out = []
        for q in ds.questions:
            allowance, source = (allowances or {}).get(q["qid"], (budget, None))
            ranking = rankings[q["qid"]]
            t0 = time.perf_counter()
            context, kept = self.pack(ranking.keys, allowance)
            context_ms = ranking.ms + (time.perf_counter() - t0) * 1000  # ranking, then packing
            tokens = count_tokens(context, BUDGET_MODEL)
            rec = question_record(head, q, context, ds.passages, ranked=ranking.keys, kept=set(kept),
                                  context_tokens=tokens)
            out.append({**rec, "allowance": allowance, "allowance_from": source, "total_tokens": tokens,
                        "carries_passages": True, "context_ms": round(context_ms, 3)})
        return out


def hybrid(keyword: list[tuple[str, float]], dense: list[tuple[str, float]], bm25_weight: float,
           top_k: int) -> list[str]:
    """The "no graph" hybrid order: z-score fusion of BM25's and the dense list at (W, 1 - W), top ``top_k``."""
    return [key for key, _score in zscore([keyword, dense], [bm25_weight, 1.0 - bm25_weight])[:top_k]]


class Baselines(Bm25):
    """BM25, dense (the local embedder's cosine) and their fusion, each question ranked once per baseline."""

    def __init__(self, docs: dict[str, str], top_k: int = BM25_TOP_K, bm25_weight: float = HYBRID_BM25_WEIGHT):
        from shared.infra.llm.local_embedder import LocalEmbedder

        super().__init__(docs, top_k)
        self.bm25_weight, self.keys = bm25_weight, list(docs)
        self.embedder = LocalEmbedder()  # loads the model: not part of the timed pass below
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = self.embedder.embed(list(docs.values()))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        self.matrix = np.asarray(vectors, dtype=np.float32).reshape(len(self.keys), -1)
        self.embed_cost = {"model": getattr(self.embedder, "name", type(self.embedder).__name__),
                           "passages": len(self.keys), "seconds": round(wall, 3), "cpu_seconds": round(cpu, 3),
                           "passages_per_s": round(len(self.keys) / wall, 1) if wall > 0 else None}

    def dense(self, query: str) -> list[tuple[str, float]]:
        """The ``top_k`` documents by cosine with the question, highest first (ties keep corpus order)."""
        vec = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        if not self.keys:
            return []
        sims = self.matrix @ vec
        return [(self.keys[i], float(sims[i])) for i in np.argsort(-sims, kind="stable")[: self.top_k]]

    def rank_all(self, questions: list[dict]) -> dict[str, dict[str, Ranking]]:
        """{baseline: {qid: Ranking}}; the hybrid's time is its two lists' plus the fusion."""
        out: dict[str, dict[str, Ranking]] = {name: {} for name in BASELINE_MODES}
        for q in questions:
            t0 = time.perf_counter()
            keyword = self.scored(q["question"])
            t1 = time.perf_counter()
            dense = self.dense(q["question"])
            t2 = time.perf_counter()
            fused = hybrid(keyword, dense, self.bm25_weight, self.top_k)
            out["bm25"][q["qid"]] = Ranking([k for k, _ in keyword], (t1 - t0) * 1000)
            out["dense"][q["qid"]] = Ranking([k for k, _ in dense], (t2 - t1) * 1000)
            out["hybrid_baseline"][q["qid"]] = Ranking(fused, (time.perf_counter() - t0) * 1000)
        return out
