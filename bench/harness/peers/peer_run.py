"""Run nano-graphrag or LightRAG on a corpus against the LLM simulator; print one JSON line per phase."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np


def sim_stats(base_url: str) -> dict:
    return httpx.get(base_url.removesuffix("/v1") + "/stats", timeout=30).json()


def delta(before: dict, after: dict) -> dict:
    """Counters of one phase: calls and tokens by prompt type, embeddings."""
    by_type = {}
    for kind, now in after["chat"]["by_type"].items():
        was = before["chat"]["by_type"].get(kind, {})
        d = {k: now[k] - was.get(k, 0) for k in ("calls", "prompt_tokens", "completion_tokens")}
        if d["calls"]:
            by_type[kind] = d
    chat = {k: after["chat"][k] - before["chat"][k] for k in ("calls", "prompt_tokens", "completion_tokens")}
    emb = {k: after["embeddings"][k] - before["embeddings"][k] for k in ("calls", "inputs", "tokens")}
    return {"llm_calls": chat["calls"], "prompt_tokens": chat["prompt_tokens"],
            "completion_tokens": chat["completion_tokens"], "calls_by_type": by_type,
            "embedding_calls": emb["calls"], "embedding_inputs": emb["inputs"]}


def emit(record: dict, out: Path) -> None:
    """One JSON line to ``out`` (not stdout: the peers print progress tickers there)."""
    with out.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")


def graph_counts(workdir: Path) -> dict:
    import networkx as nx

    files = sorted(workdir.glob("*.graphml"))
    if not files:
        return {"entities": 0, "relations": 0}
    g = nx.read_graphml(files[0])
    return {"entities": g.number_of_nodes(), "relations": g.number_of_edges()}


def embedder(spec: dict):
    """The simulator's embeddings at the spec's dimension, as both peers call them."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=spec["base_url"], api_key="sk-bench")

    async def embed(texts: list[str], **_kw) -> np.ndarray:
        resp = await client.embeddings.create(model="text-embedding-3-small", input=texts,
                                              dimensions=spec["embedding_dim"], encoding_format="float")
        return np.array([d.embedding for d in resp.data])

    return embed


async def nano_rag(spec: dict):
    from nano_graphrag import GraphRAG
    from nano_graphrag._llm import openai_complete_if_cache
    from nano_graphrag._utils import wrap_embedding_func_with_attrs

    async def complete(prompt, system_prompt=None, history_messages=[], **kwargs):  # noqa: B006 (nano's signature)
        return await openai_complete_if_cache(spec["model"], prompt, system_prompt=system_prompt,
                                              history_messages=history_messages, **kwargs)

    import graspologic  # noqa: F401  (imported lazily by nano at clustering; warm it like a running service)

    # The simulator's embeddings are bags of hashed words: cosines run lower than a real model's, so
    # the 0.2 cut-off meant for real embeddings would drop every chunk. 0 keeps nano's top-k ranking.
    embed = wrap_embedding_func_with_attrs(embedding_dim=spec["embedding_dim"], max_token_size=8192)(embedder(spec))
    return GraphRAG(working_dir=spec["workdir"], enable_naive_rag=True, embedding_func=embed,
                    best_model_func=complete, cheap_model_func=complete, query_better_than_threshold=0.0,
                    best_model_max_async=spec["llm_concurrency"], cheap_model_max_async=spec["llm_concurrency"])


def nano_param(mode: str, only_context: bool, budget: int | None):
    from nano_graphrag import QueryParam

    param = QueryParam(mode=mode, only_need_context=only_context)
    if budget:  # nano's local split is 0.33 / 0.40 / 0.27 of 12,000 tokens: keep the shares
        param.local_max_token_for_text_unit = int(budget * 0.33)
        param.local_max_token_for_local_context = int(budget * 0.40)
        param.local_max_token_for_community_report = int(budget * 0.27)
        param.naive_max_token_for_text_unit = budget
        param.global_max_token_for_community_report = budget
    return param


