import sys
import threading
from pathlib import Path

from shared.domain.models import Community, CommunityReport, MapPoint
from shared.domain.prompts import global_direct
from shared.domain.query.context_global import (
    build_map_messages,
    direct_context,
    dynamic_selection,
    plan_global,
    reduce_points,
    static_selection,
)
from shared.domain.query.global_run import collect_map_results, run_global_inline
from shared.domain.query.map_points import parse_map_points
from shared.domain.query.params import QueryParam, resolve
from shared.domain.tokens import count_tokens

sys.path.insert(0, str(Path(__file__).parent))
from test_query_fakes import ScriptedChat, make_graph  # noqa: E402


def _many(n=30, words=120):
    comms, reps = {}, {}
    for i in range(n):
        cid = f"L{i % 3}-{i}"
        comms[cid] = Community(id=cid, level=i % 3, nodes=[f"n{i}"], occurrence=float(n - i))
        reps[cid] = CommunityReport(
            community_id=cid, level=i % 3, title=f"T{i}", summary="lorem " * words, rating=float(i % 10)
        )
    return comms, reps


def test_plan_respects_group_budget_level_and_min_rating():
    comms, reps = _many()
    p = resolve(QueryParam(global_selection="all", query="q", global_group_tokens=600, level=1,
                           global_min_community_rating=3))
    plan = plan_global(comms, reps, p)
    assert len(plan.groups) > 1
    for g in plan.groups:
        assert g.tokens == count_tokens(g.context) <= 600
        assert "id,content,rating,importance" in g.context
    chosen = [reps[c] for c in plan.selected]
    assert all(r.rating >= 3 and comms[r.community_id].level <= 1 for r in chosen)
    occ = [comms[c].occurrence for c in plan.selected]
    assert occ == sorted(occ, reverse=True)
    assert plan.budget.sections[0].candidates == 20


def test_max_consider_and_oversized_report_cut_to_fit():
    comms, reps = _many(5, words=2000)
    p = resolve(QueryParam(global_selection="all", query="q", global_group_tokens=300, global_max_consider_community=2,
                           level=5))
    plan = plan_global(comms, reps, p)
    assert len(plan.selected) == 2 and all(g.tokens <= 300 for g in plan.groups)
    assert static_selection(comms, reps, p)[1] == 5


def test_dynamic_selection_expands_only_relevant_children_and_reports_savings():
    reader, _ = make_graph()
    p = resolve(QueryParam(query="Cratchit family", dynamic_community_selection=True))
    rated = []

    def rate(rep):
        rated.append(rep.community_id)
        return 5.0 if rep.community_id in ("L0-0", "L1-1") else 0.0

    chosen, stats = dynamic_selection(reader.communities(), reader.reports(), p, rate)
    assert [r.community_id for r in chosen] == ["L1-1"]  # parent dropped (keep_parent False)
    assert rated == ["L0-0", "L1-0", "L1-1"] and stats.levels_visited == [0, 1]
    plan = plan_global(reader.communities(), reader.reports(), p, rate)
    assert plan.dynamic.static_map_tokens > plan.dynamic.dynamic_map_tokens
    assert plan.dynamic.tokens_saved == (
        plan.dynamic.static_map_tokens - plan.dynamic.dynamic_map_tokens - plan.dynamic.rating_tokens
    )
    assert any("dynamic selection" in n for n in plan.budget.notes)


def test_parse_map_points_tolerates_broken_json():
    good = '{"points": [{"description": "A [Data: Reports (L1-0, L0-0)]", "score": 80}]}'
    assert parse_map_points(good)[0].community_id == "L1-0,L0-0"
    assert parse_map_points("```json\n" + good + "\n```")[0].score == 80
    assert parse_map_points("Sure! Here:\n" + good + "\nHope it helps")[0].description.startswith("A")
    trailing = '{"points": [{"description": "B", "score": 40,},]}'
    assert parse_map_points(trailing)[0].score == 40
    single = "{'points': [{'description': 'C', 'score': 12}]}"
    assert parse_map_points(single)[0].description == "C"
    cut = '{"points": [{"description": "D one", "score": 70}, {"description": "E tw'
    pts = parse_map_points(cut)
    assert [p.description for p in pts] == ["D one"]
    assert parse_map_points("") == [] and parse_map_points("no json here") == []
    assert parse_map_points('{"points": [{"description": "F", "score": "high"}]}')[0].score == 0
    assert parse_map_points('{"points": "oops"}') == []


