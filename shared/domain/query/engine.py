"""The query engine core: one entry point, ``answer_query``, for every mode. Pure: storage,
embeddings, BM25 indexes and the LLM are injected; no Redis, no Celery.

``chat(messages, phase)`` phases: keywords, rate, map, reduce, analysis (causal stage 1), answer,
repair, refine, summarize. With ``chat=None`` the answer is extractive (``answer_kind="extractive"``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from shared.domain.prompts import causal_analysis, causal_summary, naive_answer, rag_answer
from shared.domain.query.budget import SectionReport, TotalBudget, total_context_budget
from shared.domain.query.context_causal import build_causal_context, extended_node_count
from shared.domain.query.context_graph import build_graph_context
from shared.domain.query.context_hybrid import build_hybrid_context, merge_entity_hits
from shared.domain.query.context_local import build_local_context
from shared.domain.query.context_naive import build_naive_context
from shared.domain.query.formats import (
    assess_context_quality,
    build_repair_messages,
    check_response_format,
    response_instructions,
    target_words,
)
from shared.domain.query.global_run import run_global_inline
from shared.domain.query.llm_steps import extract_keywords, llm_assess, llm_rater, llm_summarizer
from shared.domain.query.params import (
    BM25_WEIGHT_LEXICAL_EMBEDDER,
    BM25_WEIGHT_MODEL_EMBEDDER,
    QueryParam,
    ResolvedParam,
    resolve,
)
from shared.domain.query.passages import Ranking, WalkProvider, candidate_count, walk_ranking
from shared.domain.query.result import FormatCheck, QueryResult, UsageMeter, extractive_facts, render_extractive
from shared.domain.query.sentence_pages import sentence_citations
from shared.domain.query.truncation import iterative_refinement, map_reduce, relevance_truncate
from shared.domain.retrieval.bm25 import BM25Index, tokenize
from shared.domain.retrieval.graph_walk import WalkIndex
from shared.domain.retrieval.hybrid import hybrid_search
from shared.domain.retrieval.walk_build import build_walk, passage_titles
from shared.domain.tokens import count_tokens

Embed = Callable[[list[str]], list[list[float]]]
MAP_REDUCE_RESERVE = 0.25  # share of the context budget for summaries when sources overflow
BM25Provider = Callable[[str, str], BM25Index | None]  # (tenant, kind) -> index whose ids match the store


class Retriever:
    """Hybrid retrieval bound to one tenant. Entity vector hits are keyed by ``payload["name"]``.

    ``lexical_embedder``: the embedder hashes words (the LLM-free one), so by default BM25 alone ranks."""

    def __init__(self, rp: ResolvedParam, reader, store, embed: Embed | None, bm25: BM25Provider | None,
                 walk: WalkProvider | None = None, lexical_embedder: bool = False):
        self.rp, self.tenant, self.store, self.embed, self.bm25 = rp, reader.tenant, store, embed, bm25
        self.reader, self.walk_provider = reader, walk
        self._indexes: dict[str, BM25Index | None] = {}
        default = BM25_WEIGHT_LEXICAL_EMBEDDER if lexical_embedder else BM25_WEIGHT_MODEL_EMBEDDER
        self.weight = rp.bm25_weight if rp.bm25_weight is not None else default
        self.entity_weight = rp.entity_bm25_weight if rp.entity_bm25_weight is not None else self.weight

    def vectors(self, texts: list[str]) -> list:
        """The texts' embeddings, or Nones when no search would read them (``reads_vectors``)."""
        if self.embed is None or self.store is None or not self.reads_vectors():
            return [None] * len(texts)
        return list(self.embed(texts))

    def reads_vectors(self) -> bool:
        """Whether a search reads the question's embedding. With BM25's share at 1 (the default over a lexical
        embedder) it ranks by BM25 alone wherever the tenant has its BM25 indexes: the embedding would cost an
        API round trip and booked tokens and never be read. A model embedder's share (0.5) always reads it."""
        if min(self.weight, self.entity_weight) < 1.0 or self.bm25 is None:
            return True
        return any(self.index(kind) is None for kind in ("entities", "chunks"))

    def index(self, kind: str) -> BM25Index | None:
        """The tenant's BM25 index of one kind, looked up once per query (one snapshot for every search)."""
        if kind not in self._indexes:
            self._indexes[kind] = self.bm25(self.tenant, kind) if self.bm25 else None
        return self._indexes[kind]

    def search(self, kind: str, text: str, vector, top_k: int) -> list[tuple[str, float]]:
        index = self.index(kind)
        return hybrid_search(
            text, vector, self.store, self.tenant, kind, index, top_k,
            self.entity_weight if kind == "entities" else self.weight,
            self.rp.cosine_threshold, self.rp.fusion, self.rp.rrf_k,
            key_field="name" if kind == "entities" else None,
        )

    def walk_index(self) -> WalkIndex | None:
        if not self.rp.graph_walk:
            return None
        if self.walk_provider is not None:
            return self.walk_provider(self.tenant)
        return walk_index_of(self.reader)

    def ranking(self, q: str, entity_hits, direct) -> Ranking:
        return walk_ranking(self.rp, self.walk_index(), q, entity_hits, direct, candidate_count(self.rp))


