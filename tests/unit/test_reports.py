"""Community report context building, parsing, extractive reports and scheduling."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.domain.models import Community, CommunityReport, Entity, Finding, Relation
from shared.domain.packing import prefix_fit
from shared.domain.prompts.community_report import MARKER
from shared.domain.report_context import (
    HEADERS,
    build_report_context,
    entity_rows,
    relation_rows,
    sorted_entities,
    sorted_relations,
)
from shared.domain.reports import (
    ReportParseError,
    build_report_messages,
    communities_to_regenerate,
    extractive_rating,
    extractive_report,
    own_rows_fit,
    parse_report,
    report_levels_bottom_up,
    report_waves,
)
from shared.domain.tokens import count_tokens


def _graph(n: int = 12, desc_words: int = 30):
    names = [f"ENTITY_{i:02d}" for i in range(n)]
    entities = {
        name: Entity(
            name=name, type="concept", degree=n - i, description=f"{name} is item {i}. " + "detail " * desc_words
        )
        for i, name in enumerate(names)
    }
    edges = [(names[i], names[j]) for i in range(n) for j in range(i + 1, n) if (i + j) % 3 == 0]
    relations = {
        (a, b): Relation(src=a, tgt=b, description=f"{a} relates to {b}, sharing " + "facts " * 10, rank=k, weight=1.0)
        for k, (a, b) in enumerate(edges)
    }
    community = Community(id="L0-0", level=0, nodes=names, edges=edges, children=["L1-0", "L1-1"])
    children = {
        "L1-0": Community(id="L1-0", level=1, nodes=names[: 3 * n // 4], parent="L0-0"),
        "L1-1": Community(id="L1-1", level=1, nodes=names[3 * n // 4 :], parent="L0-0"),
    }
    reports = {
        cid: CommunityReport(community_id=cid, level=1, title=f"Report {cid}", summary="Short summary.", rating=5)
        for cid in children
    }
    return community, entities, relations, children, reports


def test_context_fits_without_truncation_when_budget_is_large():
    community, entities, relations, children, reports = _graph()
    text, info = build_report_context(community, entities, relations, reports, 100_000, sub_communities=children)
    assert text.startswith("-----Entities-----\nid,entity,type,description,degree\n0,ENTITY_00,concept,")
    assert "-----Relationships-----" in text and "-----Reports-----" not in text
    assert info["entities"] == info["entities_total"] == 12
    assert info["relations"] == info["relations_total"] == len(community.edges)
    assert not info["truncated"] and not info["used_sub_reports"]
    assert info["tokens"] == count_tokens(text)
    entity_lines = text.split("\n\n")[0].splitlines()[2:]
    assert [line.split(",")[1] for line in entity_lines] == sorted(entities, key=lambda n: -entities[n].degree)
    rel_lines = text.split("\n\n")[1].splitlines()[2:]
    ranks = [int(line.rsplit(",", 2)[1]) for line in rel_lines]
    assert ranks == sorted(ranks, reverse=True)


def test_sub_reports_substituted_when_raw_data_exceeds_budget():
    community, entities, relations, children, reports = _graph(desc_words=80)
    _, full = build_report_context(community, entities, relations, {}, 100_000)
    budget = full["tokens"] // 2
    text, info = build_report_context(community, entities, relations, reports, budget, sub_communities=children)
    assert info["used_sub_reports"] and info["reports"] >= 1
    assert text.startswith("-----Reports-----")
    assert info["reports"] == 1 and "Report L1-0" in text  # the largest child alone is enough
    assert not info["truncated"]
    assert count_tokens(text) <= budget
    covered = set(children["L1-0"].nodes)
    entity_section = next(s for s in text.split("\n\n") if s.startswith("-----Entities-----"))
    kept_entities = {line.split(",")[1] for line in entity_section.splitlines()[2:]}
    assert kept_entities and not kept_entities & covered  # members covered by the report are not repeated


def test_without_sub_reports_context_is_truncated():
    community, entities, relations, _, _ = _graph(desc_words=80)
    text, info = build_report_context(community, entities, relations, {}, 300)
    assert info["truncated"] and not info["used_sub_reports"]
    assert 0 < count_tokens(text) <= 300
    assert info["entities"] >= 1


def test_tiny_budget_gives_empty_context():
    community, entities, relations, children, reports = _graph()
    text, info = build_report_context(community, entities, relations, reports, 3, sub_communities=children)
    assert text == "" and info["tokens"] == 0 and info["truncated"]


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=120)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    descriptions=st.lists(_text, min_size=1, max_size=15),
    rel_texts=st.lists(_text, max_size=20),
    report_texts=st.lists(_text, max_size=3),
    max_tokens=st.integers(min_value=0, max_value=600),
)
def test_context_never_exceeds_budget(descriptions, rel_texts, report_texts, max_tokens):
    names = [f"N{i}" for i in range(len(descriptions))]
    entities = {
        n: Entity(name=n, description=d, degree=i % 4) for i, (n, d) in enumerate(zip(names, descriptions, strict=True))
    }
    edges = [(names[i % len(names)], names[(i + 1) % len(names)]) for i in range(len(rel_texts))]
    edges = sorted({(a, b) if a < b else (b, a) for a, b in edges if a != b})
    relations = {e: Relation(src=e[0], tgt=e[1], description=t) for e, t in zip(edges, rel_texts, strict=False)}
    child_ids = [f"L1-{i}" for i in range(len(report_texts))]
    community = Community(id="L0-0", level=0, nodes=names, edges=edges, children=child_ids)
    subs = {cid: Community(id=cid, level=1, nodes=names[i::3]) for i, cid in enumerate(child_ids)}
    reports = {
        cid: CommunityReport(community_id=cid, level=1, title=t[:20] or "t", summary=t, full_text=t * 3)
        for cid, t in zip(child_ids, report_texts, strict=True)
    }
    text, info = build_report_context(community, entities, relations, reports, max_tokens, sub_communities=subs)
    assert count_tokens(text) <= max_tokens
    assert info["tokens"] == count_tokens(text)


def test_build_report_messages_uses_template():
    messages = build_report_messages("-----Entities-----\nid,entity\n0,{weird}")
    assert len(messages) == 1 and messages[0]["role"] == "user"
    assert messages[0]["content"].startswith(MARKER)
    assert "0,{weird}" in messages[0]["content"]


_COMMUNITY = Community(id="L1-3", level=1, nodes=["A", "B"])
_GOOD = {
    "title": "Acme and Globex",
    "summary": "Two firms.",
    "rating": 7.5,
    "rating_explanation": "Big.",
    "findings": [{"summary": "Merger", "explanation": "They merged."}, "A bare finding"],
}


def test_parse_good_json():
    report = parse_report(json.dumps(_GOOD), _COMMUNITY, "sig")
    assert (report.community_id, report.level, report.signature, report.generated_by) == ("L1-3", 1, "sig", "llm")
    assert report.rating == 7.5
    assert report.findings == [Finding(summary="Merger", explanation="They merged."), Finding(summary="A bare finding")]
    assert report.full_text == ("# Acme and Globex\n\nTwo firms.\n\n## Merger\n\nThey merged.\n\n## A bare finding")


def test_parse_fenced_json_with_prose_trailing_commas_and_string_rating():
    raw = (
        'Here is the report:\n```json\n{"title": "T {x}", "summary": "S", "rating": "12 out of 10",'
        ' "findings": [{"summary": "f", "explanation": "e",},],}\n```\nThanks!'
    )
    report = parse_report(raw, _COMMUNITY, "s")
    assert report.title == "T {x}" and report.rating == 10.0
    assert report.findings == [Finding(summary="f", explanation="e")]
    assert parse_report('noise {"title": "x", "rating": -3} tail', _COMMUNITY, "s").rating == 0.0


@pytest.mark.parametrize("trailing_comma", [False, True])
def test_parse_strings_with_escaped_quotes_and_brackets(trailing_comma):
    """An escaped quote does not end a string, so brackets after it inside the string are text: read as JSON when
    well formed, and by the outermost object's scan (then trailing commas dropped) when not."""
    raw = 'Report: {"title": "The \\"Ghost\\" [of] {Past}", "summary": "a \\\\ b \\" ]", "findings": ["f"]' + (
        ",}" if trailing_comma else "}") + " (end)"
    report = parse_report(raw, _COMMUNITY, "s")
    assert (report.title, report.summary) == ('The "Ghost" [of] {Past}', 'a \\ b " ]')
    assert report.findings == [Finding(summary="f")]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("no json here", "no JSON object"),
        ('{"title": "x", "summary": ', "unterminated"),
        ('{"title": "x" "summary": "y"}', "invalid JSON"),
        ('{"summary": "no title"}', "title"),
        ("", "no JSON object"),
    ],
)
def test_parse_bad_json_raises_with_reason(raw, reason):
    with pytest.raises(ReportParseError) as err:
        parse_report(raw, _COMMUNITY, "s")
    assert reason in err.value.reason


