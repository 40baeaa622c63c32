"""A report stands for its community while the community drifted little from what the report was written from
(``shared.domain.report_reuse``, ``ReportSettings.reuse_max_drift``): across an incremental clustering and across a
whole-graph Leiden that numbers communities afresh, never after a removal, never past the bounds. The store tests
run on a real Redis."""

from __future__ import annotations

import json
import random
import re

import pytest

from shared.config import get_settings
from shared.domain.models import (
    Community,
    CommunityReport,
    Entity,
    EntityFragment,
    ExtractionResult,
    RelationFragment,
)
from shared.domain.report_reuse import closest_former, input_chars, may_stand_for, overlap, sketch, with_basis
from shared.infra.store.redis_extractions import rel_field
from shared.infra.store.redis_graph import GraphStore
from shared.pipeline import cluster_stage
from shared.pipeline.cluster_stage import run_cluster
from shared.pipeline.merge_stage import run_merge_batch
from shared.pipeline.report_stage import run_report_batch
from tests.unit.graph_support import save_mentions


def _c(cid: str, nodes: list[str], edges=()) -> Community:
    return Community(id=cid, level=0, nodes=nodes, edges=list(edges))


def _ents(names, text="x" * 10) -> dict[str, Entity]:
    return {n: Entity(name=n, type="T", description=text) for n in names}


def test_the_sketch_is_exact_for_small_communities_and_close_for_large_ones():
    ten = [f"N{i}" for i in range(10)]
    base = _c("L0-0", ten, [(ten[i], ten[i + 1]) for i in range(9)])  # 19 items
    assert overlap(sketch(base), base) == 1.0
    grown = _c("L0-1", [*ten, "NEW"], [*base.edges, ("N9", "NEW")])
    assert overlap(sketch(base), grown) == 19 / 21
    assert overlap(sketch(base), _c("L0-2", [f"M{i}" for i in range(10)])) == 0.0
    big = [f"B{i}" for i in range(2000)]
    assert abs(overlap(sketch(_c("L1-0", big)), _c("L1-0", big[:1800] + [f"C{i}" for i in range(200)])) - 0.818) < 0.2


def test_a_report_stands_only_within_both_bounds():
    names = [f"N{i}" for i in range(10)]
    base = _c("L0-0", names)
    report = with_basis(CommunityReport(community_id="L0-0", level=0, title="t", summary="s", signature="sig"),
                        base, _ents(names), {})
    assert report.basis_chars == input_chars(base, _ents(names), {}) == 100
    one_more = _c("L0-0", [*names, "NEW"])  # Jaccard 10/11
    assert may_stand_for(report, one_more, _ents(one_more.nodes), {}, 0.1, 0.25)
    assert not may_stand_for(report, one_more, _ents(one_more.nodes), {}, 0.0, 0.25)  # no drift allowed
    two_more = _c("L0-0", [*names, "NEW", "NEWER"])  # Jaccard 10/12
    assert not may_stand_for(report, two_more, _ents(two_more.nodes), {}, 0.1, 10.0)
    assert not may_stand_for(report, base, _ents(names, "x" * 13), {}, 0.1, 0.25)  # descriptions grew 30%
    assert may_stand_for(report, base, _ents(names, "x" * 12), {}, 0.1, 0.25)
    unsigned = report.model_copy(update={"signature": ""})  # a fallback report is never carried over
    assert not may_stand_for(unsigned, base, _ents(names), {}, 0.1, 0.25)


def test_a_new_community_is_matched_to_the_former_one_of_its_level_it_shares_most_members_with():
    former = [_c("L0-0", ["A", "B", "C"]), _c("L0-1", ["D", "E"]), Community(id="L1-0", level=1, nodes=["A", "B"])]
    new = [_c("L0-7", ["A", "D", "E"]), _c("L0-8", ["B", "Z"]), _c("L0-9", ["Z"]),
           Community(id="L1-3", level=1, nodes=["B", "C"])]
    assert closest_former(new, former) == {"L0-7": "L0-1", "L0-8": "L0-0", "L1-3": "L1-0"}


# ------------------------------------------------------------------ through the stages, on a real Redis
def _ingest(store: GraphStore, chunk: str, nodes: list[str], edges, settings, times: int = 2) -> None:
    """``nodes`` and ``edges`` mentioned in ``times`` chunks (the LLM-free pruning keeps what is named twice),
    merged by the merge stage."""
    save_mentions(store, chunk, nodes, edges, times)
    _merge(store, settings)


def _merge(store: GraphStore, settings) -> None:
    run_merge_batch(store, store.dirty_members("entities"), store.dirty_members("relations"), settings, None)