async def nano_communities(rag) -> dict:
    keys = await rag.community_reports.all_keys()
    levels = Counter(int(item.get("level", 0)) for item in await rag.community_reports.get_by_ids(keys) if item)
    return {"communities": len(keys), "communities_by_level": dict(sorted(levels.items()))}


async def lightrag_rag(spec: dict):
    from lightrag import LightRAG
    from lightrag.kg.shared_storage import initialize_pipeline_status
    from lightrag.llm.openai import openai_complete_if_cache
    from lightrag.utils import EmbeddingFunc

    async def complete(prompt, system_prompt=None, history_messages=None, keyword_extraction=False, **kwargs):
        kwargs.pop("hashing_kv", None)
        return await openai_complete_if_cache(spec["model"], prompt, system_prompt=system_prompt,
                                              history_messages=history_messages or [], base_url=spec["base_url"],
                                              api_key="sk-bench", **kwargs)

    embed = EmbeddingFunc(embedding_dim=spec["embedding_dim"], max_token_size=8192, func=embedder(spec))
    rag = LightRAG(working_dir=spec["workdir"], llm_model_func=complete, llm_model_name=spec["model"],
                   llm_model_max_async=spec["llm_concurrency"], embedding_func_max_async=spec["llm_concurrency"],
                   embedding_func=embed, cosine_better_than_threshold=0.0,  # as for nano: the cosines run low
                   vector_db_storage_cls_kwargs={"cosine_better_than_threshold": 0.0})
    await rag.initialize_storages()
    await initialize_pipeline_status()
    return rag


def lightrag_param(mode: str, only_context: bool, budget: int | None):
    from lightrag import QueryParam

    param = QueryParam(mode=mode, only_need_context=only_context, enable_rerank=False)  # no rerank model here
    if budget:  # LightRAG's own budget knobs; entity/relation shares as in its defaults (6k/8k of 30k)
        param.max_total_tokens = budget
        param.max_entity_tokens = int(budget * 0.2)
        param.max_relation_tokens = int(budget * 0.27)
    return param


async def timed_query(rag, query: str, param) -> tuple[str, str | None, float]:
    """(the output as text, the error if it failed, seconds): a peer's failure is a result, not a crash."""
    started, out, error = time.perf_counter(), "", None
    try:
        out = await rag.aquery(query, param=param)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False, default=str), error, seconds


async def main(spec: dict) -> None:
    system, base = spec["system"], spec["base_url"]
    workdir = Path(spec["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    param_of = nano_param if system == "nano" else lightrag_param
    out_path = Path(spec["out"])
    rag = await (nano_rag if system == "nano" else lightrag_rag)(spec)
    if spec.get("docs"):
        before, started = sim_stats(base), time.perf_counter()
        await rag.ainsert(spec["docs"])
        seconds = time.perf_counter() - started
        communities = await nano_communities(rag) if system == "nano" else {"communities": 0,
                                                                             "communities_by_level": {}}
        emit({"phase": "ingest", "system": system, "seconds": round(seconds, 3), "docs": len(spec["docs"]),
              **delta(before, sim_stats(base)), **graph_counts(workdir), **communities}, out_path)
    for q in spec.get("queries", []):  # a query's own budget, else the spec's
        before = sim_stats(base)
        text, error, seconds = await timed_query(rag, q["query"], param_of(q["mode"], q["only_need_context"],
                                                                          q.get("budget", spec.get("budget"))))
        emit({"phase": "query", "system": system, "id": q.get("id"), "mode": q["mode"],
              "only_need_context": q["only_need_context"], "seconds": round(seconds, 5), "error": error,
              "output": text, **delta(before, sim_stats(base))}, out_path)
    if system == "lightrag":
        await rag.finalize_storages()


if __name__ == "__main__":
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    os.environ.setdefault("OPENAI_BASE_URL", spec["base_url"])
    asyncio.run(main(spec))
