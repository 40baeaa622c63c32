"""A warm-up builds the entity BM25 and the walk from one read of the entity rows (``BM25Cache._entity_rows``),
also when it builds them side by side (``warmup.warm_tenant``)."""

from __future__ import annotations

from shared.domain.models import Entity
from shared.infra.redis.keys import Keys
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.redis_graph import GraphStore
from tests.unit.test_query_warmup import _fill


def _counted(redis_client, tenant: str, monkeypatch) -> tuple[list, BM25Cache]:
    """A tenant with one entity, a list that gets an item per read of every entity row, and a cold cache."""
    _fill(redis_client, tenant, "grey goose")
    reads: list = []
    real = GraphStore.raw_entity_rows
    monkeypatch.setattr(GraphStore, "raw_entity_rows", lambda self: reads.append(1) or real(self))
    return reads, BM25Cache(redis_client, capacity=2, snapshot_bytes=0)


def test_a_warm_up_reads_the_entity_rows_once_for_both_builds_unless_the_graph_changes_between(
        redis_client, tenant, monkeypatch):
    reads, cache = _counted(redis_client, tenant, monkeypatch)
    cache.warm(tenant)
    assert len(reads) == 1 and cache.builds == 2 and cache.walk_builds == 1
    assert [name for name, _ in cache(tenant, "entities").query("goose")] == ["GREY GOOSE"]
    assert cache._shared is None  # nothing kept past the warm-up

    real_build = BM25Cache._build

    def merge_between(self, t, kind, former):  # a merge lands after the entity index is built, before the walk is
        index = real_build(self, t, kind, former)
        if kind == "entities":
            GraphStore(redis_client, t).merge_entity("GREY GOOSE", lambda name, frags: Entity(
                name=name, description="a goose, merged again", source_ids=[f.source_id for f in frags]))
        return index

    monkeypatch.setattr(BM25Cache, "_build", merge_between)
    for kind in ("entities", "chunks"):
        redis_client.incr(Keys(tenant).vector_version(kind))
    redis_client.incr(Keys(tenant).graph_version())
    reads.clear()
    BM25Cache(redis_client, capacity=2, snapshot_bytes=0).warm(tenant)  # a cold process: no former index to update
    assert len(reads) == 2  # the walk read the rows again: the graph's revision had changed


def test_a_query_workers_warm_up_reads_the_entity_rows_once_though_its_builds_run_side_by_side(
        redis_client, tenant, monkeypatch):
    from shared.infra.store.warmup import warm_tenant

    reads, cache = _counted(redis_client, tenant, monkeypatch)
    warm_tenant(redis_client, tenant, cache)
    assert len(reads) == 1 and cache.builds == 2 and cache.walk_builds == 1 and cache._shared is None