def walk_index_of(reader) -> WalkIndex | None:
    """A walk index built from a reader that can list its whole graph (in-memory readers, tests); a
    service passes a cached provider instead."""
    if not all(hasattr(reader, a) for a in ("all_entities", "edge_list", "all_chunk_ids")):
        return None
    sources = {name: e.source_ids for name, e in reader.all_entities().items()}
    return build_walk(reader.all_chunk_ids(), sources, reader.edge_list(), passage_titles(reader))


def _system_template(mode: str, instructions: str, ctx: str) -> str:
    if mode == "naive":
        return naive_answer.SYSTEM.format(response_type=instructions, content_data=ctx)
    if mode == "causal":
        return causal_analysis.SYSTEM.format(context_data=ctx)
    return rag_answer.SYSTEM.format(response_type=instructions, context_data=ctx)


def context_budget(rp: ResolvedParam) -> TotalBudget:
    """The context-data budget of a local / naive / hybrid / causal / graph query, resolved once: the
    window less the answer prompt (without its context), the question and the buffer."""
    bound = response_instructions(rp.response_type, rp.max_answer_words)
    return total_context_budget(rp, _system_template(rp.mode, bound, ""))


def build_context(rp: ResolvedParam, reader, retr: Retriever, budget: TotalBudget, meter=None,
                  focus: str | None = None):
    """(context, BudgetReport, Sources, details) for local / naive / hybrid / causal / graph, within
    ``budget`` (see :func:`context_budget`)."""
    q = focus or rp.query
    details: dict = {}
    pool = candidate_count(rp)
    if rp.mode == "hybrid":
        hl, ll, how = (rp.high_level_keywords, rp.low_level_keywords, "given")
        if not (hl or ll):
            hl, ll, how = extract_keywords(rp.query, meter)
        details["keywords"] = {"high_level": hl, "low_level": ll, "source": how}
        v_ll, v_hl, v_q = retr.vectors([" ".join(ll) or q, " ".join(hl) or q, q])
        low = retr.search("entities", " ".join(ll) or q, v_ll, rp.top_k)
        high = retr.search("entities", " ".join(hl) or q, v_hl, rp.top_k)
        direct = retr.search("chunks", q, v_q, pool)
        ranking = _ranking(retr, f"{q} {' '.join(ll)}", merge_entity_hits(low, high), direct, details)
        ctx, rep, src = build_hybrid_context(reader, low, high, rp, direct, ranking=ranking, budget=budget)
        return ctx, rep, src, details
    (vec,) = retr.vectors([q])
    direct = retr.search("chunks", q, vec, pool)
    if rp.mode == "naive":
        details["candidates"] = [c for c, _ in direct]
        return (*build_naive_context(reader, direct, rp, budget=budget), details)
    if rp.mode == "causal":
        n = extended_node_count(rp)
        hits = retr.search("entities", q, vec, n)
        details["extended_nodes"] = {"requested": n, "found": len(hits)}
        ranking = _ranking(retr, q, hits, direct, details)
        return (*build_causal_context(reader, hits, rp, direct, ranking=ranking, budget=budget), details)
    hits = retr.search("entities", q, vec, rp.top_k)
    ranking = _ranking(retr, q, hits, direct, details)
    if rp.mode == "graph":
        ranking = ranking or Ranking(list(direct), details={"walk": None})
        return (*build_graph_context(reader, ranking, rp, budget=budget), details)
    return (*build_local_context(reader, hits, rp, direct, ranking=ranking, budget=budget), details)


def _ranking(retr: Retriever, q: str, entity_hits, direct, details: dict) -> Ranking | None:
    """The graph walk's ranking (None when the walk is off or the tenant has no graph: the builders
    then rank sources as nano-graphrag does); its seeds and candidates go to ``details``."""
    ranking = retr.ranking(q, entity_hits, direct)
    details.update(ranking.details)
    if ranking.details.get("walk") is None:
        details["candidates"] = [c for c, _ in direct]
        return None
    details["candidates"] = [c for c, _ in ranking.passages]
    return ranking


