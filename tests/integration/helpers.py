"""Helpers for integration tests: a running stack and graph snapshots."""

from __future__ import annotations

from graphfleet_cli.stack import Stack
from shared.infra.store.redis_graph import GraphStore
from tests.conftest import worker_env


def start_stack(redis_url: str, data_dir, simulator_url: str | None, concurrency: int = 4, processes: int = 1,
                **env) -> Stack:
    return Stack(data_dir=data_dir, redis_url=redis_url, worker_concurrency=concurrency, processes=processes,
                 extra_env=worker_env(simulator_url, **env)).start()


def graph_snapshot(store: GraphStore) -> dict:
    """Everything that defines the graph, independent of job ids and timing."""
    entities = {n: (e.type, e.description, tuple(e.source_ids)) for n, e in store.all_entities().items()}
    relations = {k: (r.weight, r.description, tuple(r.source_ids)) for k, r in store.all_relations().items()}
    communities = sorted((c.level, tuple(c.nodes)) for c in store.communities().values())
    return {"entities": entities, "relations": relations, "communities": communities}