def test_reduce_keeps_positive_scores_sorted_within_budget():
    pts = [
        (0, MapPoint(description="low " * 5, score=10)),
        (1, MapPoint(description="zero", score=0)),
        (2, MapPoint(description="high " * 5, score=90)),
    ] + [(3, MapPoint(description="filler " * 100, score=50)) for _ in range(5)]
    text, rep = reduce_points(pts, 300)
    assert count_tokens(text) <= 300
    assert text.startswith("score,description\n90,") and text.index("90,high") < text.index("50,filler")
    assert "zero" not in text and rep.truncated


def test_run_global_inline_partial_when_a_map_task_fails_or_hangs():
    reader, _ = make_graph()
    release = threading.Event()
    calls = {"n": 0}

    def chat(messages, phase):
        if phase == "map":
            calls["n"] += 1
            if "L1-1" in messages[0]["content"] and "L0-0" not in messages[0]["content"]:
                release.wait(5)  # a lost task: never answers within the deadline
                return "late"
            return '{"points": [{"description": "Scrooge matters [Data: Reports (L0-0)]", "score": 70}]}'
        return "Final answer [Data: Reports (L0-0)]"

    # one report per group so groups differ
    p = resolve(QueryParam(global_selection="all", query="Scrooge", global_group_tokens=120, deadline_s=0.5,
                           global_direct_answer=False))
    res = run_global_inline(p, reader, chat)
    release.set()
    assert res.partial and "did not answer" in res.partial_reason
    assert res.answer_kind == "llm" and res.answer.startswith("Final answer")
    assert res.usage["map"].calls >= 1 and res.usage["reduce"].calls == 1


def test_collect_map_results_and_map_messages():
    reader, _ = make_graph()
    plan = plan_global(reader.communities(), reader.reports(), resolve(QueryParam(query="q")))
    msgs = build_map_messages(plan.groups[0], "q")
    assert "-Role- You are analysing a group of community reports" in msgs[0]["content"]
    points, partial, reason = collect_map_results(plan, {0: '{"points": [{"description": "x", "score": 5}]}'})
    assert points and not partial and reason is None
    _, partial, _ = collect_map_results(plan, {})
    assert partial


def test_global_extractive_and_only_context():
    reader, _ = make_graph()
    res = run_global_inline(resolve(QueryParam(query="Cratchit", only_need_context=True)), reader, None)
    assert res.answer_kind == "none" and "-----Reports-----" in res.context
    res2 = run_global_inline(resolve(QueryParam(query="Cratchit")), reader, None)
    assert res2.answer_kind == "extractive" and "L1-1" in res2.answer
    failing = ScriptedChat(fail_phases={"map"})
    res3 = run_global_inline(resolve(QueryParam(query="Cratchit", global_direct_answer=False)), reader, failing)
    assert res3.partial and res3.answer_kind == "none"


def test_only_context_never_exceeds_the_budget_though_the_map_reads_every_group():
    reader, _ = make_graph()
    # groups of <= 120 tokens; a 260-token total budget cannot show all of them in one context
    p = resolve(QueryParam(global_selection="all", query="Scrooge", global_group_tokens=120, max_total_tokens=260,
                           buffer_tokens=0, only_need_context=True))
    plan = plan_global(reader.communities(), reader.reports(), p)
    assert len(plan.groups) >= 3
    res = run_global_inline(p, reader, None)
    assert count_tokens(res.context) <= plan.context_budget <= 260
    shown, total = map(int, res.details["context_groups"].split("/"))
    assert 1 <= shown < total == len(plan.groups)
    assert any("map phase reads all of them" in n for n in res.budget.notes)
    # a budget that holds every group shows every group
    roomy = resolve(QueryParam(global_selection="all", query="Scrooge", global_group_tokens=120,
                               only_need_context=True))
    res = run_global_inline(roomy, reader, None)
    assert res.details["context_groups"].split("/")[0] == res.details["context_groups"].split("/")[1]