def _add_summaries(rp: ResolvedParam, reader, ctx: str, report, sources, meter) -> str:
    """Map-reduce over the overflow: summarize the chunks the budget dropped into the room that is left."""
    room = report.total_allowed - report.total_tokens - 16
    if not sources.omitted_chunks or room < rp.min_partial_tokens:
        return ctx
    chunks = reader.chunks(sources.omitted_chunks)
    texts = [f"[{c}] {chunks[c].text}" for c in sources.omitted_chunks if c in chunks]
    block = "-----Summaries of omitted sources-----\n"
    room -= count_tokens(block, rp.model)
    summary, calls = map_reduce(texts, rp.query, room, llm_summarizer(meter), rp.model,
                                group_budget=rp.global_group_tokens)
    summary = relevance_truncate(summary, rp.query, room, rp.model)
    if not summary:
        return ctx
    section = block + summary
    tokens = count_tokens(section, rp.model)
    report.sections.append(SectionReport(
        name="summaries", candidates=len(texts), kept=len(texts), tokens_used=tokens, tokens_allowed=room,
    ))
    new_ctx = f"{ctx}\n\n{section}" if ctx else section
    report.total_tokens = count_tokens(new_ctx, rp.model)
    report.notes.append(f"map-reduce summarized {len(texts)} omitted chunks in {calls} calls")
    report.finalize()
    return new_ctx


def _generate(rp: ResolvedParam, ctx: str, instructions: str, meter) -> str:
    messages = [{"role": "system", "content": _system_template(rp.mode, instructions, ctx)},
                {"role": "user", "content": rp.query}]
    if rp.mode != "causal":
        return meter(messages, "answer")
    analysis = meter(messages, "analysis")
    summary = causal_summary.SYSTEM.format(response_type=instructions, analysis=analysis)
    return meter([{"role": "system", "content": summary}, {"role": "user", "content": rp.query}], "answer")


def _check_and_repair(rp: ResolvedParam, answer: str, meter) -> tuple[str, FormatCheck]:
    ok, problems = check_response_format(answer, rp.response_type)
    fc = FormatCheck(ok=ok, problems=problems, checked=True)
    if ok or not rp.repair_format or meter is None:
        return answer, fc
    fixed = meter(build_repair_messages(answer, rp.response_type, problems), "repair")
    ok2, problems2 = check_response_format(fixed, rp.response_type)
    fc.repaired = True
    if ok2 or len(problems2) < len(problems):
        answer, fc.ok, fc.problems = fixed, ok2, problems2
    return answer, fc


def _quality(sources, reader) -> dict:
    levels = []
    if sources.reports:
        comms = reader.communities_by_ids(sources.reports)
        levels = [comms[r].level for r in sources.reports if r in comms]
    return assess_context_quality(len(sources.entities), len(sources.relations), len(sources.chunks), levels)


def _select_context(rp: ResolvedParam, reader, retr: Retriever, budget: TotalBudget, meter, focus: str):
    """The context for ``focus``; with map-reduce truncation and sources left out, rebuilt with a share
    of the budget held back for summaries of the rest (map-reduce summarization), which then fill that share."""
    started = time.perf_counter()
    ctx, rep, src, det = build_context(rp, reader, retr, budget, meter, focus)
    det["context_ms"] = round(1000 * (time.perf_counter() - started), 2)
    if rp.source_truncation == "map_reduce" and meter is not None and src.omitted_chunks:
        reserve = int(rep.total_allowed * MAP_REDUCE_RESERVE)
        ctx, rep, src, det = build_context(rp, reader, retr, budget.reserving(reserve), meter, focus)
        rep.total_allowed += reserve
        rep.notes.append(f"{reserve} tokens reserved for summaries of omitted sources")
        ctx = _add_summaries(rp, reader, ctx, rep, src, meter)
    return ctx, rep, src, det


def global_entity_hits(rp: ResolvedParam, reader, vector_store, embed: Embed | None, bm25: BM25Provider | None,
                       lexical_embedder: bool = False) -> list[tuple[str, float]] | None:
    """The question's entity search (local mode's hybrid search: BM25 fused with embedding cosine), which
    anchors global mode's relevance selection; None when the selection does not use it."""
    if (rp.global_selection not in ("auto", "relevance") or rp.dynamic_community_selection or not rp.query.strip()
            or not rp.global_anchor_entities):
        return None
    retr = Retriever(rp, reader, vector_store, embed, bm25, None, lexical_embedder)
    return retr.search("entities", rp.query, retr.vectors([rp.query])[0], rp.global_anchor_entities)


def _answer_global(rp: ResolvedParam, reader, chat: Callable | None, rate: Callable | None, meter,
                   entity_hits=None) -> QueryResult:
    if rate is None and meter is not None and (rp.dynamic_community_selection or rp.global_selection == "dynamic"):
        rate = llm_rater(rp.query, meter)
    res = run_global_inline(rp, reader, chat, rate, meter, entity_hits=entity_hits)
    res.details["preset"] = rp.applied_preset
    return res


