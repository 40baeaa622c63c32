"""Incremental clustering: a batch's new entities join the communities of their clustered neighbours (or communities
of their own), only the communities touched are rewritten and reported, a retried clustering returns the same
waves, and the whole graph is clustered again past ``cluster.incremental_max_growth`` or after a removal. The
store tests run on a real Redis."""

from __future__ import annotations

from shared.config import get_settings
from shared.domain.incremental_clustering import extend_clustering
from shared.domain.merge import merge_entity, merge_relation
from shared.domain.models import Community
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import recluster_due_key
from shared.infra.store.redis_graph import GraphStore, split_rel_field
from shared.pipeline.cluster_stage import degrees_of, run_cluster
from shared.pipeline.recluster import KIND as RECLUSTER
from shared.pipeline.recluster import clustered_current, past_bound
from tests.unit.graph_support import save_mentions


def _c(cid: str, nodes: list[str], edges=(), parent=None, children=()) -> Community:
    return Community(id=cid, level=int(cid[1]), nodes=nodes, edges=list(edges), parent=parent,
                     children=list(children))


def test_new_entities_join_their_strongest_neighbours_communities_or_get_their_own():
    stored = {"L0-0": _c("L0-0", ["A", "B", "C"], [("A", "B")], children=["L1-0"]),
              "L1-0": _c("L1-0", ["A", "B"], [("A", "B")], parent="L0-0"),
              "L0-1": _c("L0-1", ["D", "E"], [("D", "E")])}
    chains = {"A": ["L0-0", "L1-0"], "C": ["L0-0"], "D": ["L0-1"]}
    edges = [("X", "A", 1.0), ("X", "C", 0.5), ("X", "D", 2.0),  # D's community weighs most
             ("Y", "Z", 1.0), ("A", "C", 1.0)]  # Y, Z: no clustered neighbour; A-C: a new edge inside L0-0
    ext = extend_clustering(stored, chains, ["X", "Y", "Z"], [], edges, {0: 2, 1: 1}, max_cluster_size=10)
    assert ext.chains == {"X": ["L0-1"], "Y": ["L0-2"], "Z": ["L0-2"]}
    assert ext.levels == {0: 3, 1: 1}
    assert set(ext.touched) == {"L0-0", "L0-1", "L0-2"}  # L1-0 holds neither end of A-C
    assert ext.touched["L0-1"].nodes == ["D", "E", "X"]
    assert ext.touched["L0-0"].edges == [("A", "B"), ("A", "C")]
    assert ext.touched["L0-2"].nodes == ["Y", "Z"] and ext.touched["L0-2"].edges == [("Y", "Z")]


def test_a_new_entity_takes_every_level_of_its_neighbours_chain():
    stored = {"L0-0": _c("L0-0", ["A", "B"], children=["L1-0"]), "L1-0": _c("L1-0", ["A"], parent="L0-0")}
    ext = extend_clustering(stored, {"A": ["L0-0", "L1-0"]}, ["N"], [], [("A", "N", 1.0)], {0: 1, 1: 1})
    assert ext.chains == {"N": ["L0-0", "L1-0"]}
    assert ext.touched["L1-0"].nodes == ["A", "N"] and ext.touched["L1-0"].edges == [("A", "N")]
    assert ext.touched["L0-0"].edges == [("A", "N")]


def _ingest(store: GraphStore, chunk: str, nodes: list[str], edges: list[tuple[str, str]], times: int = 2) -> None:
    """The entities and relations mentioned in ``times`` chunks (fast extraction's pruning keeps an entity
    mentioned twice), then merged."""
    save_mentions(store, chunk, nodes, edges, times)
    store.merge_batch("entities", store.dirty_members("entities"), merge_entity)
    store.merge_batch("relations", store.dirty_members("relations"),
                      lambda f, frags: merge_relation(*split_rel_field(f), frags))


def _base(store: GraphStore, groups: int = 6, size: int = 8) -> None:
    for g in range(groups):
        nodes = [f"G{g}-{i}" for i in range(size)]
        _ingest(store, f"c{g}", nodes, [(nodes[i], nodes[j]) for i in range(size) for j in range(i + 1, size)
                                        if (i + j) % 3 == 0 or j == i + 1])


def _settings(growth: float = 0.5, quiet_s: float = 30.0):
    s = get_settings()
    cluster = s.cluster.model_copy(update={"incremental_max_growth": growth, "recluster_quiet_s": quiet_s})
    return s.model_copy(update={"cluster": cluster})


def _rows(store: GraphStore) -> dict[str, bytes]:
    return {to_str(k): v for k, v in store.redis.hgetall(store.k.communities()).items()}


def _degrees(store: GraphStore) -> dict[str, int]:
    return {to_str(k): int(v) for k, v in store.redis.hgetall(store.k.degrees()).items()}


