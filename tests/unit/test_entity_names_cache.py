"""``GraphStore.all_entity_names`` (the gateway's entity search) reads the names once per graph revision per
process, and a merge that changes the graph is seen by the next call. Real Redis, the real merge stage."""

from __future__ import annotations

from shared.config import get_settings
from shared.domain.models import EntityFragment, ExtractionResult
from shared.infra.store.redis_graph import GraphStore


class CountingRedis:
    """The real client, counting its ``HKEYS`` calls."""

    def __init__(self, real):
        self.real, self.hkeys_calls = real, 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def hkeys(self, key):
        self.hkeys_calls += 1
        return self.real.hkeys(key)


def _merge(store: GraphStore, chunk_id: str, *names: str) -> None:
    from shared.pipeline.merge_stage import run_merge_batch

    store.save_extraction(ExtractionResult(chunk_id=chunk_id, entities=[
        EntityFragment(name=n, type="person", description=f"{n} of the story.", source_id=chunk_id) for n in names]))
    run_merge_batch(store, store.dirty_members("entities"), store.dirty_members("relations"), get_settings(), None)


def test_names_are_read_once_per_graph_revision_and_a_merge_is_seen_next(redis_client, tenant):
    writer, counting = GraphStore(redis_client, tenant), CountingRedis(redis_client)
    reader = GraphStore(counting, tenant)
    _merge(writer, "c1", "SCROOGE", "MARLEY")
    assert reader.all_entity_names() == ["MARLEY", "SCROOGE"]
    assert reader.all_entity_names() == ["MARLEY", "SCROOGE"]
    assert counting.hkeys_calls == 1  # the second search found the names of this revision
    _merge(writer, "c2", "BOB CRATCHIT")
    assert reader.all_entity_names() == ["BOB CRATCHIT", "MARLEY", "SCROOGE"]
    assert counting.hkeys_calls == 2


def test_each_tenant_gets_its_own_names(redis_client, tenant):
    other = tenant + "-other"
    _merge(GraphStore(redis_client, tenant), "c1", "SCROOGE")
    _merge(GraphStore(redis_client, other), "c1", "FEZZIWIG")
    assert GraphStore(redis_client, tenant).all_entity_names() == ["SCROOGE"]
    assert GraphStore(redis_client, other).all_entity_names() == ["FEZZIWIG"]
