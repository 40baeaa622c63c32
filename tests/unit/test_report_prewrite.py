"""An incremental clustering writes the extractive reports of the communities it touched from the rows it read
(``shared.pipeline.report_prewrite``): the report stage then reads no entity or relation row for them, and the
reports are the ones the report stage would have written."""

from __future__ import annotations

import itertools

import pytest

from shared.infra.store.redis_graph import GraphStore
from shared.pipeline import cluster_stage
from shared.pipeline.cluster_stage import run_cluster
from shared.pipeline.report_stage import run_report_batch
from tests.unit.test_incremental_clustering import _ingest, _settings


def _report_all(store: GraphStore, waves: dict[int, list[str]], settings) -> None:
    for wave in sorted(waves):
        run_report_batch(store, waves[wave], settings, None)


def _batches(store: GraphStore, settings) -> dict[int, list[str]]:
    """A tenant clustered whole and reported, then a batch clustered incrementally: four new entities join a
    community (too many for its report to stand: ``ReportSettings.reuse_max_drift``). Each group of six cliques
    of four, joined by four links, is clustered in two levels (``ClusterSettings.max_cluster_size`` is 10), so a
    parent lists its children's fresh reports."""
    for g in range(2):
        cliques = [[f"G{g}-{s}-{i}" for i in range(4)] for s in range(6)]
        links = [pair for q in cliques for pair in itertools.combinations(q, 2)]
        links += [(f"G{g}-{s}-{i}", f"G{g}-{s + 1}-{i}") for s in range(5) for i in range(4)]
        _ingest(store, f"c{g}", [n for q in cliques for n in q], links)
    _report_all(store, run_cluster(store, settings), settings)
    hub = min(n for n in store.all_degrees() if len(store.entity_communities(n)) == 2)  # in a child community
    new = [f"NEW{i}" for i in range(4)]
    _ingest(store, "c-new", [*new, hub], [(n, hub) for n in new])
    return run_cluster(store, settings)


@pytest.fixture
def settings():
    s = _settings()
    assert not s.llm_enabled  # every report extractive
    return s


def _rows_asked(monkeypatch) -> list[str]:
    """The entity and relation rows ``GraphStore`` is asked for from now on."""
    asked: list[str] = []
    for method in ("entities", "relations"):
        real = getattr(GraphStore, method)
        monkeypatch.setattr(GraphStore, method, lambda self, keys, *a, _real=real, **kw: (
            _real(self, [k for k in keys if not asked.append(str(k))], *a, **kw)))
    return asked


def test_the_report_stage_reads_no_row_for_the_reports_the_clustering_wrote(redis_client, tenant, settings,
                                                                              monkeypatch):
    store = GraphStore(redis_client, tenant)
    waves = _batches(store, settings)
    touched = store.communities_by_ids(c for wave in waves.values() for c in wave)
    assert len(waves) > 1 and any(c.children for c in touched.values())
    assert set(store.cached_reports(c.signature for c in touched.values())) == {
        c.signature for c in touched.values()}  # every touched community's report is in the cache already
    asked = _rows_asked(monkeypatch)
    _report_all(store, waves, settings)
    assert asked == []
    reports = store.reports_by_ids(touched)
    assert {cid: r.signature for cid, r in reports.items()} == {cid: c.signature for cid, c in touched.items()}

    monkeypatch.undo()  # the row readers as they were, and a clustering that writes no report (as before):
    monkeypatch.setattr(cluster_stage, "cache_extractive_reports", lambda *a, **kw: 0)
    other = GraphStore(redis_client, tenant + "-b")
    other_waves = _batches(other, settings)
    asked = _rows_asked(monkeypatch)
    _report_all(other, other_waves, settings)
    assert "NEW0" in asked  # the report stage read the new members' rows again


def test_the_reports_are_those_the_report_stage_would_write(redis_client, tenant, settings, monkeypatch):
    ours = GraphStore(redis_client, tenant)
    waves = _batches(ours, settings)
    _report_all(ours, waves, settings)
    monkeypatch.setattr(cluster_stage, "cache_extractive_reports", lambda *a, **kw: 0)
    theirs = GraphStore(redis_client, tenant + "-b")
    assert _batches(theirs, settings) == waves
    _report_all(theirs, waves, settings)
    assert ours.reports() == theirs.reports() and len(ours.reports()) == len(ours.communities())


def test_a_clustering_run_again_writes_the_same_cache_entries(redis_client, tenant, settings):
    store = GraphStore(redis_client, tenant)
    waves = _batches(store, settings)
    cache = dict(redis_client.hgetall(store.k.report_cache()))
    assert run_cluster(store, settings) == waves and dict(redis_client.hgetall(store.k.report_cache())) == cache

