"""Query index snapshots in Redis (``shared.infra.store.index_snapshots``): a process that builds a tenant's walk
graph or BM25 index stores it, a cold process loads it instead of building, and anything but a current, intact
snapshot of the same tenant means a build as before (real Redis)."""

from __future__ import annotations

import pytest

from shared.domain.merge import merge_relation
from shared.domain.models import Chunk, Entity, EntityFragment, ExtractionResult, RelationFragment
from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.walk_build import build_walk
from shared.infra.redis.keys import Keys
from shared.infra.store import index_codec
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.index_snapshots import PART_BYTES, IndexSnapshots
from shared.infra.store.redis_extractions import split_rel_field
from shared.infra.store.redis_graph import GraphStore

TEXTS = ["Scrooge counts his coins in the cold office.", "Marley's ghost visits Scrooge at midnight.",
         "Bob Cratchit carries Tiny Tim home.", "The ghost shows Scrooge the Cratchit family.",
         "Fezziwig gives a merry Christmas ball.", "Tiny Tim says God bless us every one."]
NAMES = {0: ["SCROOGE"], 1: ["MARLEY", "SCROOGE"], 2: ["BOB CRATCHIT", "TINY TIM"], 3: ["SCROOGE", "BOB CRATCHIT"],
         4: ["FEZZIWIG"], 5: ["TINY TIM"]}
KINDS = ("walk", "chunks", "entities")


def _merge(name, frags):
    return Entity(name=name, type="person", description=" ".join(f.description for f in frags),
                  source_ids=[f.source_id for f in frags])


def _fill(redis, tenant: str) -> GraphStore:
    """Six chunks, their entities and relations, as the pipeline leaves them (versions bumped)."""
    store = GraphStore(redis, tenant)
    store.put_chunks([Chunk(id=f"c{i}", doc_id="d1", index=i, text=t, tokens=9) for i, t in enumerate(TEXTS)])
    for i, names in NAMES.items():
        store.save_extraction(ExtractionResult(chunk_id=f"c{i}", entities=[
            EntityFragment(name=n, type="person", description=f"{n.lower()} of chunk {i}", source_id=f"c{i}")
            for n in names], relations=[RelationFragment(src=names[0], tgt=names[1], description="met",
                                                         source_id=f"c{i}")] if len(names) > 1 else []))
    store.merge_batch("entities", store.dirty_members("entities"), _merge)
    store.merge_batch("relations", store.dirty_members("relations"),
                      lambda field, frags: merge_relation(*split_rel_field(field), frags))
    for kind in ("entities", "chunks"):
        redis.incr(Keys(tenant).vector_version(kind))
    return store


def _rankings(cache: BM25Cache, tenant: str) -> dict:
    walk = cache.walk(tenant)
    return {"chunks": cache(tenant, "chunks").query("Scrooge ghost Tim", 10),
            "entities": cache(tenant, "entities").query("scrooge tim chunk", 10),
            "walk": walk.walk([("SCROOGE", 1.0)], [("c2", 1.0)], 10),
            "named": walk.named_entities("What did Tiny Tim and Bob Cratchit say?")}


def test_a_cold_cache_loads_the_snapshots_and_ranks_as_a_fresh_build(redis_client, tenant):
    _fill(redis_client, tenant)
    first = BM25Cache(redis_client)
    built = _rankings(first, tenant)
    assert (first.walk_builds, first.builds, first.snapshot_loads) == (1, 2, 0)
    assert all(redis_client.hget(Keys(tenant).index_snapshot(kind), "tag") for kind in KINDS)
    cold = BM25Cache(redis_client)  # a fresh worker process
    assert _rankings(cold, tenant) == built
    assert (cold.walk_builds, cold.builds, cold.snapshot_loads) == (0, 0, 3)
    fresh = BM25Cache(redis_client, snapshot_bytes=0)  # no snapshots at all: the same answers
    assert _rankings(fresh, tenant) == built and fresh.snapshot_loads == 0
    assert built["walk"].passages and built["chunks"] and built["named"]