def _groups(store: GraphStore, settings, groups: int = 4, size: int = 9) -> None:
    for g in range(groups):
        nodes = [f"G{g}-{i}" for i in range(size)]
        _ingest(store, f"c{g}", nodes, [(nodes[i], nodes[j]) for i in range(size) for j in range(i + 1, size)],
                settings)


def _settings(growth: float = 0.5, drift: float = 0.1):
    """An LLM configured (its reports come from the fake ``chat`` below; the clustering counts on one)."""
    s = get_settings()
    return s.model_copy(update={"llm_base_url": "http://127.0.0.1:9/v1",
        "cluster": s.cluster.model_copy(update={"incremental_max_growth": growth}),
        "report": s.report.model_copy(update={"reuse_max_drift": drift, "reuse_max_text_growth": 10.0})})


def _cluster_and_report(store: GraphStore, settings) -> list[str]:
    """Cluster, then report wave by wave; returns the communities an LLM report was asked for (by first member)."""
    asked: list[str] = []

    def chat(messages, stage):
        first = re.search(r"\bG\d+-\d+\b", messages[-1]["content"]).group()
        asked.append(first)
        return json.dumps({"title": first, "summary": "s", "rating": 5, "rating_explanation": "r",
                           "findings": [{"summary": "f", "explanation": "e"}]})

    for _wave, ids in sorted(run_cluster(store, settings).items()):
        run_report_batch(store, ids, settings, chat)
    return asked


def _report_of(store: GraphStore, name: str) -> CommunityReport:
    cid = store.entity_communities(name)[-1]
    return store.reports_by_ids([cid])[cid]


def test_an_incremental_clustering_keeps_a_slightly_changed_communitys_report(redis_client, tenant):
    store, settings = GraphStore(redis_client, tenant), _settings()
    _groups(store, settings)
    assert len(_cluster_and_report(store, settings)) == 4
    before = _report_of(store, "G1-0")
    _ingest(store, "c-new", ["NEW", "G1-0"], [("NEW", "G1-0")], settings)  # 45 items + 2: Jaccard 45/47
    assert _cluster_and_report(store, settings) == []
    assert store.entity_communities("NEW") == store.entity_communities("G1-0")
    kept = _report_of(store, "G1-0")
    assert (kept.signature, kept.basis) == (before.signature, before.basis)
    # drift is measured from what the report was written from: a second small change passes the bound
    _ingest(store, "c-also", ["ALSO", "G1-1", "G1-2"], [("ALSO", "G1-1"), ("ALSO", "G1-2"), ("ALSO", "NEW")],
            settings)  # 4 more items: Jaccard 45/51 from the report's basis
    assert _cluster_and_report(store, settings) == ["G1-0"]
    assert _report_of(store, "ALSO").signature != before.signature


def test_with_no_drift_allowed_a_changed_community_is_reported_again(redis_client, tenant):
    store, settings = GraphStore(redis_client, tenant), _settings(drift=0.0)
    _groups(store, settings)
    _cluster_and_report(store, settings)
    _ingest(store, "c-new", ["NEW", "G1-0"], [("NEW", "G1-0")], settings)
    assert _cluster_and_report(store, settings) == ["G1-0"]


def test_a_whole_graph_leiden_hands_each_report_to_the_community_that_carries_it_on(redis_client, tenant):
    store, settings = GraphStore(redis_client, tenant), _settings()
    _groups(store, settings)
    _cluster_and_report(store, settings)
    titles = {f"G{g}-0": _report_of(store, f"G{g}-0").title for g in range(4)}
    _ingest(store, "c-new", ["NEW", "G2-0"], [("NEW", "G2-0")], settings)
    assert _cluster_and_report(store, _settings(growth=0.0)) == []  # whole graph: new ids, no report asked
    assert store.cluster_meta()["changed"] == "0"
    assert {n: _report_of(store, n).title for n in titles} == titles


def test_after_a_removal_no_changed_community_keeps_its_report(redis_client, tenant):
    store, settings = GraphStore(redis_client, tenant), _settings()
    _groups(store, settings)
    _ingest(store, "c-gone", ["GONE", "G3-0"], [("GONE", "G3-0")], settings)
    _cluster_and_report(store, settings)
    assert "GONE" in store.communities_by_ids([store.entity_communities("G3-0")[-1]]).popitem()[1].nodes
    for i in range(2):
        store.remove_chunk_fragments(f"c-gone/{i}")
    _merge(store, settings)
    assert not store.entities(["GONE"]) and store.removals_pending(store.cluster_meta()) > 0
    assert _cluster_and_report(store, settings) == ["G3-0"]  # within the drift, but written again
    assert store.removals_pending(store.cluster_meta()) == 0
    # the removal taken in, the next small change may keep reports again
    _ingest(store, "c-new", ["NEW", "G0-0"], [("NEW", "G0-0")], settings)
    assert _cluster_and_report(store, settings) == []