def test_extractive_report_is_deterministic_and_grounded():
    community, entities, relations, children, reports = _graph()
    first = extractive_report(community, entities, relations, reports, signature="sig")
    second = extractive_report(community, dict(reversed(entities.items())), relations, reports, signature="sig")
    assert first == second
    assert first.generated_by == "extractive" and first.signature == "sig"
    assert first.title == "ENTITY_00, ENTITY_01 and ENTITY_02"
    assert "ENTITY_00 is item 0." in first.summary
    assert "Report L1-0" in first.summary
    top = max(relations.values(), key=lambda r: r.rank)
    assert first.findings[0].summary == f"{top.src} — {top.tgt}"
    assert first.rating == extractive_rating(12, len(community.edges))
    assert first.full_text.startswith(f"# {first.title}\n\n")


def test_extractive_rating_formula():
    assert extractive_rating(1, 0) == pytest.approx(10 * 0.7 * 0.15019, abs=0.01)
    assert extractive_rating(100, 4950) == 10.0
    assert extractive_rating(2, 1) > extractive_rating(3, 1)  # denser wins at similar size


def test_levels_bottom_up_and_regeneration():
    communities = [
        Community(id="L0-0", level=0, nodes=["a"], signature="s0"),
        Community(id="L1-0", level=1, nodes=["a"], signature="s1"),
        Community(id="L1-1", level=1, nodes=["b"], signature="s2"),
        Community(id="L2-0", level=2, nodes=["a"], signature=""),
    ]
    assert report_levels_bottom_up(communities) == [2, 1, 0]
    old = {"L0-0": "s0", "L1-0": "changed", "L2-0": ""}
    assert communities_to_regenerate(communities, old) == ["L2-0", "L1-0", "L1-1"]
    assert communities_to_regenerate(communities, {"L0-0": "s0", "L1-0": "s1", "L1-1": "s2"}) == ["L2-0"]