def test_a_small_batch_extends_the_communities_and_reports_only_the_ones_it_touched(redis_client, tenant):
    store, settings = GraphStore(redis_client, tenant), _settings()
    _base(store)
    full = run_cluster(store, settings)
    assert sorted(c for wave in full.values() for c in wave) == sorted(_rows(store))
    before, chain = _rows(store), store.entity_communities("G2-3")
    before_leaf = store.communities_by_ids([chain[-1]])[chain[-1]]
    _ingest(store, "c-new", ["NEW", "G2-3"], [("NEW", "G2-3")])
    waves = run_cluster(store, settings)
    assert store.clustered_current()
    assert sorted(c for wave in waves.values() for c in wave) == sorted(chain)  # G2-3 changed, NEW joined it
    assert store.entity_communities("NEW") == chain
    after = _rows(store)
    assert {c for c in after if after[c] != before.get(c)} == set(chain)
    leaf = store.communities_by_ids([chain[-1]])[chain[-1]]
    assert "NEW" in leaf.nodes and ("G2-3", "NEW") in [tuple(e) for e in leaf.edges]
    assert leaf.signature and leaf.signature != before_leaf.signature
    assert _degrees(store) == degrees_of(store.edge_list())  # as a whole-graph recount finds them
    assert store.cluster_dirty() == ([], [])
    current = {c.signature for c in store.communities().values()}
    assert set(to_str(store.redis.get(store.k.community_signatures())).split()) == current
    assert run_cluster(store, settings) == waves  # a retried clustering: same waves, nothing rewritten
    assert _rows(store) == after


def test_a_batch_with_no_clustered_neighbour_gets_communities_after_the_stored_ids(redis_client, tenant):
    store, settings = GraphStore(redis_client, tenant), _settings()
    _base(store)
    run_cluster(store, settings)
    levels = store.community_levels()
    _ingest(store, "c-new", ["P", "Q", "R"], [("P", "Q"), ("Q", "R")])
    _ingest(store, "c-once", ["S", "P"], [("S", "P")], times=1)  # S: one mention, pruned as by a whole clustering
    waves = run_cluster(store, settings)
    new_id = f"L0-{levels[0]}"
    assert [c for wave in waves.values() for c in wave] == [new_id]
    assert store.communities_by_ids([new_id])[new_id].nodes == ["P", "Q", "R"]
    assert not store.entity_communities("S")
    assert store.community_levels()[0] == levels[0] + 1


def test_growth_past_the_bound_or_a_removal_clusters_the_whole_graph_again(redis_client, tenant):
    """Past the bound with nothing deferred (``recluster_quiet_s`` 0), the job clusters the whole graph itself."""
    store = GraphStore(redis_client, tenant)
    _base(store)
    run_cluster(store, _settings())
    everything = sorted(_rows(store))
    _ingest(store, "c-new", ["NEW"], [("NEW", "G0-1")])
    waves = run_cluster(store, _settings(growth=0.001, quiet_s=0))  # 2 changes, more than 0.1% of the graph
    assert len([c for wave in waves.values() for c in wave]) >= len(everything)
    assert store.cluster_meta()["changed"] == "0"
    _ingest(store, "c-more", ["MORE"], [("MORE", "G1-1")])
    run_cluster(store, _settings())
    assert store.cluster_meta()["changed"] == "2"
    store.remove_chunk_fragments("c-more/0")  # MORE's mentions
    store.remove_chunk_fragments("c-more/1")
    store.merge_batch("entities", store.dirty_members("entities"), merge_entity)
    store.merge_batch("relations", store.dirty_members("relations"),
                      lambda f, frags: merge_relation(*split_rel_field(f), frags))
    assert not store.entities(["MORE"])
    run_cluster(store, _settings())
    assert store.cluster_meta()["changed"] == "0"  # the removal took the whole-graph path
    assert not store.entity_communities("MORE")
    assert _degrees(store) == degrees_of(store.edge_list())


