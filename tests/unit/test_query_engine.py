import sys
from pathlib import Path

import pytest

from shared.domain.query.engine import answer_query
from shared.domain.query.params import QueryParam
from shared.domain.tokens import count_tokens
from tests.memory_graph import hash_embed

sys.path.insert(0, str(Path(__file__).parent))
from test_query_fakes import ScriptedChat, bm25_provider_for, make_graph  # noqa: E402

MODES = ["local", "naive", "hybrid", "causal", "global"]


def _run(param, chat=None):
    reader, store = make_graph()
    return answer_query(param, reader, store, hash_embed, chat, bm25_provider_for(reader))


@pytest.mark.parametrize("mode", MODES)
def test_extractive_answer_when_chat_is_none(mode):
    res = _run(QueryParam(mode=mode, query="Who is Scrooge's clerk?"))
    assert res.answer_kind == "extractive"
    assert res.answer.startswith("Extractive answer") and "[Data:" in res.answer
    assert res.usage == {} and res.budget.sections


@pytest.mark.parametrize("mode", MODES)
def test_only_need_context_returns_context_and_budget_without_llm_calls(mode):
    chat = ScriptedChat()
    res = _run(
        QueryParam(
            mode=mode,
            query="Scrooge clerk",
            only_need_context=True,
            high_level_keywords=["employment"],
            low_level_keywords=["Scrooge"],
        ),
        chat,
    )
    assert res.answer_kind == "none" and res.answer == "" and res.context
    assert chat.calls == []
    assert res.budget.total_tokens <= res.budget.total_allowed


def test_local_answer_with_usage_quality_and_citations():
    chat = ScriptedChat({"answer": "- Bob Cratchit [Data: Entities (E1)]\n- He is the clerk"})
    res = _run(QueryParam(mode="local", query="Who is Scrooge's clerk?", response_type="bullet_points"), chat)
    assert res.answer_kind == "llm" and res.format_check.ok and not res.format_check.repaired
    assert res.usage["answer"].calls == 1 and res.usage["answer"].prompt_tokens == 100
    assert res.usage["answer"].cost_usd > 0
    assert 0 < res.quality["score"] <= 1
    assert "BOB CRATCHIT" in (res.citations["E1"], res.citations["E2"])  # the walk: the named one and the clerk
    system = chat.calls[0][1][0]["content"]
    assert "-Role- You answer questions about the data in the tables" in system
    assert "bullet points" in system and "-----Entities-----" in system
    assert count_tokens(system) <= res.budget.model_limit - res.budget.output_reserve


def test_format_repair_at_most_once_and_recorded():
    chat = ScriptedChat({"answer": "Plain prose answer.", "repair": "Still prose."})
    res = _run(QueryParam(mode="naive", query="clerk", response_type="bullet_points"), chat)
    assert res.format_check.repaired and not res.format_check.ok and res.format_check.problems
    assert res.usage["repair"].calls == 1
    chat2 = ScriptedChat({"answer": "Plain prose answer.", "repair": "- fixed\n- bullets"})
    res2 = _run(QueryParam(mode="naive", query="clerk", response_type="bullet_points"), chat2)
    assert res2.format_check.ok and res2.answer.startswith("- fixed")


def test_hybrid_uses_llm_keywords_and_causal_is_two_stage():
    chat = ScriptedChat({"keywords": '{"high_level_keywords": ["employment"], "low_level_keywords": ["Cratchit"]}'})
    res = _run(QueryParam(mode="hybrid", query="Who works for Scrooge?"), chat)
    assert res.details["keywords"]["source"] == "llm" and res.usage["keywords"].calls == 1
    assert "BOB CRATCHIT" in res.sources.entities
    chat2 = ScriptedChat({"analysis": "Cause: poverty", "answer": "Summary"})
    res2 = _run(QueryParam(mode="causal", query="Why is Tiny Tim ill?", response_type="Answer briefly"), chat2)
    assert [c[0] for c in chat2.calls] == ["analysis", "answer"]
    assert "-Role- You trace cause and effect" in chat2.calls[0][1][0]["content"]
    assert "Cause: poverty" in chat2.calls[1][1][0]["content"] and res2.answer == "Summary"
    assert res2.details["extended_nodes"]["requested"] == 26


def test_iterative_refinement_stops_when_complete():
    replies = {
        "answer": "Bob Cratchit.\n\nHe is the clerk.",
        "refine": '{"is_complete": false, "missing_info": ["wage"]}',
    }
    chat = ScriptedChat(replies)
    res = _run(QueryParam(mode="naive", query="clerk", iterative_refinement=True, max_iterations=3), chat)
    assert len(res.details["refinement"]) == 3 and res.usage["refine"].calls == 3
    chat.replies["refine"] = '{"is_complete": true, "missing_info": []}'
    res2 = _run(QueryParam(mode="naive", query="clerk", iterative_refinement=True, max_iterations=3), chat)
    assert len(res2.details["refinement"]) == 1


def test_map_reduce_summarizes_omitted_sources_within_budget():
    chat = ScriptedChat({"summarize": "Summary of the omitted excerpts about Scrooge.", "answer": "Para.\n\nPara."})
    res = _run(
        QueryParam(
            mode="naive",
            query="Scrooge",
            source_truncation="map_reduce",
            chunk_top_k=7,
            max_total_tokens=400,
            include_context=True,
            min_partial_tokens=20,
        ),
        chat,
    )
    assert res.sources.omitted_chunks and res.usage["summarize"].calls >= 1
    assert "-----Summaries of omitted sources-----" in res.context
    assert count_tokens(res.context) <= res.budget.total_allowed


