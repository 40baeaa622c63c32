"""Export a tenant's graph (GraphML via networkx)."""

from __future__ import annotations

import io

import networkx as nx

from shared.infra.store.redis_graph import GraphStore


def to_networkx(store: GraphStore) -> nx.Graph:
    graph = nx.Graph()
    for name, ent in store.all_entities().items():
        graph.add_node(name, type=ent.type, description=ent.description, source_id="|".join(ent.source_ids),
                       degree=ent.degree, communities="|".join(store.entity_communities(name)))
    for (a, b), rel in store.all_relations().items():
        graph.add_edge(a, b, weight=rel.weight, description=rel.description, keywords=rel.keywords,
                       source_id="|".join(rel.source_ids))
    return graph


def graphml_bytes(store: GraphStore) -> bytes:
    buf = io.BytesIO()
    nx.write_graphml(to_networkx(store), buf)
    return buf.getvalue()
