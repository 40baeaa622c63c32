"""Cluster the tenant's graph into hierarchical Leiden communities: the whole graph, or, when the job changed
little of it since the last whole-graph Leiden (``ClusterSettings.incremental_max_growth``), only what the job
added (``shared.domain.incremental_clustering``), reading and writing the communities it touches and no more; the
extractive reports of those come from the rows it read (``report_prewrite``). A touched community whose report
stands by the drift bounds on what is known without its rows (``_kept_unread``) is not read at all, so a batch
that names again a few members of a large community pays for those members, not for the community.
Past that bound the job is still clustered incrementally when the whole-graph clustering is left to a
``recluster`` job (``shared.pipeline.recluster``), which this stage then runs with ``whole_due``, or to the first
job of the tenant clustered once the mark is ``cluster.recluster_max_delay_s`` old (``overdue``).

Retry-safe: the communities, the node index, the bookkeeping and the removal of the dirty marks they took in are
written in one transaction, with the report waves; a clustering task run again on the graph it already clustered
returns those waves."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter

from shared.domain.clustering import attach_chunk_ids, community_signature, find_relation, hierarchical_leiden
from shared.domain.incremental_clustering import extend_clustering
from shared.domain.models import Community, CommunityReport, Entity
from shared.domain.report_reuse import closest_former, inherit_reports, input_chars, stands_unread
from shared.domain.reports import own_rows_fit, report_waves
from shared.infra.store.redis_extractions import rel_field, split_rel_field
from shared.infra.store.redis_graph import GraphStore
from shared.pipeline.recluster import clear_due, deferring, mark_due, overdue, past_bound
from shared.pipeline.report_prewrite import cache_extractive_reports

log = logging.getLogger(__name__)

def degrees_of(edges: list[tuple[str, str, float]]) -> dict[str, int]:
    deg: Counter[str] = Counter()
    for a, b, _w in edges:
        deg[a] += 1
        deg[b] += 1
    return dict(deg)


def run_cluster(store: GraphStore, settings, whole_due: bool = False) -> dict[int, list[str]]:
    """Recluster and save; return the report waves: wave -> community ids (``shared.domain.reports.report_waves``,
    wave 0 first: communities without children; a community's wave follows all its children's). An incremental
    clustering's waves hold only the communities it touched. ``whole_due`` (a ``recluster`` job), or a tenant marked
    due ``recluster_max_delay_s`` ago (``overdue``: it kept ingesting): the whole graph when it is still past the
    bound, else as any job."""
    version = store.graph_version()
    meta = store.cluster_meta()
    whole = (whole_due or overdue(store.redis, store.tenant, settings)) and past_bound(meta, settings)
    if meta.get("graph_version") == str(version) and "waves" in meta and not whole:  # run again after its save
        return {int(w): ids for w, ids in json.loads(meta["waves"])}
    taken = store.take_cluster_dirty()
    started = time.perf_counter()
    extend = not whole and _may_extend(meta, taken, settings)
    waves = _extend(store, settings, version, meta, taken) if extend else None
    how = "extended"
    if waves is None:
        waves, how = _recluster(store, settings, version, taken, store.removals_pending(meta)), "reclustered whole"
        clear_due(store.redis, store.tenant)
    elif past_bound(meta, settings, len(taken[0]) + len(taken[1])):  # the changed count _extend just saved
        mark_due(store.redis, store.tenant)  # deferring: a recluster job follows (shared.pipeline.recluster)
        how = "extended past the bound (whole-graph clustering due)"
    log.info("%s: %d entities and %d relations changed, %d communities to report, %.2f s", how, len(taken[0]),
             len(taken[1]), sum(map(len, waves.values())), time.perf_counter() - started)
    return waves


def _may_extend(meta: dict[str, str], taken: tuple[list[str], list[str]], settings) -> bool:
    """Within the bound; past it too when a ``recluster`` job clusters the whole graph later (``deferring``)."""
    if settings.cluster.incremental_max_growth <= 0 or "full_size" not in meta or not (taken[0] or taken[1]):
        return False
    return deferring(settings) or not past_bound(meta, settings, len(taken[0]) + len(taken[1]))


def _independent(settings, entities, relations):
    cfg = settings.report

    def independent(community) -> bool:  # an LLM report whose own rows fit: reads no sub-report
        return (settings.llm_enabled and len(community.nodes) >= cfg.min_llm_members
                and own_rows_fit(community, entities, relations, cfg.max_input_tokens, settings.llm_model))

    return independent


def _waves_meta(waves: list[list[str]]) -> str:
    return json.dumps([[w, ids] for w, ids in enumerate(waves)])


def _recluster(store: GraphStore, settings, version: int, taken, removals: int) -> dict[int, list[str]]:
    """Leiden over the whole graph; only the degrees that changed are written. With no removal pending, a new
    community may keep the report of the former community it shares most members with (``_inherit``)."""
    deltas = store.degree_deltas()  # before the edges: the ones they count
    store.take_char_deltas(read=False)  # before the rows: every count it takes is in what is read below
    stored_degrees = store.all_degrees()
    entities = store.all_entities(stored_degrees)
    edges = [e for e in store.edge_list() if e[0] in entities and e[1] in entities]
    degrees = degrees_of(edges)
    store.update_degrees({n: d for n, d in degrees.items() if stored_degrees.get(n) != d},
                         [n for n in stored_degrees if n not in degrees], deltas)
    nodes = list(entities)
    relations = store.all_relations()  # read once: pruning (fast path) and the signatures both use it
    if settings.extraction_strategy == "fast":
        from shared.domain.extraction.fast_extractor import prune_graph

        kept_entities, kept_relations = prune_graph(
            entities, relations, min_mentions=settings.extraction.fast_min_mentions
        )
        nodes = list(kept_entities)
        edges = [(a, b, r.weight) for (a, b), r in kept_relations.items()]
    result = hierarchical_leiden(
        edges, nodes, max_cluster_size=settings.cluster.max_cluster_size,
        seed=settings.cluster.seed, max_levels=settings.cluster.max_levels,
    )
    communities = result.communities
    attach_chunk_ids(communities, entities)
    for community in communities:
        community.signature = community_signature(community, entities, relations)
        community.input_chars_max = input_chars(community, entities, relations)
    if not removals:  # the new communities are numbered afresh: each may take its closest former one's report
        former, reports = store.community_rows()
        closest = closest_former(communities, former.values())
        _inherit(communities, {cid: reports.get(old) for cid, old in closest.items()}, entities, relations, settings)
    waves = report_waves(communities, _independent(settings, entities, relations))
    top: dict[int, int] = {}
    for c in communities:
        top[c.level] = max(top.get(c.level, 0), len(c.chunk_ids))
    meta = {"waves": _waves_meta(waves), "full_size": len(entities) + len(relations), "changed": 0,
            "occurrence_max": json.dumps({str(k): v for k, v in top.items()})}
    store.replace_communities(communities, result.levels, version, meta=meta, taken=taken, removals=removals,
                              chars_taken=True)
    return dict(enumerate(waves))


def _kept_unread(store: GraphStore, touched: list[Community], reports: dict[str, CommunityReport],
                 rows: dict[str, Entity], chains: dict[str, list[str]], changed: set[str],
                 gained: dict[str, set], edges: list[tuple[str, str, float]],
                 chars: tuple[dict[str, int], dict[str, int]], settings) -> set[str]:
    """Ids of the ``touched`` communities whose report stands by the drift bounds without their rows being read
    (``report_reuse.stands_unread``); each takes that report's signature and keeps its occurrence, and its
    ``input_chars_max`` grows by the whole descriptions of the members and links it ``gained`` and by what its
    ``changed`` members (merged again; ``chains``: where the clustered ones sit) and the job's ``edges`` it held
    added to theirs (``chars``: the merges' counts, ``take_char_deltas``). A batch that names again a few entities of a
    large community so reads what it changed, not the community: the community is read, and its report and
    occurrence made again, once its changes pass the bounds."""
    cfg = settings.report
    maybe = {c.id for c in touched if c.input_chars_max and c.id in reports}
    if not maybe:
        return set()
    grown = _grown_chars(store, maybe, rows, chains, changed, gained, edges, chars)
    kept = set()
    for c in touched:
        if c.id in maybe and stands_unread(reports[c.id], c, grown[c.id], cfg.reuse_max_drift,
                                           cfg.reuse_max_text_growth):
            c.input_chars_max += grown[c.id]
            c.signature = reports[c.id].signature
            kept.add(c.id)
    if kept:
        log.info("%d of %d touched communities keep their reports unread (within the drift bounds): %d of %d "
                 "members and links not read", len(kept), len(touched),
                 sum(len(c.nodes) + len(c.edges) for c in touched if c.id in kept),
                 sum(len(c.nodes) + len(c.edges) for c in touched))
    return kept


def _grown_chars(store: GraphStore, ids: set[str], rows: dict[str, Entity], chains: dict[str, list[str]],
                 changed: set[str], gained: dict[str, set], edges: list[tuple[str, str, float]],
                 chars: tuple[dict[str, int], dict[str, int]]) -> Counter[str]:
    """Community id (of ``ids``) -> at least the description characters it holds beyond its ``input_chars_max``:
    the whole descriptions of the members and links it ``gained``, and for the ``changed`` members and the
    ``edges`` it held already what the merges counted them to add (``chars``), or their whole descriptions when no
    merge counted them."""
    by_name, by_field = chars
    grown: Counter[str] = Counter()
    whole: dict[tuple[str, str], list[str]] = {}  # links whose whole description counts -> communities
    for cid in ids:
        for item in gained.get(cid, ()):
            if isinstance(item, tuple):
                whole.setdefault(item, []).append(cid)
            else:
                grown[cid] += len(rows[item].description) if item in rows else 0
    for name in changed & rows.keys():
        held = [cid for cid in ids.intersection(chains.get(name, ())) if name not in gained.get(cid, ())]
        grown.update(dict.fromkeys(held, by_name.get(name, len(rows[name].description))))
    for pair, held in _held_links(ids, chains, gained, edges).items():
        if (counted := by_field.get(rel_field(*pair))) is None:
            whole.setdefault(pair, []).extend(held)
        else:
            grown.update(dict.fromkeys(held, counted))
    relations = store.relations(list(whole))
    for pair, cids in whole.items():
        rel = find_relation(relations, *pair)
        grown.update(dict.fromkeys(cids, len(rel.description) if rel is not None else 0))
    return grown


def _held_links(ids: set[str], chains: dict[str, list[str]], gained: dict[str, set],
                edges: list[tuple[str, str, float]]) -> dict[tuple[str, str], list[str]]:
    """Each of ``edges`` (as a sorted pair) -> the communities of ``ids`` that held it before the job."""
    out: dict[tuple[str, str], list[str]] = {}
    for a, b, _w in edges:
        pair = (a, b) if a < b else (b, a)
        if held := [c for c in ids.intersection(chains.get(a, ()), chains.get(b, ())) if pair not in gained.get(c, ())]:
            out[pair] = held
    return out


def _inherit(communities, candidates, entities, relations, settings) -> None:
    """Let a report written from nearly the same members and links stand for a changed community
    (``ReportSettings.reuse_max_drift``)."""
    cfg = settings.report
    taken = inherit_reports(communities, candidates, entities, relations, cfg.reuse_max_drift,
                            cfg.reuse_max_text_growth)
    if taken:
        log.info("%d changed communities keep their reports (within the drift bounds)", taken)


def _extend(store: GraphStore, settings, version: int, meta: dict[str, str], taken) -> dict[int, list[str]] | None:
    """Extend the stored communities with the entities and edges merged since (``taken``); None when the job
    removed an entity or an edge (the whole graph is clustered then)."""
    names, fields = taken
    deltas = store.degree_deltas()
    chars = store.take_char_deltas()  # before the rows, as in _recluster
    rows = store.entities(names)
    weights = store.edge_weights(fields)
    if len(rows) < len(names) or len(weights) < len(fields):
        return None
    edges = [(*split_rel_field(f), w) for f, w in weights.items()]
    ends = set(names).union(x for a, b, _w in edges for x in (a, b))
    chains = store.entities_communities(ends)
    candidates = ends - set(chains)
    rows.update(store.entities(n for n in sorted(candidates) if n not in rows))
    new = {n for n in candidates if n in rows}
    if settings.extraction_strategy == "fast":  # the whole-graph pruning, of the entities not clustered yet
        from shared.domain.extraction.fast_extractor import STRONG_EDGE_WEIGHT

        strong = {x for a, b, w in edges if w >= STRONG_EDGE_WEIGHT for x in (a, b)}
        floor = settings.extraction.fast_min_mentions
        new = {n for n in new if len(set(rows[n].source_ids)) >= floor or n in strong}
    stored = store.communities_by_ids(sorted({cid for chain in chains.values() for cid in chain}))
    levels = {int(k): v for k, v in json.loads(meta.get("levels") or "{}").items()}
    former = {cid: c.signature for cid, c in stored.items()}
    ext = extend_clustering(
        stored, chains, new, [n for n in names if n in chains], edges, levels,
        max_cluster_size=settings.cluster.max_cluster_size, seed=settings.cluster.seed,
        max_levels=settings.cluster.max_levels,
    )
    touched = sorted(ext.touched.values(), key=lambda c: (c.level, c.id))
    removals = store.removals_pending(meta)
    reports = {} if removals else store.reports_by_ids(c.id for c in touched)
    unread = _kept_unread(store, touched, reports, rows, chains, set(names), ext.gained, edges, chars, settings)
    read = [c for c in touched if c.id not in unread]
    entities = store.entities(n for c in read for n in c.nodes)
    relations = store.relations(e for c in read for e in c.edges)
    attach_chunk_ids(read, entities)
    top = {int(k): v for k, v in json.loads(meta.get("occurrence_max") or "{}").items()}
    for c in read:
        top[c.level] = max(top.get(c.level, 0), len(c.chunk_ids))
    for c in read:
        c.occurrence = len(c.chunk_ids) / top[c.level] if top[c.level] else 0.0
        c.signature = community_signature(c, entities, relations)
        c.input_chars_max = input_chars(c, entities, relations)
    if not removals:
        _inherit(read, reports, entities, relations, settings)
    degrees = {n: e.degree + deltas.get(n, 0) for n, e in entities.items()}  # as saved below
    if written := cache_extractive_reports(store, read, entities, relations, degrees, settings):
        log.info("%d extractive reports written from the rows read to cluster", written)
    independent = _independent(settings, entities, relations)
    waves = report_waves(touched, lambda c: c.id in unread or independent(c))
    new_meta = {"waves": _waves_meta(waves), "full_size": meta["full_size"],
                "changed": int(meta.get("changed", 0)) + len(names) + len(fields),
                "occurrence_max": json.dumps({str(k): v for k, v in top.items()})}
    store.update_communities(touched, ext.chains, ext.levels, version, new_meta, taken, deltas,
                             sorted({former[c.id] for c in touched if former.get(c.id)}), removals, True)
    return dict(enumerate(waves))