def test_own_rows_fit_is_exact_enough_to_skip_waiting_for_sub_reports():
    """The wave planner relies on it: a community whose rows fit never uses a sub-report, and one that
    does not fit really substitutes one."""
    for desc_words in (5, 30, 80):
        community, entities, relations, children, reports = _graph(desc_words=desc_words)
        _, full = build_report_context(community, entities, relations, {}, 10**6)
        need = full["tokens"]
        for budget in (need // 2, need, need + 3 * (len(community.nodes) + len(community.edges)) + 8, 4 * need):
            fits = own_rows_fit(community, entities, relations, budget)
            _, info = build_report_context(community, entities, relations, reports, budget, sub_communities=children)
            if fits:
                assert not info["used_sub_reports"] and not info["truncated"], (desc_words, budget)
            if budget < need:
                assert not fits and info["used_sub_reports"]
        assert own_rows_fit(community, entities, relations, 4 * need)


def test_own_rows_fit_answers_as_counting_every_row_would():
    """The floors and ceilings it decides by never change its answer: every row counted, plus the slack."""
    for desc_words in (0, 5, 30, 80):
        community, entities, relations, _, _ = _graph(desc_words=desc_words)
        texts = [HEADERS["entities"], HEADERS["relations"], *entity_rows(sorted_entities(community, entities)),
                 *relation_rows(sorted_relations(community, relations))]
        need = sum(count_tokens(t) for t in texts) + 3 * (len(community.nodes) + len(community.edges)) + 4
        for budget in range(need - 40, need + 40, 3):
            assert own_rows_fit(community, entities, relations, budget) == (budget >= need), (desc_words, budget)


def test_report_waves_wait_only_where_sub_reports_can_be_read():
    def c(cid, children=()):
        return Community(id=cid, level=int(cid[1]), nodes=[cid], children=list(children))

    tree = [c("L0-0", ["L1-0", "L1-1"]), c("L0-1"), c("L1-0", ["L2-0"]), c("L1-1"), c("L2-0"), c("L0-2", ["L1-2"]),
            c("L1-2")]
    # level by level would be 3 sequential steps; by height: leaves of every level first
    assert report_waves(tree) == [["L0-1", "L1-1", "L1-2", "L2-0"], ["L0-2", "L1-0"], ["L0-0"]]
    # a parent whose own rows fit the budget reads no sub-report: it needs not wait
    assert report_waves(tree, independent=lambda com: com.id == "L1-0") == [
        ["L0-1", "L1-0", "L1-1", "L1-2", "L2-0"], ["L0-0", "L0-2"]]
    assert report_waves(tree, independent=lambda com: True) == [sorted(x.id for x in tree)]



def _assemble_counted(sel_rows, sel_counts, headers, budget):
    """The oracle's section filling (reports, then entities with at least half of what is left, then relations)."""
    from shared.domain.report_context import HEADERS

    kept, left = dict.fromkeys(HEADERS, 0), budget
    rel_need = headers["relations"] + sum(sel_counts["relations"]) + len(sel_rows["relations"]) + 2
    for key in ("reports", "entities", "relations"):
        room = left - headers[key] - 2
        if key == "entities":
            room = max(left // 2, left - rel_need) - headers[key] - 2
        if sel_rows[key] and room > 0:
            kept[key] = prefix_fit(sel_counts[key], room)
        if kept[key]:
            left -= headers[key] + sum(sel_counts[key][: kept[key]]) + kept[key] + 2
    return "\n\n".join("\n".join([HEADERS[k], *sel_rows[k][: kept[k]]]) for k in HEADERS if kept[k]), kept


def _every_row_counted(community, entities, relations, sub_reports, max_tokens, sub_communities):
    """The report context as first written, the oracle: every row encoded up front, and every row tested again for
    each child report taken."""
    from shared.domain.report_context import HEADERS, _children, report_row, sorted_entities, sorted_relations

    ents, rels = sorted_entities(community, entities), sorted_relations(community, relations)
    children = _children(community, sub_reports, sub_communities)
    rows = {"reports": [report_row(r.community_id, r.title, r.rating, r.full_text or r.summary) for r, _ in children],
            "entities": [report_row(i, e.name, e.type, e.description, d) for i, (e, d) in enumerate(ents)],
            "relations": [report_row(i, r.src, r.tgt, r.description, r.rank, r.weight) for i, r in enumerate(rels)]}
    headers = {k: count_tokens(v) for k, v in HEADERS.items()}
    counts = {k: [count_tokens(t) for t in rows[k]] for k in HEADERS}

    def cost(sel):
        return sum(headers[k] + sum(c) + len(c) + 2 for k, c in sel.items() if c)

    def select(keep):
        return {k: [rows[k][i] for i in keep[k]] for k in rows}, {k: [counts[k][i] for i in keep[k]] for k in rows}

    owner = {n: rank for rank, (_, nodes) in enumerate(children) for n in nodes}
    keep = {"reports": [], "entities": list(range(len(ents))), "relations": list(range(len(rels)))}
    if cost({"entities": counts["entities"], "relations": counts["relations"]}) > max_tokens:
        for k in range(1, len(children) + 1):
            keep = {"reports": list(range(k)),
                    "entities": [i for i, (e, _) in enumerate(ents) if owner.get(e.name, k) >= k],
                    "relations": [i for i, r in enumerate(rels)
                                  if not (owner.get(r.src, k) < k and owner.get(r.src) == owner.get(r.tgt))]}
            if cost(select(keep)[1]) <= max_tokens:
                break
    sel_rows, sel_counts = select(keep)
    budget = max_tokens
    text, kept = _assemble_counted(sel_rows, sel_counts, headers, budget)
    tokens = count_tokens(text) if text else 0
    while tokens > max_tokens:
        budget -= tokens - max_tokens
        text, kept = _assemble_counted(sel_rows, sel_counts, headers, budget)
        tokens = count_tokens(text) if text else 0
    return text, {**kept, "entities_total": len(ents), "relations_total": len(rels),
                  "truncated": any(kept[k] < len(sel_rows[k]) for k in HEADERS),
                  "used_sub_reports": kept["reports"] > 0, "tokens": tokens}


WORDS = "river city founded album film born played the of and, 1987 école Zürich".split()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_context_counted_as_far_as_needed_is_the_context_of_every_row_counted(data):
    """The report context encodes rows only as far as its decisions need (a community of thousands of members has
    most of its rows cut): the text and the figures are exactly those of encoding every row up front."""
    text_of = st.lists(st.sampled_from(WORDS), min_size=0, max_size=30).map(" ".join)
    n = data.draw(st.integers(0, 30))
    names = [f"E{i}" for i in range(n)]
    entities = {x: Entity(name=x, type="org", description=data.draw(text_of), degree=data.draw(st.integers(0, 9)))
                for x in names if data.draw(st.integers(0, 9)) or x == "E0"}  # some members without a row
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    edges = sorted(set(data.draw(st.lists(st.sampled_from(pairs), max_size=50)))) if pairs else []
    relations = {e: Relation(src=e[0], tgt=e[1], description=data.draw(text_of), weight=1.0, rank=i)
                 for i, e in enumerate(edges) if data.draw(st.integers(0, 9))}
    n_children = data.draw(st.integers(0, 6))
    owners = data.draw(st.lists(st.integers(-1, n_children - 1), min_size=n, max_size=n)) if n_children else [-1] * n
    children, reports = {}, {}
    for k in range(n_children):
        cid = f"L0-{k}"
        children[cid] = Community(id=cid, level=0, nodes=[x for x, o in zip(names, owners, strict=True) if o == k])
        if data.draw(st.integers(0, 5)):  # now and then a child without a report
            summary = " ".join(data.draw(st.lists(st.sampled_from(WORDS), max_size=12)))
            reports[cid] = CommunityReport(community_id=cid, level=0, title=f"T{k}", summary=summary,
                                           rating=float(data.draw(st.integers(0, 9))))
    community = Community(id="L1-0", level=1, nodes=names, edges=edges, children=sorted(children))
    whole = build_report_context(community, entities, relations, {}, 10**6)[1]["tokens"]
    budget = data.draw(st.integers(0, whole + 20))
    assert build_report_context(community, entities, relations, reports, budget, sub_communities=children) == \
        _every_row_counted(community, entities, relations, reports, budget, children)