def _spy_reads(store: GraphStore, monkeypatch) -> tuple[set[str], set[tuple[str, str]]]:
    """The entity names and relation pairs the store is asked for from now on."""
    names: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    entities, relations = store.entities, store.relations

    def read_entities(keys, *a, **kw):
        keys = list(keys)
        names.update(keys)
        return entities(keys, *a, **kw)

    def read_relations(keys, *a, **kw):
        keys = [tuple(sorted(k)) for k in keys]
        pairs.update(keys)
        return relations(keys, *a, **kw)

    monkeypatch.setattr(store, "entities", read_entities)
    monkeypatch.setattr(store, "relations", read_relations)
    return names, pairs


def test_a_community_whose_report_stands_by_its_bounds_is_not_read(redis_client, tenant, monkeypatch):
    store, settings = GraphStore(redis_client, tenant), _settings()
    _groups(store, settings)
    _cluster_and_report(store, settings)
    cid = store.entity_communities("G1-0")[-1]
    held = store.communities_by_ids([cid])[cid]
    assert held.input_chars_max == input_chars(held, store.entities(held.nodes), store.relations(held.edges))
    _ingest(store, "c-new", ["NEW", "G1-0"], [("NEW", "G1-0")], settings)
    names, pairs = _spy_reads(store, monkeypatch)
    assert _cluster_and_report(store, settings) == []
    assert names <= {"NEW", "G1-0"} and pairs <= {("G1-0", "NEW")}  # the 8 other members and 36 links unread
    kept = store.communities_by_ids([cid])[cid]
    assert "NEW" in kept.nodes and kept.signature == _report_of(store, "NEW").signature
    # what NEW and its link added (the merges' counts); G1-0, merged again with the same description, added 0
    assert kept.input_chars_max == held.input_chars_max + len("about NEW") + len("NEW knows G1-0")
    assert store.char_deltas() == ({}, {})  # the counts taken in


def test_the_merges_count_description_changes_and_a_clustering_takes_what_it_read(redis_client, tenant):
    store, settings = GraphStore(redis_client, tenant), _settings()
    _groups(store, settings)
    assert store.char_deltas()[0]["G1-1"] == len("about G1-1")  # a new row: its whole description
    _cluster_and_report(store, settings)
    assert store.char_deltas() == ({}, {}) and not redis_client.exists(store.k.char_delta_taken("entities"))
    _ingest(store, "c-new", ["NEW", "G1-0"], [("NEW", "G1-0")], settings)
    counted = ({"NEW": len("about NEW"), "G1-0": 0}, {rel_field("G1-0", "NEW"): len("NEW knows G1-0")})
    assert store.char_deltas() == counted
    assert store.take_char_deltas() == counted  # a clustering takes them in, and does not finish
    _ingest(store, "c-more", ["NEW", "MORE"], [("NEW", "MORE")], settings)  # merged meanwhile: counted afresh
    assert store.char_deltas() == ({"NEW": 0, "MORE": len("about MORE")},
                                   {rel_field("MORE", "NEW"): len("NEW knows MORE")})
    again = store.take_char_deltas()  # the next clustering takes both
    assert again[0] == {"NEW": len("about NEW"), "G1-0": 0, "MORE": len("about MORE")} and len(again[1]) == 2
    pipe = redis_client.pipeline(transaction=True)
    store._clustered(pipe, store.graph_version(), {0: 1}, None, None, chars_taken=True)
    pipe.execute()
    assert store.take_char_deltas() == ({}, {})


def test_past_the_bound_on_unread_rows_a_community_is_read_and_decided_exactly(redis_client, tenant, monkeypatch):
    """G1-0 merged again adds no text, but with no merge's count of it (a row written before the counts were kept)
    it counts whole: the bound (33 of 630 characters) is past a 4.5 % growth allowance, the exact growth (23) is
    not. The rows are read and the report stands, as it would have without the shortcut."""
    s = _settings()
    settings = s.model_copy(update={"report": s.report.model_copy(update={"reuse_max_text_growth": 0.045})})
    store = GraphStore(redis_client, tenant)
    _groups(store, settings)
    _cluster_and_report(store, settings)
    before = _report_of(store, "G1-0")
    assert before.basis_chars == 9 * len("about G1-0") + 36 * len("G1-0 knows G1-1")
    _ingest(store, "c-new", ["NEW", "G1-0"], [("NEW", "G1-0")], settings)
    redis_client.hdel(store.k.char_delta("entities"), "G1-0")
    names, _pairs = _spy_reads(store, monkeypatch)
    assert _cluster_and_report(store, settings) == []
    assert {f"G1-{i}" for i in range(9)} <= names
    cid = store.entity_communities("NEW")[-1]
    kept = store.communities_by_ids([cid])[cid]
    assert kept.signature == before.signature and kept.input_chars_max == before.basis_chars + 23


