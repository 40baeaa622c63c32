"""A report batch against a real Redis: its LLM reports are asked side by side, one failing call falls back to an
extractive report with its error, a cancellation stops the batch, and the planner's batch sizes."""

from __future__ import annotations

import json
import threading

import pytest

from shared.config import get_settings
from shared.domain.merge import merge_entity, merge_relation
from shared.domain.models import Community, EntityFragment, ExtractionResult, RelationFragment
from shared.infra.llm.client import CanceledError
from shared.infra.store.redis_graph import GraphStore, split_rel_field
from shared.pipeline.report_stage import plan_report_batches, run_report_batch


def _community(i: int, members: int) -> Community:
    nodes = [f"E{i}-{j}" for j in range(members)]
    edges = [(nodes[j], nodes[j + 1]) for j in range(members - 1)]
    return Community(id=f"L0-{i:02d}", level=0, nodes=nodes, edges=edges, signature=f"sig{i}")


def _graph(store: GraphStore, sizes: list[int]) -> list[Community]:
    """Communities of ``sizes`` members each (a chain of relations), their entities and relations merged."""
    communities = [_community(i, n) for i, n in enumerate(sizes)]
    store.save_extraction(ExtractionResult(
        chunk_id="c1",
        entities=[EntityFragment(name=n, description=f"about {n}", source_id="c1") for c in communities
                  for n in c.nodes],
        relations=[RelationFragment(src=a, tgt=b, description=f"{a} knows {b}", source_id="c1") for c in communities
                   for a, b in c.edges]))
    store.merge_batch("entities", store.dirty_members("entities"), merge_entity)
    store.merge_batch("relations", store.dirty_members("relations"),
                      lambda f, frags: merge_relation(*split_rel_field(f), frags))
    store.replace_communities(communities, {0: len(communities)}, store.graph_version())
    return communities


def _answer(title: str) -> str:
    return json.dumps({"title": title, "summary": "s", "rating": 5, "rating_explanation": "r",
                       "findings": [{"summary": "f", "explanation": "e"}]})


def _title_of(messages: list[dict]) -> str:
    """Which community the report prompt is for ("E3" for ``L0-03``), from the first entity name it holds."""
    text = messages[-1]["content"]
    return next(w for w in text.replace(",", " ").split() if w.startswith("E") and "-" in w).split("-")[0]


def test_a_batch_asks_its_llm_reports_side_by_side(redis_client, tenant):
    store, settings = GraphStore(redis_client, tenant), get_settings()
    communities = _graph(store, [3] * 10)
    batches = plan_report_batches(store, [c.id for c in communities], settings, llm=True)
    assert [len(b) for b in batches] == [8, 2]  # report.communities_per_task
    met = threading.Barrier(8, timeout=20)  # every call of the batch waits for the other seven

    def chat(messages, stage):
        assert stage == "report"
        met.wait()
        return _answer(_title_of(messages))

    out = run_report_batch(store, batches[0], settings, chat)
    assert out == {"generated": 8, "reused": 0, "failed": 0, "errors": {}}
    reports = store.reports_by_ids(batches[0])
    assert {cid: r.title for cid, r in reports.items()} == {c.id: f"E{i}" for i, c in enumerate(communities[:8])}
    assert all(r.generated_by == "llm" and r.signature == f"sig{int(cid[3:])}" for cid, r in reports.items())
    # asked again with unchanged signatures: nothing is asked, everything is reused
    assert run_report_batch(store, batches[0], settings, None)["reused"] == 8


def test_one_failing_call_leaves_an_extractive_report_with_its_error_and_the_others_are_generated(
        redis_client, tenant):
    store, settings = GraphStore(redis_client, tenant), get_settings()
    communities = _graph(store, [3, 4, 3, 2])  # the last is too small for an LLM report

    def chat(messages, _stage):
        if _title_of(messages) == "E1":
            raise RuntimeError("upstream 500")
        return _answer(_title_of(messages))

    out = run_report_batch(store, [c.id for c in communities], settings, chat)
    assert out["generated"] == 3 and out["failed"] == 1 and out["reused"] == 0
    assert out["errors"] == {"L0-01": "RuntimeError: upstream 500"}
    reports = store.reports_by_ids([c.id for c in communities])
    assert reports["L0-01"].signature == "" and reports["L0-01"].generated_by != "llm"  # not cached as the real one
    assert reports["L0-00"].generated_by == reports["L0-02"].generated_by == "llm"
    assert reports["L0-03"].generated_by != "llm" and reports["L0-03"].signature == "sig3"


def test_a_canceled_job_stops_the_batch_and_saves_nothing(redis_client, tenant):
    store, settings = GraphStore(redis_client, tenant), get_settings()
    communities = _graph(store, [3, 3, 3])

    def chat(messages, _stage):
        if _title_of(messages) == "E2":
            raise CanceledError("job canceled")
        return _answer(_title_of(messages))

    with pytest.raises(CanceledError):
        run_report_batch(store, [c.id for c in communities], settings, chat)
    assert store.reports_by_ids([c.id for c in communities]) == {}


def test_small_communities_and_no_llm_go_to_extractive_batches(redis_client, tenant):
    store, settings = GraphStore(redis_client, tenant), get_settings()
    communities = _graph(store, [3] * 9 + [2] * 3)
    ids = [c.id for c in communities]
    assert plan_report_batches(store, ids, settings, llm=True) == [ids[:8], ids[8:9], ids[9:]]
    assert plan_report_batches(store, ids, settings, llm=False) == [ids]  # report.extractive_per_task


def test_reports_in_the_cache_are_referred_to_and_nothing_else_is_read(redis_client, tenant, monkeypatch):
    """The clustering leaves the extractive reports of the communities it read in the report cache: the batch then
    refers each community to its report by signature, reading no sub-community, report, entity or relation, and
    rewriting no cache entry. A reference whose cache entry is gone counts as no report: it is made again."""
    store, settings = GraphStore(redis_client, tenant), get_settings()
    communities = _graph(store, [3, 2, 4])
    ids = [c.id for c in communities]
    run_report_batch(store, ids, settings, None)  # extractive: into the cache, referred to
    made = store.reports_by_ids(ids)
    redis_client.delete(store.k.reports())  # as a clustering that read the rows leaves them: cached, not referred
    store.cache_reports([made["L0-00"].model_copy(update={"title": "as cached"})])  # shows a cache entry rewritten
    for name in ("reports_by_ids", "cached_reports", "entities", "relations", "cache_reports"):
        monkeypatch.setattr(store, name, lambda items, *a, _n=name, **k: pytest.fail(f"{_n}") if list(items) else {})
    assert run_report_batch(store, ids, settings, None) == {"generated": 0, "reused": 3, "failed": 0, "errors": {}}
    monkeypatch.undo()
    referred = store.reports_by_ids(ids)
    assert referred["L0-00"].title == "as cached" and referred["L0-01"] == made["L0-01"]
    assert referred["L0-02"] == made["L0-02"]
    redis_client.hdel(store.k.report_cache(), "sig1")  # L0-01's reference dangles now
    assert store.report_signatures(ids) == {"L0-00": "sig0", "L0-02": "sig2"}
    assert run_report_batch(store, ids, settings, None)["generated"] == 1
    assert store.reports_by_ids(ids)["L0-01"] == made["L0-01"]
