from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.domain.query.budget import (
    PRIORITY,
    Section,
    allocate,
    model_context_limit,
    section_caps,
    total_context_budget,
)
from shared.domain.query.params import QueryParam, resolve
from shared.domain.tokens import count_tokens

WORDS = ["alpha", "beta", "Γάμμα", "数据", "naïve", "x", "🙂", "graph,rag", '"quoted"', "\n", "  "]
row = st.lists(st.sampled_from(WORDS), min_size=1, max_size=60).map(" ".join)
rows = st.lists(row, min_size=0, max_size=12)
cap = st.one_of(st.none(), st.integers(min_value=0, max_value=800))
PROP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _sections(data):
    return [Section(name, r, header="id,content", cap=c) for name, (r, c) in zip(PRIORITY, data, strict=True)]


@PROP
@given(
    st.lists(st.tuples(rows, cap), min_size=4, max_size=4),
    st.integers(min_value=0, max_value=2500),
    st.sampled_from(["gpt-4o-mini", "gpt-4", None]),
)
def test_allocation_never_exceeds_section_or_total_budget(data, total, model):
    secs = _sections(data)
    out = allocate(secs, total, model)
    assert count_tokens(out.context, model) <= total
    for sec, rep in zip(secs, out.reports, strict=True):
        text = out.texts[sec.name]
        assert count_tokens(text, model) == rep.tokens_used <= rep.tokens_allowed
        if sec.cap is not None:
            assert rep.tokens_used <= sec.cap
        assert rep.kept == len(out.kept_rows[sec.name]) <= rep.candidates
        assert rep.truncated == (rep.kept < rep.candidates)


@PROP
@given(st.lists(st.tuples(rows, cap), min_size=4, max_size=4), st.integers(min_value=0, max_value=2500))
def test_priority_a_higher_section_is_never_cut_while_a_lower_one_keeps_items(data, total):
    out = allocate(_sections(data), total)
    for i, rep in enumerate(out.reports):
        if rep.cut_by == "total":
            assert all(lower.kept == 0 for lower in out.reports[i + 1 :])


def test_overflow_order_entities_then_relationships_then_reports_then_sources():
    big = ["word " * 100] * 10
    secs = [Section(n, big, header="id,content") for n in PRIORITY]
    out = allocate(secs, 900, "gpt-4o-mini", render_order=["reports", "entities", "relationships", "sources"])
    kept = {r.name: r.kept for r in out.reports}
    assert kept["entities"] > 0 and kept["relationships"] == 0 and kept["sources"] == 0
    assert out.reports[0].cut_by == "total"
    assert out.context.startswith("-----Entities-----")


def test_cut_by_own_cap_does_not_starve_lower_sections():
    secs = [Section("entities", ["e " * 50] * 10, cap=200), Section("sources", ["s " * 20] * 3, cap=None)]
    out = allocate(secs, 5000)
    assert out.reports[0].cut_by == "section" and out.reports[1].kept == 3


def test_model_limits_table_and_overrides():
    assert model_context_limit("gpt-4") == 8192
    assert model_context_limit("gpt-4o-2024-08-06") == 128000
    assert model_context_limit("gpt-3.5-turbo") == 16385
    assert model_context_limit("claude-3-opus") == 200000
    assert model_context_limit("gemini-pro") == 1048576
    assert model_context_limit("gpt-4.1-mini") >= 1_000_000
    assert model_context_limit("gpt-4o", override=5000) == 5000
    assert model_context_limit("my-local-llm", table={"my-local": 32000}) == 32000


def test_total_budget_is_min_of_window_and_max_total_minus_prompt_and_query():
    p = resolve(QueryParam(query="What is up?", model="gpt-4"))  # 8192 - 4000 < 30000
    tb = total_context_budget(p, "system prompt here")
    assert tb.total == 8192 - 4000 - count_tokens("system prompt here") - count_tokens("What is up?") - 200
    p2 = resolve(QueryParam(query="q", model="gpt-4o", max_total_tokens=15000))
    tb2 = total_context_budget(p2, "")
    assert tb2.total == 15000 - 1 - 200 and tb2.model_limit == 128000


def test_section_caps_per_mode():
    p = resolve(QueryParam(local_sources_take_remainder=False))
    local = section_caps(p, "local", 10000)
    assert local == {"entities": 2000, "relationships": 2500, "reports": 2500, "sources": 3000}
    hyb = section_caps(resolve(QueryParam(preset="balanced")), "hybrid", 15000)
    assert hyb == {"entities": 4000, "relationships": 5000, "sources": None}
    causal = section_caps(resolve(QueryParam(budget_split="fixed")), "causal", 30000)
    assert causal == {"entities": 3200, "relationships": 3200, "sources": 1600}  # causal search's 40/40/20
    evidence = section_caps(resolve(QueryParam()), "causal", 30000)  # text units may take the network cap
    assert evidence == {"entities": 3200, "relationships": 3200, "sources": 8000}
    assert section_caps(p, "naive", 100) == {"sources": None}


def test_report_strings():
    out = allocate([Section("entities", ["a b c"] * 84, cap=60)], 1000)
    s = out.reports[0].summary()
    assert s.startswith("84 entities found, ") and "kept" in s


def test_hybrid_graph_caps_leave_chunks_their_remainder_under_a_small_budget():
    from shared.domain.query.budget import HYBRID_GRAPH_SHARE, graph_caps

    # at LightRAG's defaults the seed's caps are kept as they are
    assert graph_caps(resolve(QueryParam(mode="hybrid")), 29_000) == (6000, 8000)
    # a 4,000-token budget: the default caps shrink to half of it, in their 6:8 ratio
    ent, rel = graph_caps(resolve(QueryParam(mode="hybrid", max_total_tokens=4000)), 3700)
    assert ent + rel <= 3700 * HYBRID_GRAPH_SHARE and abs(ent / rel - 6 / 8) < 0.01
    caps = section_caps(resolve(QueryParam(mode="hybrid", max_total_tokens=4000)), "hybrid", 3700)
    assert caps["sources"] is None and caps["entities"] == ent
    # values the caller (or a preset) set are obeyed as given
    assert graph_caps(resolve(QueryParam(mode="hybrid", max_total_tokens=4000, max_entity_tokens=3000)),
                      3700) == (3000, 8000)
    assert graph_caps(resolve(QueryParam(mode="hybrid", preset="low_memory")), 3700) == (3000, 3000)
