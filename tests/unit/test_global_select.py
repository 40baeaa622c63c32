"""Global mode's relevance selection (shared/domain/query/global_select.py) and the round trips it saves."""

import sys
from pathlib import Path

from shared.domain.models import Community, CommunityReport, Finding, MapPoint
from shared.domain.query.context_global import plan_global
from shared.domain.query.engine import answer_query
from shared.domain.query.global_run import points_answer, run_global_inline
from shared.domain.query.global_select import anchor_scores, focused_view, rank_reports
from shared.domain.query.params import QueryParam, resolve
from shared.domain.tokens import count_tokens

sys.path.insert(0, str(Path(__file__).parent))
from test_query_fakes import ScriptedChat, make_graph  # noqa: E402

TOPICS = ["whaling ship voyage", "orchard apple harvest", "railway station timetable", "violin concert hall",
          "glacier mountain climbing", "bakery bread oven"]


def _corpus(n: int = 60, filler: int = 150):
    """n communities, each about one topic (cycling through TOPICS), with long filler findings."""
    comms, reps = {}, {}
    for i in range(n):
        cid, topic = f"L0-{i}", TOPICS[i % len(TOPICS)]
        comms[cid] = Community(id=cid, level=0, nodes=[f"E{i}", f"TOPIC {i % len(TOPICS)}"], occurrence=float(n - i))
        findings = [Finding(summary=f"About the {topic}", explanation=f"The {topic} is described here."),
                    Finding(summary="Background", explanation="lorem ipsum " * filler)]
        reps[cid] = CommunityReport(community_id=cid, level=0, title=f"Community {i}", summary=f"A group on {topic}.",
                                    findings=findings)
    return comms, reps


def test_rank_uses_text_and_entity_anchors_and_drops_untouched_reports():
    comms, reps = _corpus(12)
    anchors = anchor_scores(comms, [("TOPIC 2", 1.0)])  # the entity search found the railway topic's entity
    ranked = rank_reports("whaling voyage", list(reps.values()), anchors)
    ids = [r.community_id for r, _ in ranked]
    whaling = {f"L0-{i}" for i in range(12) if i % len(TOPICS) == 0}
    railway = {f"L0-{i}" for i in range(12) if i % len(TOPICS) == 2}  # no word shared with the question
    assert set(ids) == whaling | railway
    assert all(score > 0 for _, score in ranked)
    assert rank_reports("whaling voyage", list(reps.values()), None)[0][0].community_id in whaling


def test_focused_view_keeps_title_summary_and_the_findings_on_the_question():
    comms, reps = _corpus(1, filler=400)
    rep = reps["L0-0"]
    view = focused_view(rep, "Tell me about the whaling ship", 120)
    assert count_tokens(view.full_text) <= 120
    assert "Community 0" in view.full_text and "whaling ship voyage is described" in view.full_text
    assert "lorem" not in view.full_text
    short = CommunityReport(community_id="x", level=0, title="T", summary="tiny")
    assert focused_view(short, "anything", 120) is short  # a report within the cap is read whole


def test_focused_view_says_each_sentence_once_and_a_long_reports_summary_only_where_it_bears_on_the_question():
    desc = "The Pequod sailed from Nantucket in 1840."
    single = CommunityReport(community_id="s", level=0, title="PEQUOD",
                             summary=f"Community of 1 entities and 0 relationships. PEQUOD: {desc}",
                             findings=[Finding(summary="PEQUOD", explanation=desc)])
    view = focused_view(single, "When did the Pequod sail?", 150)
    assert view.full_text.count("Nantucket") == 1 and count_tokens(view.full_text) < count_tokens(
        "\n".join([f"# {single.title}", single.summary, f"- PEQUOD: {desc}"]))
    shared = "Ahab commands the whaling ship and hunts the white whale across the oceans of the world."
    long = CommunityReport(
        community_id="l", level=0, title="AHAB and PEQUOD community",
        summary="The community centres on AHAB, PEQUOD. The crew sings shanties on deck every evening.",
        findings=[Finding(summary="AHAB", explanation=shared), Finding(summary="PEQUOD", explanation=shared),
                  Finding(summary="CREW", explanation="lorem ipsum " * 200)])
    view = focused_view(long, "Who commands the whaling ship?", 150)
    assert "Ahab commands" in view.full_text and view.full_text.count("Ahab commands") == 1
    assert "shanties" not in view.full_text and "lorem" not in view.full_text  # no word of the question
    assert view.full_text.startswith("# AHAB and PEQUOD community")