def _mention(store: GraphStore, chunk: str, nodes: dict[str, str], edges, settings, times: int = 2) -> None:
    """``nodes`` (name -> description) and ``edges`` named in ``times`` chunks, merged."""
    for i in range(times):
        cid = f"{chunk}/{i}"
        store.save_extraction(ExtractionResult(chunk_id=cid, entities=[
            EntityFragment(name=n, description=text, source_id=cid) for n, text in nodes.items()], relations=[
            RelationFragment(src=a, tgt=b, description=f"{a} and {b} in {chunk}", source_id=cid) for a, b in edges]))
    _merge(store, settings)


@pytest.mark.parametrize("strategy", ["llm", "fast"])
def test_reading_only_what_changed_decides_as_reading_every_row(redis_client, tenant, monkeypatch, strategy):
    """Two tenants take the same random batches (new members, members named again with more text, entities named
    once, which the LLM-free path leaves out until they are named again); one clusters as the stage does, the other
    with every touched community read. The same reports are asked for and the same signatures stored, batch after
    batch."""
    s = _settings()
    settings = s.model_copy(update={"report": s.report.model_copy(update={"reuse_max_text_growth": 0.25}),
                                    "extraction": s.extraction.model_copy(update={"strategy": strategy})})
    stores = [GraphStore(redis_client, tenant), GraphStore(redis_client, tenant + "-all")]
    rng = random.Random(7)
    for store in stores:
        _groups(store, settings, groups=6, size=9)
    asked = [[sorted(_cluster_and_report(store, settings))] for store in stores]
    unread, kept_unread = [], cluster_stage._kept_unread
    monkeypatch.setattr(cluster_stage, "_kept_unread", lambda *a, **kw: unread.append(kept_unread(*a, **kw))
                        or unread[-1])
    for batch in range(8):
        nodes, edges = {}, []
        for k in range(rng.randint(1, 4)):
            g, new = rng.randrange(6), f"G{rng.randrange(6)}-{20 + batch * 4 + k}"
            nodes[new] = "n" * rng.randint(5, 60)
            for old in rng.sample(range(9), rng.randint(1, 2)):
                edges.append((new, f"G{g}-{old}"))
        for _ in range(rng.randint(0, 3)):  # named again, with text of its own
            nodes[f"G{rng.randrange(6)}-{rng.randrange(9)}"] = "m" * rng.randint(1, 80)
        rare = {f"G{rng.randrange(6)}-{90 + rng.randrange(6)}": "r" * rng.randint(5, 40)}  # named once
        rare_edges = [(name, f"G{rng.randrange(6)}-{rng.randrange(9)}") for name in rare]
        for i, store in enumerate(stores):
            _mention(store, f"b{batch}", nodes, edges, settings)
            _mention(store, f"r{batch}", rare, rare_edges, settings, times=1)
            with monkeypatch.context() as patched:
                if i:
                    patched.setattr(cluster_stage, "_kept_unread", lambda *a, **kw: set())
                asked[i].append(sorted(_cluster_and_report(store, settings)))
        assert asked[0] == asked[1]
        assert ({c.id: c.signature for c in stores[0].communities().values()}
                == {c.id: c.signature for c in stores[1].communities().values()})
    assert any(asked[0][1:]) and sum(map(len, unread)) >= 8  # reports asked again, and communities kept unread


def test_a_member_new_to_a_community_counts_whole_though_its_row_is_older(redis_client, tenant):
    """On the LLM-free path an entity named once is left out of the communities; named again (its description
    unchanged: the merge counts 0), it joins one. Its whole description is new to that community's report input,
    here past the 25 % growth allowance, so the report is written again."""
    s = _settings()
    settings = s.model_copy(update={"report": s.report.model_copy(update={"reuse_max_text_growth": 0.25}),
                                    "extraction": s.extraction.model_copy(update={"strategy": "fast"})})
    store = GraphStore(redis_client, tenant)
    _groups(store, settings)
    _cluster_and_report(store, settings)
    rare = {"G1-90": "r" * 400}
    _mention(store, "r1", rare, [("G1-90", "G1-0")], settings, times=1)
    assert _cluster_and_report(store, settings) == [] and not store.entity_communities("G1-90")
    _mention(store, "r2", rare, [("G1-90", "G1-0")], settings, times=1)
    assert store.char_deltas()[0] == {"G1-90": 0}
    assert _cluster_and_report(store, settings) == ["G1-0"]
    assert store.entity_communities("G1-90") == store.entity_communities("G1-0")