def test_past_the_bound_the_job_extends_and_a_recluster_job_clusters_the_whole_graph(redis_client, tenant):
    """Deferred (the default): the job past the bound is clustered incrementally and marks the tenant due; the
    ``recluster`` job's cluster stage clusters the whole graph and takes the mark away; run again, it returns the
    same waves; once within the bound, a recluster job has nothing to do."""
    store, settings = GraphStore(redis_client, tenant), _settings(growth=0.001)
    _base(store)
    everything = sorted(c for wave in run_cluster(store, settings).values() for c in wave)
    chain = store.entity_communities("G0-1")
    _ingest(store, "c-new", ["NEW"], [("NEW", "G0-1")])
    assert not clustered_current(store, RECLUSTER, settings)  # the graph changed
    waves = run_cluster(store, settings)
    assert sorted(c for wave in waves.values() for c in wave) == sorted(chain)  # extended: only NEW's chain
    assert store.entity_communities("NEW") == chain
    assert store.cluster_meta()["changed"] == "2" and past_bound(store.cluster_meta(), settings)
    assert redis_client.zscore(recluster_due_key(), tenant) is not None
    assert clustered_current(store, "ingest", settings)  # an ingestion with nothing new skips its cluster stage
    assert not clustered_current(store, RECLUSTER, settings)  # the recluster job does not
    whole = run_cluster(store, settings, whole_due=True)
    assert len([c for wave in whole.values() for c in wave]) >= len(everything)
    assert store.cluster_meta()["changed"] == "0"
    assert redis_client.zscore(recluster_due_key(), tenant) is None
    assert _degrees(store) == degrees_of(store.edge_list())
    assert run_cluster(store, settings, whole_due=True) == whole  # retried after its save
    assert clustered_current(store, RECLUSTER, settings)  # within the bound: nothing left for a recluster job


def test_a_tenant_still_ingesting_at_the_max_delay_is_clustered_whole_by_its_next_job(redis_client, tenant):
    """No ``recluster`` job runs beside an ingestion of its tenant: once the mark is ``recluster_max_delay_s`` old,
    the next cluster stage of the tenant's own jobs clusters the whole graph and takes the mark away."""
    store, settings = GraphStore(redis_client, tenant), _settings(growth=0.001)
    _base(store)
    run_cluster(store, settings)
    _ingest(store, "c-new", ["NEW"], [("NEW", "G0-1")])
    run_cluster(store, settings)  # past the bound: extended, the tenant marked due
    marked_at = redis_client.zscore(recluster_due_key(), tenant)
    _ingest(store, "c-next", ["NEXT"], [("NEXT", "G1-1")])
    assert run_cluster(store, settings)  # the mark is fresh: extended again
    assert store.cluster_meta()["changed"] != "0"
    assert redis_client.zscore(recluster_due_key(), tenant) == marked_at
    redis_client.zadd(recluster_due_key(), {tenant: marked_at - settings.cluster.recluster_max_delay_s})
    _ingest(store, "c-last", ["LAST"], [("LAST", "G2-1")])
    whole = run_cluster(store, settings)  # overdue: this job clusters the whole graph
    assert store.cluster_meta()["changed"] == "0"
    assert redis_client.zscore(recluster_due_key(), tenant) is None
    assert all(store.entity_communities(n) for n in ("NEW", "NEXT", "LAST"))
    assert len([c for wave in whole.values() for c in wave]) > 1


def test_a_merge_during_a_clustering_leaves_its_marks_for_the_next_one(redis_client, tenant, monkeypatch):
    """G2-3 is merged again after the clustering took the marks and read the rows, before it saved: the save must
    not drop that merge's marks (it would never be clustered, and its communities' signatures would go stale)."""
    store, settings = GraphStore(redis_client, tenant), _settings()
    _base(store)
    run_cluster(store, settings)
    _ingest(store, "c-new", ["NEW", "G2-3"], [("NEW", "G2-3")])
    save = store.update_communities

    def merged_meanwhile(*args, **kwargs):
        _ingest(store, "c-late", ["G2-3", "LATE"], [("G2-3", "LATE")])
        return save(*args, **kwargs)

    monkeypatch.setattr(store, "update_communities", merged_meanwhile)
    run_cluster(store, settings)
    monkeypatch.undo()
    names, fields = store.cluster_dirty()
    assert "G2-3" in names and "LATE" in names and len(fields) == 1
    assert "NEW" not in names  # what the clustering took in and saved is gone
    waves = run_cluster(store, settings)
    assert sorted(c for wave in waves.values() for c in wave) == sorted(store.entity_communities("G2-3"))
    assert store.entity_communities("LATE") == store.entity_communities("G2-3")
    assert store.cluster_dirty() == ([], [])


def test_marks_taken_by_a_clustering_that_did_not_finish_are_taken_by_the_next(redis_client, tenant):
    store, settings = GraphStore(redis_client, tenant), _settings()
    _base(store)
    run_cluster(store, settings)
    _ingest(store, "c-new", ["NEW", "G2-3"], [("NEW", "G2-3")])
    assert store.take_cluster_dirty()[0] == ["G2-3", "NEW"]  # a clustering takes them, then is killed
    _ingest(store, "c-late", ["LATE", "G1-1"], [("LATE", "G1-1")])
    assert store.cluster_dirty()[0] == ["G1-1", "G2-3", "LATE", "NEW"]
    waves = run_cluster(store, settings)
    touched = set(store.entity_communities("G2-3")) | set(store.entity_communities("G1-1"))
    assert {c for wave in waves.values() for c in wave} == touched
    assert store.entity_communities("NEW") and store.entity_communities("LATE")
    assert store.cluster_dirty() == ([], [])
