"""The embedded vector store's row-id snapshots (``redis_vectors``): a cold process reads a collection's row ids
from one snapshot per version instead of the id -> row hash; a snapshot of another version, a damaged one or one
a racing write would make wrong is never used."""

from __future__ import annotations

import numpy as np

from shared.domain.storage import VectorItem
from shared.infra.redis.keys import Keys
from shared.infra.store.redis_vectors import READS_BEFORE_UNCACHED, RedisVectorStore

KIND = "entities"
ITEMS = [VectorItem(f"e{i:02d}", [1.0, float(i), float(i % 3), 0.5], {"n": i}) for i in range(12)]
ITEMS.append(VectorItem("é-ünïcode\nid", [0.0, 0.0, 1.0, 0.0], {"n": "u"}))


class CountingRedis:
    """The client, counting the HGETALLs of the id -> row hashes (what a snapshot saves a cold process)."""

    def __init__(self, redis):
        self._redis = redis
        self.row_hash_reads = 0

    def hgetall(self, key):
        if ":vecrow:" in str(key):
            self.row_hash_reads += 1
        return self._redis.hgetall(key)

    def __getattr__(self, name):
        return getattr(self._redis, name)


def hits(store: RedisVectorStore, tenant: str, query, top_k: int = 20):
    return [(h.id, round(h.score, 5), h.payload) for h in store.search(tenant, KIND, query, top_k)]


def cold(redis) -> tuple[RedisVectorStore, CountingRedis]:
    counting = CountingRedis(redis)
    return RedisVectorStore(counting), counting


QUERIES = [[1.0, 3.0, 1.0, 0.5], [0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]]


def test_a_cold_process_reads_the_row_ids_from_the_snapshot_with_the_same_results(redis_client, tenant):
    first, first_redis = cold(redis_client)
    first.upsert(tenant, KIND, ITEMS)
    want = [hits(first, tenant, q) for q in QUERIES]
    assert first_redis.row_hash_reads == 1 and first.rowid_snapshot_loads == 0  # the first read stores it
    assert redis_client.exists(Keys(tenant).index_snapshot(f"rowids-{KIND}"))

    second, second_redis = cold(redis_client)
    assert [hits(second, tenant, q) for q in QUERIES] == want
    assert second_redis.row_hash_reads == 0 and second.rowid_snapshot_loads == 1
    assert second.vectors(tenant, KIND).keys() == {it.id for it in ITEMS}
    assert second.sample_item(tenant, KIND)[0] == "e00"  # the first by id


def test_a_write_makes_the_snapshot_stale_and_a_cold_process_reads_the_rows(redis_client, tenant):
    RedisVectorStore(redis_client).upsert(tenant, KIND, ITEMS)
    RedisVectorStore(redis_client).warm_kind(tenant, KIND)  # stores the snapshot of this version
    writer = RedisVectorStore(redis_client)
    writer.upsert(tenant, KIND, [VectorItem("new", [0.0, -1.0, 0.0, 0.0], {"n": "new"})])
    writer.delete(tenant, KIND, ["e05"])

    after, after_redis = cold(redis_client)
    got = hits(after, tenant, [0.0, -1.0, 0.0, 0.0], top_k=len(ITEMS) + 1)
    assert after.rowid_snapshot_loads == 0 and after_redis.row_hash_reads == 1
    assert got[0][0] == "new" and "e05" not in {h[0] for h in got} and len(got) == len(ITEMS)

    again, again_redis = cold(redis_client)  # the new version's snapshot, stored by the read above
    assert hits(again, tenant, [0.0, -1.0, 0.0, 0.0], top_k=len(ITEMS) + 1) == got
    assert again.rowid_snapshot_loads == 1 and again_redis.row_hash_reads == 0