def _llm_answer(result: QueryResult, rp: ResolvedParam, reader, state: dict, meter: UsageMeter,
                select: Callable[[str, Sequence], list[tuple[str, str]]]) -> QueryResult:
    """Generate (refining when asked), check the format and repair it; the answer's length follows the
    context's size, quality and the question's complexity."""

    def words() -> int:
        q = result.quality.get("score", 0.0)
        complexity = len(set(tokenize(rp.query))) + len(state["sources"].entities)
        return target_words(rp.response_type, state["report"].total_tokens, q, complexity,
                            rp.min_answer_words, rp.max_answer_words)

    def answer(_q: str, _ctx) -> str:
        return _generate(rp, state["ctx"], response_instructions(rp.response_type, words()), meter)

    if rp.iterative_refinement:
        text, history = iterative_refinement(rp.query, [], answer, llm_assess(meter), select, rp.max_iterations)
        result.details["refinement"] = [h.__dict__ for h in history]
        _fill(result, rp, reader, state)
    else:
        text = answer(rp.query, None)
    result.answer, result.format_check = _check_and_repair(rp, text, meter)
    result.answer_kind = "llm"
    result.details["target_words"] = words()
    result.usage = meter.usage
    return result


def answer_query(
    param: QueryParam,
    reader,
    vector_store,
    embed: Embed | None = None,
    chat: Callable | None = None,
    bm25_provider: BM25Provider | None = None,
    *,
    tenant_preset: str | dict | None = None,
    rate: Callable | None = None,
    prices: dict | None = None,
    walk_provider: WalkProvider | None = None,
    lexical_embedder: bool = False,
) -> QueryResult:
    rp = param if isinstance(param, ResolvedParam) else resolve(param, tenant_preset)
    meter = UsageMeter(chat, rp.model, prices) if chat is not None else None
    if meter is None and rp.source_truncation == "map_reduce":  # no LLM to summarize: degrade to relevance
        rp = rp.model_copy(update={"source_truncation": "relevance"})
    if rp.mode == "global":
        hits = global_entity_hits(rp, reader, vector_store, embed, bm25_provider, lexical_embedder)
        return _answer_global(rp, reader, chat, rate, meter, hits)
    retr = Retriever(rp, reader, vector_store, embed, bm25_provider, walk_provider, lexical_embedder)
    budget = context_budget(rp)
    state: dict = {}

    def select(focus: str, _docs: Sequence) -> list[tuple[str, str]]:
        ctx, rep, src, det = _select_context(rp, reader, retr, budget, meter, focus)
        state.update(ctx=ctx, report=rep, sources=src, details=det)
        return [(e.cite, e.text) for e in src.evidence]

    select(rp.query, [])
    result = QueryResult(mode=rp.mode, details={**state["details"], "preset": rp.applied_preset,
                                                 "fusion": {"method": rp.fusion, "bm25_weight": retr.weight,
                                                            "lexical_embedder": lexical_embedder}})
    _fill(result, rp, reader, state)
    if rp.only_need_context:
        return result
    if meter is None:
        facts = extractive_facts(rp.query, state["sources"], embed=None if lexical_embedder else embed,
                                 room_words=rp.min_answer_words or rp.max_answer_words, docs=state["docs"])
        result.answer = render_extractive(facts)
        result.answer_kind = "extractive" if result.answer else "none"
        result.sources.sentences = sentence_citations(facts, reader, state["docs"], result.sources.document_names)
        return result
    return _llm_answer(result, rp, reader, state, meter, select)


def _evidence_pages(sources, reader) -> None:
    """An entity's or relation's evidence gets the pages of the chunks it was extracted from (paged documents):
    a citation of a PDF fact names its pages whatever kind of row carried it."""
    graph_rows = [ev for ev in sources.evidence if ev.kind in ("entity", "relation") and not ev.pages]
    wanted = {c for ev in graph_rows for c in ev.chunk_ids}
    if not wanted:
        return
    chunks = reader.chunks(sorted(wanted))
    for ev in graph_rows:
        ev.pages = sorted({p for c in ev.chunk_ids if c in chunks for p in chunks[c].pages})


def _fill(result: QueryResult, rp: ResolvedParam, reader, state: dict) -> None:
    result.budget, result.sources = state["report"], state["sources"]
    _evidence_pages(result.sources, reader)
    docs = reader.documents(result.sources.documents) if result.sources.documents else {}
    state["docs"] = docs
    result.sources.document_names = {d: (docs[d].title if d in docs and docs[d].title else d)
                                     for d in result.sources.documents}
    result.citations = result.sources.citations()
    result.quality = _quality(result.sources, reader)
    if rp.only_need_context or rp.include_context:
        result.context = state["ctx"]