def test_presets_apply_through_the_engine():
    res = _run(QueryParam(mode="hybrid", query="Scrooge", preset="low_memory", only_need_context=True))
    assert res.details["preset"] == "low_memory"
    assert res.budget.section("entities").tokens_allowed <= 3000
    assert res.budget.total_allowed <= 8000


def test_map_reduce_helper_summarizes_until_it_fits():
    from shared.domain.query.truncation import map_reduce

    calls = []

    def summarize(q, texts):
        calls.append(len(texts))
        return "short summary"

    texts = ["word " * 200] * 6
    out, n = map_reduce(texts, "q", 50, summarize, group_budget=450)
    assert count_tokens(out) <= 50 and n == len(calls) >= 3
    same, zero = map_reduce(["tiny"], "q", 50, summarize)
    assert same == "tiny" and zero == 0


def counting_embed():
    """(the texts of each embedding call, an embedder that records them)."""
    calls: list[list[str]] = []

    def embed(texts):
        calls.append(list(texts))
        return hash_embed(texts)

    return calls, embed


@pytest.mark.parametrize("mode", ["local", "naive", "hybrid", "causal", "global"])
def test_the_question_is_embedded_only_when_a_search_reads_its_embedding(mode):
    """Over a lexical embedder BM25 has the whole say (its share is 1) wherever the tenant has BM25 indexes: the
    question's embedding (an API round trip, booked tokens) would never be read, so it is not asked for. A
    model embedder's share, an explicit share below 1, or a tenant without BM25 indexes embed as before; the
    contexts are the same either way."""
    reader, store = make_graph()
    calls, embed = counting_embed()

    def ask(lexical: bool, bm25=True, weight=None):
        calls.clear()
        param = QueryParam(mode=mode, query="Who is Scrooge's clerk?", only_need_context=True, bm25_weight=weight)
        res = answer_query(param, reader, store, embed, None, bm25_provider_for(reader) if bm25 else None,
                           lexical_embedder=lexical)
        return res.context, len(calls)

    skipped, none = ask(lexical=True)
    assert none == 0
    assert ask(lexical=True, weight=1.0) == (skipped, 0)
    with_model = ask(lexical=False)
    assert with_model[1] >= 1  # a model embedder gets an equal say: its embedding is read
    assert ask(lexical=True, weight=0.5)[1] >= 1
    assert ask(lexical=True, bm25=False)[1] >= 1  # no BM25 index: the vectors are all there is
    from shared.domain.retrieval.hybrid import hybrid_search

    for kind in ("entities", "chunks"):  # at BM25's share 1 the search gives the same hits with the vector or without
        index = bm25_provider_for(reader)(reader.tenant, kind)
        question = "Who is Scrooge's clerk?"
        with_vector = hybrid_search(question, hash_embed([question])[0], store, reader.tenant, kind, index, 10, 1.0)
        assert with_vector and with_vector == hybrid_search(question, None, store, reader.tenant, kind, index, 10, 1.0)


@pytest.mark.parametrize("mode", ["local", "naive", "hybrid", "causal"])
def test_each_bm25_index_is_looked_up_once_per_query(mode):
    """Deciding whether the embedding is read and the searches themselves share one lookup per kind: a service's
    provider reads the index's version from Redis on every call, and one query sees one snapshot of each."""
    reader, store = make_graph()
    provider = bm25_provider_for(reader)
    asked: list[str] = []

    def counting(tenant, kind):
        asked.append(kind)
        return provider(tenant, kind)

    param = QueryParam(mode=mode, query="Who is Scrooge's clerk?", only_need_context=True)
    res = answer_query(param, reader, store, hash_embed, None, counting, lexical_embedder=True)
    assert res.context and asked  # the searches ran on the indexes
    assert sorted(asked) == sorted(set(asked))


def test_the_entity_search_has_its_own_bm25_share():
    """``entity_bm25_weight`` sets BM25's share in the entity search alone (None: ``bm25_weight``): at 1 the walk's
    entity seeds are found by their words only while passages still fuse both lists; the question is embedded
    whenever either search reads its vector."""
    reader, store = make_graph()
    calls, embed = counting_embed()

    def ask(**fields):
        calls.clear()
        param = QueryParam(mode="local", query="Who is Scrooge's clerk?", only_need_context=True, **fields)
        return answer_query(param, reader, store, embed, None, bm25_provider_for(reader)), len(calls)

    assert ask(bm25_weight=1.0)[1] == 0
    assert ask(bm25_weight=1.0, entity_bm25_weight=0.0)[1] >= 1  # the entity search reads the vector
    assert ask(bm25_weight=0.0, entity_bm25_weight=1.0)[1] >= 1  # the passage search does
    words_only, _ = ask(bm25_weight=1.0)
    same, _ = ask(bm25_weight=1.0, entity_bm25_weight=1.0)
    assert same.context == words_only.context
    vector_entities, _ = ask(bm25_weight=1.0, entity_bm25_weight=0.0)
    assert vector_entities.details["fusion"]["bm25_weight"] == 1.0