def _phases(reader, chat_replies=None, fail=None, **extra):
    """The phases of the LLM calls an inline global query makes (``run_global_inline``), and its result."""
    calls: list[tuple[str, str]] = []

    def chat(messages, phase):
        calls.append((phase, messages[0]["content"]))
        if phase == fail:
            raise RuntimeError("the provider is down")
        if phase == "map":
            return '{"points": [{"description": "Scrooge matters [Data: Reports (L0-0)]", "score": 70}]}'
        return (chat_replies or {}).get(phase, "- Scrooge changes [Data: Reports (L0-0)]")

    param = resolve(QueryParam(**{"global_selection": "all", "query": "Scrooge", "global_group_tokens": 120, **extra}))
    return calls, run_global_inline(param, reader, chat)


def test_selected_groups_that_fit_one_call_are_answered_directly_in_one_round_trip():
    reader, _ = make_graph()
    calls, res = _phases(reader, response_type="bullet_points")
    plan = plan_global(reader.communities(), reader.reports(), resolve(
        QueryParam(global_selection="all", query="Scrooge", global_group_tokens=120)))
    assert len(plan.groups) >= 2  # the same plan would map each group, then reduce
    assert [phase for phase, _ in calls] == ["answer"]  # one call, no map phase, no reduce
    prompt = calls[0][1]
    assert global_direct.MARKER in prompt and "bullet" in prompt.lower()
    assert all(g.context in prompt for g in plan.groups)  # every selected report, as the map would have read it
    assert res.answer_kind == "llm" and res.answer.startswith("- Scrooge") and not res.partial
    assert res.details["answer_path"] == "direct" and res.details["reduce"].startswith("skipped")
    direct = res.budget.section("direct")
    assert direct.kept == len(plan.selected) and 0 < direct.tokens_used <= direct.tokens_allowed
    assert res.usage["answer"].calls == 1 and "map" not in res.usage and "reduce" not in res.usage
    # one group that fits is answered the same way: one call, whatever layout its points could take
    calls, res = _phases(reader, global_group_tokens=12000, response_type="multiple paragraphs")
    assert res.details["groups"] == 1 and [phase for phase, _ in calls] == ["answer"]


def test_map_reduce_when_asked_or_when_the_selection_does_not_fit_one_call():
    reader, _ = make_graph()
    calls, res = _phases(reader, global_direct_answer=False)
    phases = [phase for phase, _ in calls]
    assert phases.count("reduce") == 1 and phases.count("map") == res.details["groups"] >= 2
    assert "answer_path" not in res.details
    # a synthesis budget smaller than the selected reports: the map phase compresses them first
    calls, res = _phases(reader, global_synthesis_tokens=100)
    assert [phase for phase, _ in calls].count("map") == res.details["groups"]
    plan = plan_global(reader.communities(), reader.reports(), resolve(
        QueryParam(global_selection="all", query="Scrooge", global_group_tokens=120, global_synthesis_tokens=100)))
    assert direct_context(plan, resolve(QueryParam(global_synthesis_tokens=100))) is None


def test_a_failed_direct_answer_falls_back_to_the_reports_and_says_why():
    reader, _ = make_graph()
    calls, res = _phases(reader, fail="answer")
    assert [phase for phase, _ in calls] == ["answer"]
    assert res.partial and "direct answer failed: RuntimeError: the provider is down" in res.partial_reason
    assert res.answer_kind in ("extractive", "none") and res.sources.reports