def test_a_damaged_snapshot_is_read_past_and_stored_again(redis_client, tenant):
    store = RedisVectorStore(redis_client)
    store.upsert(tenant, KIND, ITEMS)
    want = [hits(store, tenant, q) for q in QUERIES]
    key = Keys(tenant).index_snapshot(f"rowids-{KIND}")
    part = redis_client.hget(key, "0")
    redis_client.hset(key, "0", part[:-8] + b"\xff" * 8)  # same size, other bytes: the checksum fails

    damaged, damaged_redis = cold(redis_client)
    assert [hits(damaged, tenant, q) for q in QUERIES] == want
    assert damaged.rowid_snapshot_loads == 0 and damaged_redis.row_hash_reads == 1

    repaired, repaired_redis = cold(redis_client)
    assert [hits(repaired, tenant, q) for q in QUERIES] == want
    assert repaired.rowid_snapshot_loads == 1 and repaired_redis.row_hash_reads == 0


def test_free_rows_are_never_hits_and_an_empty_id_is_not_a_free_row(redis_client, tenant):
    store = RedisVectorStore(redis_client)
    store.upsert(tenant, KIND, [*ITEMS, VectorItem("", [0.0, 1.0, 0.0, 0.0], {"n": "empty"})])
    deleted = ["e00", "e01", "e07", "é-ünïcode\nid"]
    store.delete(tenant, KIND, deleted)
    store.warm_kind(tenant, KIND)

    reader = RedisVectorStore(redis_client)
    for query in [*QUERIES, *(it.vector for it in ITEMS)]:  # a deleted vector's bytes stay in its row
        got = [h.id for h in reader.search(tenant, KIND, query, top_k=100, min_score=-1.0)]
        assert not set(got) & set(deleted) and len(got) == len(ITEMS) + 1 - len(deleted)
    assert reader.rowid_snapshot_loads == 1
    assert "" in reader.vectors(tenant, KIND) and reader.sample_item(tenant, KIND)[0] == ""
    assert reader.search(tenant, KIND, [0.0, 1.0, 0.0, 0.0], top_k=1)[0].payload == {"n": "empty"}

    store.delete(tenant, KIND, [it.id for it in ITEMS] + [""])  # every row free
    empty = RedisVectorStore(redis_client)
    assert empty.search(tenant, KIND, QUERIES[0], top_k=5) == [] and empty.sample_item(tenant, KIND) is None


def test_a_read_a_write_raced_stores_no_snapshot(redis_client, tenant):
    RedisVectorStore(redis_client).upsert(tenant, KIND, ITEMS)
    writer = RedisVectorStore(redis_client)

    class RacedRedis(CountingRedis):
        def hgetall(self, key):  # a write lands while each read is under way
            got = super().hgetall(key)
            writer.upsert(tenant, KIND, [VectorItem(f"w{self.row_hash_reads}", [0.0, 0.0, 0.0, 1.0])])
            return got

    want = hits(RedisVectorStore(redis_client, snapshot_bytes=0), tenant, QUERIES[0], top_k=3)
    raced = RedisVectorStore(RacedRedis(redis_client))
    assert hits(raced, tenant, QUERIES[0], top_k=3) == want  # the last read is used, neither cached nor stored
    assert raced.loads == READS_BEFORE_UNCACHED and raced.rowid_snapshot_loads == 0
    assert not redis_client.exists(Keys(tenant).index_snapshot(f"rowids-{KIND}"))


def test_dropping_the_tenant_drops_its_snapshots_and_none_is_kept_when_disabled(redis_client, tenant):
    store = RedisVectorStore(redis_client)
    store.upsert(tenant, KIND, ITEMS)
    store.warm_kind(tenant, KIND)
    key = Keys(tenant).index_snapshot(f"rowids-{KIND}")
    assert redis_client.exists(key)
    store.drop_tenant(tenant)
    assert not redis_client.exists(key)

    off = RedisVectorStore(redis_client, snapshot_bytes=0)
    off.upsert(tenant, KIND, ITEMS)
    got = off.vectors(tenant, KIND)
    assert not redis_client.exists(key) and off.rowid_snapshot_loads == 0
    assert np.allclose(got["e03"], store.vectors(tenant, KIND)["e03"])  # (this store stores one)
