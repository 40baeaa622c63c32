"""Cluster the tenant's whole graph into hierarchical Leiden communities."""

from __future__ import annotations

from collections import Counter

from shared.domain.clustering import attach_chunk_ids, community_signature, hierarchical_leiden
from shared.domain.reports import own_rows_fit, report_waves
from shared.infra.store.redis_graph import GraphStore


def degrees_of(edges: list[tuple[str, str, float]]) -> dict[str, int]:
    deg: Counter[str] = Counter()
    for a, b, _w in edges:
        deg[a] += 1
        deg[b] += 1
    return dict(deg)


def run_cluster(store: GraphStore, settings) -> dict[int, list[str]]:
    """Recluster and save; return the report waves: wave -> community ids (``shared.domain.reports.report_waves``,
    wave 0 first: communities without children; a community's wave follows all its children's)."""
    version = store.graph_version()
    entities = store.all_entities()
    edges = [e for e in store.edge_list() if e[0] in entities and e[1] in entities]
    store.set_degrees(degrees_of(edges))
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
    store.replace_communities(communities, result.levels, version)
    cfg = settings.report

    def independent(community) -> bool:  # an LLM report whose own rows fit: reads no sub-report
        return (settings.llm_enabled and len(community.nodes) >= cfg.min_llm_members
                and own_rows_fit(community, entities, relations, cfg.max_input_tokens, settings.llm_model))

    return dict(enumerate(report_waves(communities, independent)))