def test_a_new_version_ignores_the_old_snapshot_and_replaces_it(redis_client, tenant):
    store = _fill(redis_client, tenant)
    BM25Cache(redis_client).warm(tenant)
    old_tags = {kind: redis_client.hget(Keys(tenant).index_snapshot(kind), "tag") for kind in KINDS}
    store.put_chunks([Chunk(id="c9", doc_id="d2", index=0, text="Scrooge buys the prize turkey.", tokens=6)])
    store.save_extraction(ExtractionResult(chunk_id="c9", entities=[
        EntityFragment(name="TURKEY", type="thing", description="a prize bird", source_id="c9")]))
    store.merge_batch("entities", store.dirty_members("entities"), _merge)
    for kind in ("entities", "chunks"):
        redis_client.incr(Keys(tenant).vector_version(kind))
    cold = BM25Cache(redis_client)
    assert cold(tenant, "chunks").query("turkey", 3)[0][0] == "c9"
    assert "TURKEY" in cold.walk(tenant).entities and cold(tenant, "entities").query("bird", 1)[0][0] == "TURKEY"
    assert (cold.walk_builds, cold.builds, cold.snapshot_loads) == (1, 2, 0)
    for kind in KINDS:  # one snapshot per tenant and kind: the new one replaced the old
        assert redis_client.hget(Keys(tenant).index_snapshot(kind), "tag") != old_tags[kind]
    assert not list(redis_client.scan_iter(match=f"{Keys(tenant).p}idxsnap:*:tmp*"))  # no staging key left
    later = BM25Cache(redis_client)
    later.warm(tenant)
    assert later.snapshot_loads == 3 and list(later.walk(tenant).entities) == list(cold.walk(tenant).entities)


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "parts", "huge", "longer"])
def test_a_damaged_snapshot_is_rebuilt_never_an_error(redis_client, tenant, damage):
    _fill(redis_client, tenant)
    built = _rankings(BM25Cache(redis_client), tenant)
    for kind in KINDS:
        key = Keys(tenant).index_snapshot(kind)
        data = redis_client.hget(key, "0")
        if damage == "flip":  # a byte changed: the checksum no longer matches
            redis_client.hset(key, "0", data[:40] + bytes([data[40] ^ 0xFF]) + data[41:])
        elif damage == "truncate":
            redis_client.hset(key, "0", data[: len(data) // 2])
        elif damage == "parts":
            redis_client.hset(key, "parts", "2")
        elif damage == "huge":  # a size no snapshot was written with: refused before any buffer is made
            redis_client.hset(key, "size", str(2**50))
        elif damage == "longer":  # a part longer than the size says: never read past the buffer
            redis_client.hset(key, "0", data + b"overflow")
        else:  # intact checksum and size, but not an index (written by something else)
            junk = b"\x93NUMPY" + b"\x00" * (len(data) - 6)
            snapshots = IndexSnapshots(redis_client, 2**30)
            snapshots.save(tenant, kind, redis_client.hget(key, "tag").decode(), junk)
    cold = BM25Cache(redis_client)
    assert _rankings(cold, tenant) == built
    assert (cold.walk_builds, cold.builds, cold.snapshot_loads) == (1, 2, 0)
    again = BM25Cache(redis_client)  # the build stored a good snapshot again
    assert _rankings(again, tenant) == built and again.snapshot_loads == 3


def test_deleting_a_tenant_deletes_its_snapshots_and_tenants_never_share_one(redis_client, tenant):
    _fill(redis_client, tenant)
    other = tenant + "b"
    store = GraphStore(redis_client, other)
    store.put_chunks([Chunk(id="c0", doc_id="d1", index=0, text="Jacob Marley is dead as a doornail.", tokens=8)])
    for kind in ("entities", "chunks"):
        redis_client.incr(Keys(other).vector_version(kind))  # the same versions as the first tenant
    BM25Cache(redis_client).warm(tenant)
    cold = BM25Cache(redis_client)
    assert [c for c, _ in cold(other, "chunks").query("Scrooge doornail", 5)] == ["c0"]  # its own index
    assert cold.builds == 1 and cold.snapshot_loads == 0
    assert len(cold.walk(other)) == 1
    cold.warm(other)
    keys = list(redis_client.scan_iter(match=f"{Keys(tenant).p}*"))
    assert all(redis_client.exists(Keys(tenant).index_snapshot(kind)) for kind in KINDS)
    redis_client.delete(*keys)  # the tenant is deleted: every key under its prefix
    assert not any(redis_client.exists(Keys(tenant).index_snapshot(kind)) for kind in KINDS)
    assert all(redis_client.exists(Keys(other).index_snapshot(kind)) for kind in KINDS)
    rebuilt = BM25Cache(redis_client)  # a new tenant of the same name counts its versions from 0 again
    GraphStore(redis_client, tenant).put_chunks([Chunk(id="n1", doc_id="d9", index=0, text="A new story.", tokens=3)])
    for kind in ("entities", "chunks"):
        redis_client.incr(Keys(tenant).vector_version(kind))
    assert [c for c, _ in rebuilt(tenant, "chunks").query("story scrooge", 5)] == ["n1"]
    assert rebuilt.snapshot_loads == 0


def test_snapshots_split_into_parts_and_round_trip_any_string(redis_client, tenant, monkeypatch):
    from shared.infra.store import index_snapshots

    monkeypatch.setattr(index_snapshots, "PART_BYTES", 1000)
    names = ["A,B", "NEW\nLINE", "ÉCOLE", "名前", ""]
    walk = build_walk(["p1", "p,2", "p\n3"], {n: ["p1", "p\n3"] for n in names[:-1]},
                           [("A,B", "名前", 2.0)])
    data = index_codec.walk_to_bytes(walk)
    snapshots = IndexSnapshots(redis_client, 2**30)
    assert snapshots.save(tenant, "walk", "1", data)
    assert int(redis_client.hget(Keys(tenant).index_snapshot("walk"), "parts")) == -(-len(data) // 1000) > 1
    loaded = index_codec.walk_from_bytes(snapshots.load(tenant, "walk", "1"))
    assert loaded.passages == walk.passages and loaded.entities == walk.entities
    assert loaded.rank([("名前", 1.0)], [], 5) == walk.rank([("名前", 1.0)], [], 5)
    assert snapshots.load(tenant, "walk", "2") is None and snapshots.load(tenant + "x", "walk", "1") is None
    assert not IndexSnapshots(redis_client, len(data) - 1).save(tenant, "walk", "3", data)  # over the bound
    assert PART_BYTES >= 2**20
    bm25 = BM25Index.build([("x,1", "alpha beta"), ("x\n2", "beta gamma"), ("x3", "")])
    back = index_codec.bm25_from_bytes(index_codec.bm25_to_bytes(bm25))
    assert back.ids == bm25.ids and back.query("beta gamma") == bm25.query("beta gamma")
    empty = index_codec.bm25_from_bytes(index_codec.bm25_to_bytes(BM25Index.build([])))
    assert len(empty) == 0 and empty.query("alpha") == []
    with pytest.raises(ValueError):
        index_codec.walk_from_bytes(index_codec.bm25_to_bytes(bm25))  # a snapshot of another kind


def test_a_loaded_walk_names_the_entities_a_built_one_names_and_refuses_name_arrays_out_of_range():
    names = {"SPACEDEV": ["p1"], "SIERRA NEVADA CORPORATION": ["p2"], "NEVADA": ["p2", "p3"],
             "THE ONE OF A VERY LONG NAME THAT IS A SENTENCE": ["p3"], "ÉCOLE NORMALE": ["p1"]}
    walk = build_walk(["p1", "p2", "p3"], names, [("NEVADA", "SPACEDEV", 1.0)])
    loaded = index_codec.walk_from_bytes(index_codec.walk_to_bytes(walk))
    for question in ("Who owns Space Dev in Nevada?", "Which Sierra Nevada corporation?", "école normale",
                     "the one of a very long name that is a sentence", "nothing here"):
        assert loaded.named_entities(question) == walk.named_entities(question)
    assert [n for n, _ in walk.named_entities("Sierra Nevada Corporation, Nevada")] == [
        "SIERRA NEVADA CORPORATION", "NEVADA"]  # the longer, rarer name first
    arrays = index_codec.unpack(index_codec.walk_to_bytes(walk))
    arrays["name_postings"] = arrays["name_postings"] + 100  # entities that do not exist
    with pytest.raises(ValueError):
        index_codec.walk_from_bytes(index_codec.pack(arrays))
