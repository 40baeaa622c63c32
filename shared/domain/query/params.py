"""Query parameters: one typed model with every budget, named presets, and their resolution.

Resolution order (lowest to highest): field defaults < preset (tenant's, or the query's own
``preset``) < fields the caller set explicitly (``model_fields_set``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Mode = Literal["local", "global", "naive", "hybrid", "causal", "graph"]
PresetName = Literal["default", "balanced", "low_memory"]
TextOrder = Literal["relevance", "shortest_first"]
SourceTruncation = Literal["relevance", "structure", "map_reduce", "none"]
Fusion = Literal["zscore", "rrf", "weighted"]
BudgetSplit = Literal["evidence", "fixed"]
GlobalSelection = Literal["auto", "all", "relevance", "dynamic"]
# BM25's share in the fusion when the caller gives none: see shared/domain/retrieval/fusion.py and
# docs/benchmarks.md, "Retrieval quality under a token budget". A lexical embedder (the hashing one,
# GRAPHFLEET_EMBEDDING__PROVIDER=hashing) hashes the same words BM25 scores, so it only adds collision noise:
# BM25 alone. A model embedder (the local model, an endpoint's) gets an equal say.
BM25_WEIGHT_LEXICAL_EMBEDDER = 1.0
BM25_WEIGHT_MODEL_EMBEDDER = 0.5
# The extractive answer (no LLM: shared/domain/query/extractive.py): at most this many whole sentences, within
# the query's ``min_answer_words`` (the shortest answer it asks for); the question and at most this many candidate
# sentences are embedded in one call; BM25's share in the sentences' ranking beside the cosine to the question
# (words still count, the meaning counts more: a sentence of a dozen words shares few words with any question).
EXTRACTIVE_SENTENCES = 5
EXTRACTIVE_CANDIDATES = 64
EXTRACTIVE_LEXICAL_SHARE = 0.3

# LightRAG-style presets of the retrieval sizes and token caps (entities, relations, then chunks get the rest).
# "default" restates LightRAG's defaults so a preset can be chosen back.
PRESETS: dict[str, dict[str, int]] = {
    "default": {
        "top_k": 40, "chunk_top_k": 20, "max_total_tokens": 30000,
        "max_entity_tokens": 6000, "max_relation_tokens": 8000,
    },
    "balanced": {
        "top_k": 30, "chunk_top_k": 15, "max_total_tokens": 15000,
        "max_entity_tokens": 4000, "max_relation_tokens": 5000,
    },
    "low_memory": {
        "top_k": 20, "chunk_top_k": 10, "max_total_tokens": 8000,
        "max_entity_tokens": 3000, "max_relation_tokens": 3000,
    },
}


class LocalProportions(BaseModel):
    """nano-graphrag-style local context proportions: the local budget's split (reports 25%, entities 20%,
    relations 25%, sources 30%)."""

    model_config = ConfigDict(extra="forbid")

    reports: float = Field(0.25, ge=0, le=1)
    entities: float = Field(0.20, ge=0, le=1)
    relationships: float = Field(0.25, ge=0, le=1)
    sources: float = Field(0.30, ge=0, le=1)

    @model_validator(mode="after")
    def _sum_at_most_one(self) -> LocalProportions:
        total = self.reports + self.entities + self.relationships + self.sources
        if total > 1.0 + 1e-6:
            raise ValueError(f"local proportions sum to {total:.3f} > 1")
        return self


class QueryParam(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Mode = "local"
    query: str = ""
    response_type: str = "multiple_paragraphs"  # one of formats.RESPONSE_TYPES, or free text
    only_need_context: bool = False
    include_context: bool = False  # return the context with the answer too
    preset: PresetName = "default"

    # retrieval
    top_k: int = Field(40, ge=1, le=10000)
    chunk_top_k: int = Field(20, ge=1, le=10000)
    # vector hits below this cosine are dropped before fusion. 0 keeps every hit that leans towards the question:
    # the local model's cosines for relevant passages are often below LightRAG's 0.2, which then left the
    # z-scores of a few survivors to decide (docs/benchmarks.md, "Retrieval quality under a token budget")
    cosine_threshold: float = Field(0.0, ge=-1.0, le=1.0)
    # share of BM25 in the fusion; 0 = vector only; None = by the embedder's kind (see above)
    bm25_weight: float | None = Field(None, ge=0.0, le=1.0)
    # BM25's share in the entity search alone (the walk's entity seeds, local's entity rows); None = bm25_weight.
    # 1 finds entities by their words only, without the question's embedding
    entity_bm25_weight: float | None = Field(None, ge=0.0, le=1.0)
    fusion: Fusion = "zscore"
    candidate_limit: int = Field(200, ge=1, le=10000)  # passages scored at most when filling the budget
    # graph walk (mode "graph", and the source ranking of local/hybrid/causal): personalized PageRank
    graph_walk: bool = True  # False: local/hybrid/causal rank sources as before (direct + entity-linked)
    walk_damping: float = Field(0.5, gt=0.0, lt=1.0)
    walk_passage_share: float = Field(0.5, ge=0.0, le=1.0)  # restart mass on directly retrieved passages
    walk_passage_seeds: int = Field(10, ge=0, le=1000)  # best direct passages seeded
    walk_entity_seeds: int = Field(5, ge=0, le=1000)  # entities found by search seeded (plus named ones)
    rrf_k: int = Field(60, ge=1)
    high_level_keywords: list[str] = []  # hybrid: skip the keywords LLM call when given
    low_level_keywords: list[str] = []

    # budgets: LightRAG-style caps (entities, relations; chunks get the rest of the total)
    max_total_tokens: int = Field(30000, ge=1)
    max_entity_tokens: int = Field(6000, ge=0)
    max_relation_tokens: int = Field(8000, ge=0)
    buffer_tokens: int = Field(200, ge=0)
    # model window: the context budget is what the model's window leaves after the output reserve
    model: str | None = None
    model_context_limit: int | None = Field(None, ge=1)
    output_reserve: int = Field(4000, ge=0)
    # local: nano-graphrag-style local context proportions
    local_proportions: LocalProportions = LocalProportions()
    local_sources_take_remainder: bool = True  # sources also get what higher sections left unused
    # "evidence": passages (best first) fill the budget and graph rows get what passages leave, within
    # their caps; "fixed": the fixed shares and priorities of nano-graphrag, causal search and LightRAG (graph
    # rows first)
    budget_split: BudgetSplit = "evidence"

    # global
    level: int = Field(2, ge=0)
    global_max_consider_community: int = Field(512, ge=1)
    global_min_community_rating: float = Field(0.0, ge=0)
    global_group_tokens: int = Field(12000, ge=64)
    global_synthesis_tokens: int | None = Field(None, ge=1)  # None: min(12000, total context budget)
    # which reports the map reads: "all" (the static full scan: nano-graphrag, MS GraphRAG static), "relevance"
    # (reports ranked by BM25 over their text fused with the communities of the question's entity hits, read as
    # question-focused views until the evidence ends or the allowance is spent: no LLM tokens spent on choosing),
    # "dynamic" (MS GraphRAG's top-down LLM rating), "auto": "all" while the full scan is one map call, else
    # "relevance". ``dynamic_community_selection=true`` still means "dynamic".
    global_selection: GlobalSelection = "auto"
    global_selection_share: float = Field(0.07, gt=0, le=1)  # allowance: this share of the full scan's tokens,
    global_selection_min_tokens: int = Field(1600, ge=0)  # but at least this many (two selected map groups)
    global_report_tokens: int = Field(150, ge=16)  # a focused view: title, summary, the findings on the question
    # map groups of the selected scan: at most as many reports as a map answer lists points (a report past them goes
    # unnamed), and the tokens five focused views and the table's head take
    global_selected_group_reports: int = Field(5, ge=1)
    global_selected_group_tokens: int = Field(800, ge=64)
    global_anchor_entities: int = Field(10, ge=0)  # the question's best entity hits anchoring the selection
    # selected map groups that together fit the synthesis budget are answered in one call from the reports
    # themselves (no map phase: one LLM round trip and fewer tokens); False: always map, then reduce
    global_direct_answer: bool = True
    dynamic_community_selection: bool = False
    dynamic_threshold: float = Field(1.0, ge=0)  # rate(report) >= threshold keeps it and opens its children
    dynamic_keep_parent: bool = False
    deadline_s: float = Field(120.0, gt=0)

    # causal search: (k + s) * oversample_scaler extended nodes, their network data within its own cap
    causal_k: int = Field(10, ge=1)
    causal_s: int = Field(3, ge=0)
    oversample_scaler: int = Field(2, ge=1)
    causal_network_tokens: int = Field(8000, ge=0)

    # text units / sources: their order and what happens to the ones that do not fit
    text_order: TextOrder = "relevance"
    source_truncation: SourceTruncation = "relevance"
    min_partial_tokens: int = Field(100, ge=1)  # smart truncation: a partial item is worth keeping from this size
    iterative_refinement: bool = False
    max_iterations: int = Field(2, ge=1, le=10)

    # answer
    min_answer_words: int = Field(150, ge=0)
    max_answer_words: int = Field(1000, ge=1)
    repair_format: bool = True

    @model_validator(mode="after")
    def _answer_bounds(self) -> QueryParam:
        if self.min_answer_words > self.max_answer_words:
            raise ValueError("min_answer_words > max_answer_words")
        return self


class ResolvedParam(QueryParam):
    """A QueryParam after presets: what the engine actually runs with."""

    applied_preset: str = "default"
    preset_source: Literal["default", "tenant", "query"] = "default"
    explicit_fields: list[str] = []


def resolve(param: QueryParam, tenant_preset: str | dict | None = None) -> ResolvedParam:
    """Apply the preset, then the caller's explicit values.

    ``tenant_preset`` is a preset name or a dict of field values configured for the tenant; the
    query's own ``preset`` wins over it when the query set it explicitly.
    """
    explicit = set(param.model_fields_set)
    base: dict = {}
    name, source = "default", "default"
    if "preset" in explicit:
        name, source = param.preset, "query"
        base = dict(PRESETS[name])
    elif isinstance(tenant_preset, str):
        if tenant_preset not in PRESETS:
            raise ValueError(f"unknown preset {tenant_preset!r}")
        name, source = tenant_preset, "tenant"
        base = dict(PRESETS[name])
    elif isinstance(tenant_preset, dict):
        tp = dict(tenant_preset)
        name = tp.pop("preset", "default")
        base = {**PRESETS.get(name, {}), **tp}
        name, source = f"tenant:{name}", "tenant"
    values = param.model_dump()
    values.update({k: v for k, v in base.items() if k not in explicit})
    values["preset"] = param.preset if "preset" in explicit else "default"
    if source == "tenant" and isinstance(tenant_preset, str):
        values["preset"] = tenant_preset
    return ResolvedParam.model_validate(
        {**values, "applied_preset": name, "preset_source": source, "explicit_fields": sorted(explicit)}
    )