def test_selected_groups_hold_a_handful_of_ranked_views_without_the_importance_columns():
    comms, reps = _corpus(60, filler=5)
    p = resolve(QueryParam(query="orchard apple harvest", global_group_tokens=400, global_selection_min_tokens=0,
                           global_selection_share=0.5, global_selected_group_reports=3))
    plan = plan_global(comms, reps, p)
    assert plan.selection.strategy == "relevance" and plan.selection.read == 10
    assert [len(g.report_ids) for g in plan.groups] == [3, 3, 3, 1]
    assert all("id,content\n" in g.context and "rating" not in g.context for g in plan.groups)
    full = plan_global(comms, reps, resolve(QueryParam(query="orchard", global_selection="all",
                                                       global_group_tokens=400)))
    assert "id,content,rating,importance" in full.groups[0].context and len(full.groups[0].report_ids) > 3


def test_auto_reads_everything_when_the_full_scan_is_one_call_else_selects_within_the_allowance():
    reader, _ = make_graph()
    small = plan_global(reader.communities(), reader.reports(), resolve(QueryParam(query="Cratchit")))
    assert small.selection.strategy == "all" and len(small.groups) == 1
    comms, reps = _corpus()
    p = resolve(QueryParam(query="orchard apple harvest", global_group_tokens=4000, global_selection_min_tokens=0,
                           global_selection_share=0.2))
    plan = plan_global(comms, reps, p)
    sel = plan.selection
    assert sel.strategy == "relevance" and sel.relevant == 10 and sel.read == 10
    assert sel.selected_tokens <= sel.allowance == int(0.2 * sel.full_scan_tokens)
    assert sum(g.tokens for g in plan.groups) < sel.full_scan_tokens / 5
    assert all(g.tokens <= p.global_selected_group_tokens for g in plan.groups)
    assert {c for g in plan.groups for c in g.report_ids} == {f"L0-{i}" for i in range(60) if i % 6 == 1}
    assert any("relevance selection" in n for n in plan.budget.notes)
    full = plan_global(comms, reps, resolve(QueryParam(query="orchard", global_selection="all",
                                                       global_group_tokens=4000)))
    assert len(full.selected) == 60 and full.selection.strategy == "all"


def test_allowance_cuts_the_least_relevant_and_a_question_touching_nothing_reads_the_most_important():
    comms, reps = _corpus()
    p = resolve(QueryParam(query="orchard apple harvest", global_group_tokens=4000, global_selection_min_tokens=0,
                           global_selection_share=0.01))
    plan = plan_global(comms, reps, p)
    assert 0 < plan.selection.read < plan.selection.relevant
    assert plan.selection.selected_tokens <= plan.selection.allowance
    nothing = plan_global(comms, reps, resolve(QueryParam(query="quantum chromodynamics", global_group_tokens=4000,
                                                          global_selection_min_tokens=0, global_selection_share=0.05)))
    assert nothing.selection.relevant == 0 and nothing.selected[0] == "L0-0"  # highest occurrence first


def test_only_context_returns_the_groups_selected_for_the_question():
    comms, reps = _corpus()

    class Reader:
        tenant = "t"

        def community_rows(self):
            return comms, reps

    def context(q):
        p = resolve(QueryParam(query=q, only_need_context=True, global_group_tokens=4000))
        return run_global_inline(p, Reader(), None).context

    bakery, violin = context("bakery bread oven"), context("violin concert")
    assert "bakery bread oven" in bakery and "violin" not in bakery
    assert "violin concert hall" in violin and "bakery" not in violin


def test_one_group_answering_needs_no_reduce_and_its_points_follow_the_layout():
    pts = [(0, MapPoint(description="First [Data: Reports (L0-1)]", score=80)),
           (0, MapPoint(description="Second [Data: Reports (L0-2)]", score=40))]
    assert points_answer(pts, "bullet_points") == "- First [Data: Reports (L0-1)]\n- Second [Data: Reports (L0-2)]"
    assert points_answer(pts, "multiple_paragraphs").count("\n\n") == 1
    assert points_answer(pts + [(1, MapPoint(description="Other", score=10))], "bullet_points") is None
    assert points_answer(pts, "pros_cons") is None  # a layout only the reduce can write
    reader, store = make_graph()
    map_reply = ('{"points": [{"description": "Cratchit is poor [Data: Reports (L1-1)]", "score": 70}, '
                 '{"description": "Tiny Tim is ill [Data: Reports (L1-1)]", "score": 50}]}')
    chat = ScriptedChat({"map": map_reply, "reduce": "reduced"})
    res = answer_query(QueryParam(query="Cratchit family", mode="global", response_type="bullet_points",
                                  global_direct_answer=False), reader, store, chat=chat)
    assert [phase for phase, _ in chat.calls] == ["map"]
    assert res.answer.startswith("- Cratchit is poor") and res.details["reduce"].startswith("skipped")
    assert res.details["points"] == [["L1-1", 70.0], ["L1-1", 50.0]]
