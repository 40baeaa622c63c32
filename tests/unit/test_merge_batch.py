"""``GraphStore.merge_batch`` against concurrent writers: optimistic concurrency on a real Redis (a fragment written
while a batch merges is never lost; only the keys it changed are merged again) and the order merges run in."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from shared.domain.models import EntityFragment, ExtractionResult
from shared.infra.store.redis_graph import GraphStore
from tests.unit.graph_support import joined_entity


def test_batch_merge_retries_when_a_fragment_arrives_during_the_merge(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    store.save_extraction(ExtractionResult(chunk_id="c1", entities=[
        EntityFragment(name="A", description="a1", source_id="c1")]))
    calls = {"n": 0}

    def slow_merge(name, frags):
        calls["n"] += 1
        if calls["n"] == 1:  # a concurrent writer lands between read and write
            store.save_extraction(ExtractionResult(chunk_id="c2", entities=[
                EntityFragment(name="A", description="a2", source_id="c2")]))
        return joined_entity(name, frags)

    assert store.merge_batch("entities", ["A"], slow_merge) == (1, 0)
    assert calls["n"] == 2
    assert store.entities(["A"])["A"].source_ids == ["c1", "c2"]
    assert store.dirty_members("entities") == []


def test_a_key_written_into_during_the_merge_is_merged_again_alone(redis_client, tenant):
    """A concurrent extraction that keeps writing into one hub key sends only that key back: the batch's other keys
    are written on the first round and merged once; the hub, merged again from what it holds now, gets every
    fragment."""
    store = GraphStore(redis_client, tenant)
    names = ["HUB", "A", "B", "C"]
    store.save_extraction(ExtractionResult(chunk_id="c1", entities=[
        EntityFragment(name=n, description=f"{n} first", source_id="c1") for n in names]))
    calls: dict[str, int] = {}

    def merge(name, frags):
        calls[name] = calls.get(name, 0) + 1
        if name == "HUB" and calls[name] <= 3:  # a writer lands in the hub during each of its first three merges
            store.save_extraction(ExtractionResult(chunk_id=f"h{calls[name]}", entities=[
                EntityFragment(name="HUB", description=f"hub again {calls[name]}", source_id=f"h{calls[name]}")]))
        return joined_entity(name, frags)

    assert store.merge_batch("entities", names, merge) == (4, 0)
    assert calls == {"HUB": 4, "A": 1, "B": 1, "C": 1}
    merged = store.entities(names)
    assert merged["HUB"].source_ids == ["c1", "h1", "h2", "h3"]
    assert all(merged[n].source_ids == ["c1"] for n in "ABC")
    assert store.dirty_members("entities") == []


def test_batch_merge_starts_the_longest_descriptions_first_and_files_each_result_under_its_key(redis_client, tenant):
    """The entities with the most fragment text (the ones an LLM summary is asked for) are merged first, so a thread
    pool sends every summary at the start instead of behind the cheap merges listed ahead of them."""
    store = GraphStore(redis_client, tenant)
    names = [f"E{i}" for i in range(8)] + ["LONG"]
    store.save_extraction(ExtractionResult(chunk_id="c1", entities=[
        EntityFragment(name=n, description=f"short {n}", source_id="c1") for n in names]))
    for i in range(2, 6):
        store.save_extraction(ExtractionResult(chunk_id=f"c{i}", entities=[
            EntityFragment(name="LONG", description=f"a long description, part {i} " * 20, source_id=f"c{i}")]))
    order: list[str] = []

    def merge(name, frags):
        order.append(name)
        return joined_entity(name, frags)

    with ThreadPoolExecutor(1) as pool:
        assert store.merge_batch("entities", names, merge, map_fn=pool.map) == (9, 0)
    assert order[0] == "LONG" and sorted(order) == sorted(names)
    merged = store.entities(names)
    assert merged["LONG"].source_ids == ["c1", "c2", "c3", "c4", "c5"]
    assert all(merged[n].description == f"short {n}" and merged[n].source_ids == ["c1"] for n in names[:-1])


def test_concurrent_batch_merges_lose_nothing(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    names = [f"E{i}" for i in range(20)]

    def writer(i):
        store.save_extraction(ExtractionResult(chunk_id=f"c{i}", entities=[
            EntityFragment(name=n, description=f"d{i}", source_id=f"c{i}") for n in names]))
        store.merge_batch("entities", names, joined_entity)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if store.dirty_members("entities"):
        store.merge_batch("entities", store.dirty_members("entities"), joined_entity)
    assert all(len(e.source_ids) == 12 for e in store.entities(names).values())


def test_an_entity_merged_again_with_the_same_description_is_not_embedded_again(redis_client, tenant):
    """Its vector embeds its name and description: a merge that leaves both (and the type) as they were does not
    mark it for the index stage; a new entity, a changed description or type, and a removed row do."""
    store = GraphStore(redis_client, tenant)

    def mention(chunk: str, **descriptions: str) -> None:
        store.save_extraction(ExtractionResult(chunk_id=chunk, entities=[
            EntityFragment(name=n, description=d, source_id=chunk) for n, d in descriptions.items()]))
        store.merge_batch("entities", store.dirty_members("entities"), joined_entity)

    def embedded() -> list[str]:  # as the index stage does: take the marks, embed, drop them
        names = store.take_dirty("embed_entities")
        store.clear_taken("embed_entities", names)
        return names

    mention("c1", A="a", B="b", C="c")
    assert embedded() == ["A", "B", "C"]
    mention("c2", A="a", B="b more", D="d")  # A: the same description from another chunk
    assert store.entities(["A"])["A"].source_ids == ["c1", "c2"]
    assert embedded() == ["B", "D"]
    store.remove_chunk_fragments("c1")
    store.merge_batch("entities", store.dirty_members("entities"), joined_entity)
    # B lost "b" with c1; C's only chunk went (its row and vector go); A keeps "a" from c2
    assert embedded() == ["B", "C"]
    store.save_extraction(ExtractionResult(chunk_id="c3", entities=[
        EntityFragment(name="A", type="person", description="a", source_id="c3")]))
    store.merge_batch("entities", ["A"], lambda name, frags: joined_entity(name, frags).model_copy(
        update={"type": "person"}))
    assert embedded() == ["A"]  # the type its vector's metadata holds changed
