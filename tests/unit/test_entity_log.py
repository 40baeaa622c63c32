"""The entity change log (``change_log``, appended by ``merge_write``): a query worker's entity BM25 and walk graph
of a later version read only the entity rows it names, and build what a fresh process builds from every row; a
log that no longer reaches back, or another epoch of the tenant, reads every row (real Redis)."""

from __future__ import annotations

import numpy as np
import pytest

from shared.infra.redis.keys import Keys
from shared.infra.store import change_log
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.redis_graph import GraphStore
from tests.unit.test_bm25_updates import _batch, _by_id, _entity


@pytest.fixture
def reads(monkeypatch):
    """One item per read of every entity row, and the names of the rows read one by one (``HMGET``)."""
    got: dict[str, list] = {"whole": [], "named": []}
    whole, state_of = GraphStore.raw_entity_rows, BM25Cache._entity_state

    monkeypatch.setattr(GraphStore, "raw_entity_rows", lambda self: got["whole"].append(1) or whole(self))

    def state(self, store, held, log_at):
        rows, digests, at = state_of(self, store, held, log_at)
        got["named"].append(sorted(rows))
        return rows, digests, at

    monkeypatch.setattr(BM25Cache, "_entity_state", state)
    return got


def _same_as_fresh(redis_client, tenant: str, cache: BM25Cache) -> None:
    fresh = BM25Cache(redis_client, capacity=4, snapshot_bytes=0)
    entities, expected = cache(tenant, "entities"), fresh(tenant, "entities")
    assert sorted(entities.ids) == sorted(expected.ids)
    for query in ("creature2 marsh", "creature number 33", "creature7"):
        assert _by_id(entities, query) == _by_id(expected, query)
    walked, built = cache.walk(tenant), fresh.walk(tenant)
    for name in ("indptr", "indices", "prob", "degree", "entity_passages"):
        assert np.array_equal(getattr(walked, name), getattr(built, name)), name
    assert list(walked.entities) == list(built.entities) and list(walked.passages) == list(built.passages)


def _remove(store: GraphStore, chunk_id: str, name: str) -> None:
    """A chunk deleted with what it contributed: its entity, named nowhere else, merged again to nothing."""
    store.delete_chunk(chunk_id)
    store.remove_chunk_fragments(chunk_id)
    store.merge_entity(name, lambda _name, _frags: None)


def _bump(redis_client, tenant: str) -> None:
    for kind in ("entities", "chunks"):
        redis_client.incr(Keys(tenant).vector_version(kind))
    redis_client.incr(Keys(tenant).graph_version())


def _warm(cache: BM25Cache, tenant: str, reads: dict) -> tuple[int, list]:
    """Warm the cache; (how many times every entity row was read, the names read one by one, per build)."""
    whole, named = len(reads["whole"]), len(reads["named"])
    cache.warm(tenant)
    return len(reads["whole"]) - whole, reads["named"][named:]


def test_a_merge_logs_the_entities_it_writes_or_removes_and_the_log_keeps_half_the_rows(
        redis_client, tenant, monkeypatch):
    k = Keys(tenant)
    _batch(redis_client, tenant, 0, 10)
    assert int(redis_client.get(k.entity_logged())) == 10 and redis_client.llen(k.entity_log()) == 10
    monkeypatch.setattr(change_log, "LOG_KEPT", 3)
    _batch(redis_client, tenant, 10, 10)
    assert int(redis_client.get(k.entity_logged())) == 20
    assert redis_client.llen(k.entity_log()) == 10  # half the 20 rows (more than 3)
    assert change_log.read_since(redis_client, k.entity_log(), k.entity_logged(), 15) == (
        20, [f"CREATURE{i}" for i in range(15, 20)])
    assert change_log.read_since(redis_client, k.entity_log(), k.entity_logged(), 20) == (20, [])
    assert change_log.read_since(redis_client, k.entity_log(), k.entity_logged(), 5) == (20, None)  # trimmed
    _remove(GraphStore(redis_client, tenant), "c12", "CREATURE12")  # a removed row is logged too
    assert change_log.read_since(redis_client, k.entity_log(), k.entity_logged(), 20) == (21, ["CREATURE12"])


def test_a_later_version_reads_only_the_rows_the_log_names(redis_client, tenant, reads):
    store = GraphStore(redis_client, tenant)
    _batch(redis_client, tenant, 0, 30)
    cache = BM25Cache(redis_client, capacity=4, snapshot_bytes=0)
    assert _warm(cache, tenant, reads)[0] == 1  # a first build reads every row, once for both

    _batch(redis_client, tenant, 30, 5)
    _entity(store, "c31", "CREATURE2", "seen again in the marsh")  # a second fragment rewrites an old row
    _remove(store, "c7", "CREATURE7")
    _bump(redis_client, tenant)
    cache.documents_indexed = 0
    whole, named = _warm(cache, tenant, reads)
    changed = sorted(["CREATURE2", *(f"CREATURE{i}" for i in range(30, 35))])  # CREATURE7's: logged, gone
    assert whole == 0 and named == [changed] * 2  # the entity index's read, then the walk's
    assert cache.documents_indexed == 5 + 6  # the new chunks; the new entities and the one rewritten
    assert "CREATURE7" not in cache(tenant, "entities").ids
    _same_as_fresh(redis_client, tenant, cache)


def test_a_log_that_no_longer_reaches_back_or_another_epoch_reads_every_row(
        redis_client, tenant, reads, monkeypatch):
    monkeypatch.setattr(change_log, "LOG_KEPT", 2)
    _batch(redis_client, tenant, 0, 6)
    cache = BM25Cache(redis_client, capacity=4, snapshot_bytes=0)
    cache.warm(tenant)
    _batch(redis_client, tenant, 6, 10)  # 10 names logged; the log keeps half the 16 rows
    _bump(redis_client, tenant)
    assert _warm(cache, tenant, reads)[0] == 1  # every row read again, once for both builds
    _same_as_fresh(redis_client, tenant, cache)

    _batch(redis_client, tenant, 16, 1)
    _bump(redis_client, tenant)
    assert _warm(cache, tenant, reads) == (0, [["CREATURE16"]] * 2)  # a change the log holds: only its row

    redis_client.set(Keys(tenant).graph_epoch(), "another")  # as a tenant deleted and written again
    _batch(redis_client, tenant, 17, 1)
    _bump(redis_client, tenant)
    assert _warm(cache, tenant, reads)[0] == 1
    _same_as_fresh(redis_client, tenant, cache)
