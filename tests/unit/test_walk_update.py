"""The walk graph of a tenant's next version, built from the last one (``walk_build.assemble`` with ``former``):
the same graph a fresh build gives, having parsed only the entity rows whose fingerprint changed and read only the
new passages' titles; and the query cache doing so after a batch (``BM25Cache._build_walk``)."""

from __future__ import annotations

import random

import numpy as np

from shared.domain.models import Chunk, Document
from shared.domain.retrieval.edge_index import EdgeIndex
from shared.domain.retrieval.walk_build import assemble
from shared.infra.redis.keys import Keys
from shared.infra.store.bm25_cache import WALK, BM25Cache
from shared.infra.store.redis_graph import GraphStore
from tests.unit.test_bm25_updates import _batch, _entity


def _version(rng: random.Random, passages: list[str], entities: list[str]) -> tuple[dict, dict]:
    sources = {e: rng.sample(passages, rng.randint(1, 4)) for e in entities}
    edges = {tuple(sorted(rng.sample(entities, 2))): float(rng.randint(1, 5)) for _ in range(len(entities))}
    return sources, edges


class _Rows:
    """A version's rows, recording what a build asks of them."""

    def __init__(self, sources: dict, titles: dict):
        self.sources, self.titles, self.parsed, self.asked = sources, titles, [], []

    def sources_of(self, names):
        self.parsed += names
        return {n: self.sources[n] for n in names}

    def titles_of(self, ids):
        self.asked += ids
        return {p: self.titles[p] for p in ids if p in self.titles}


def _build(passages, sources, digests, edges, titles, former=None):
    rows = _Rows(sources, titles)
    index = assemble(passages, digests, rows.sources_of, EdgeIndex.build([(a, b, w) for (a, b), w in edges.items()]),
                     rows.titles_of, former)
    return index, rows


def test_a_walk_built_from_the_former_one_is_the_fresh_build_and_reads_only_what_changed():
    rng = random.Random(3)
    passages = [f"p{i}" for i in range(60)]
    entities = [f"E{i}" for i in range(40)] + ["DOC 2"]
    sources, edges = _version(rng, passages, entities)
    titles = {p: f"Doc {i // 10} (film)" for i, p in enumerate(passages) if i % 10 != 9}
    digests = dict.fromkeys(sources, 1)
    first, _ = _build(passages, sources, digests, edges, titles)

    passages2 = [p for p in passages if p != "p5"] + [f"p{i}" for i in range(60, 70)]
    titles2 = {**titles, **{f"p{i}": "Doc 7 (film)" for i in range(60, 70)}}
    sources2 = {e: [p for p in s if p != "p5"] for e, s in sources.items() if e not in ("E7", "DOC 2")}
    sources2["E3"] = ["p1", "p61"]  # a rewritten row
    sources2.update({f"E{i}": rng.sample(passages2, 2) for i in range(40, 45)})  # new entities
    sources2["DOC 7"] = ["p62"]  # now an entity: the title "Doc 7 (film)" links to it, no more to a node of its own
    digests2 = {e: digests.get(e, 1) for e in sources2}
    for changed in ("E3", "E12"):  # E12's row changed with its passages unchanged (a new description)
        digests2[changed] = 2
    edges2 = {pair: w for pair, w in edges.items() if "E7" not in pair}
    edges2.update({tuple(sorted(("E3", f"E{i}"))): 2.0 for i in range(40, 45)})

    updated, rows = _build(passages2, sources2, digests2, edges2, titles2, former=first)
    fresh, _ = _build(passages2, sources2, digests2, edges2, titles2)
    assert sorted(rows.parsed) == sorted(["E3", "E12", "DOC 7", *(f"E{i}" for i in range(40, 45))])
    assert rows.asked == [f"p{i}" for i in range(60, 70)]
    assert list(updated.passages) == list(fresh.passages) and list(updated.entities) == list(fresh.entities)
    for name in ("indptr", "indices", "prob", "degree", "entity_passages"):
        assert np.array_equal(getattr(updated, name), getattr(fresh, name)), name
    assert "DOC 2 (FILM)" in fresh.entities  # the title of p20..p28 is a node of its own: "DOC 2" is gone
    doc7 = fresh.entities.find("DOC 7") + len(fresh.passages)
    linked = {fresh.passages[int(p)] for p in fresh.indices[fresh.indptr[doc7]:fresh.indptr[doc7 + 1]]}
    assert linked == {f"p{i}" for i in range(60, 70)}
    for query in ("what did doc 7 say of e3", "E41 and E12", "the doc 2 film"):
        n = len(fresh.entities)
        assert updated.names.match(query, n) == fresh.names.match(query, n)
        seeds = fresh.named_entities(query)
        assert seeds and updated.named_entities(query) == seeds
        assert updated.walk(seeds, [("p61", 1.0)], 10) == fresh.walk(seeds, [("p61", 1.0)], 10)


def test_the_cache_parses_only_the_rows_a_batch_rewrote(redis_client, tenant, monkeypatch):
    import shared.infra.store.bm25_cache as cache_module

    store = GraphStore(redis_client, tenant)
    store.save_document(Document(id="d1", tenant=tenant, title="The Marsh"))
    _batch(redis_client, tenant, 0, 30)
    cache = BM25Cache(redis_client, capacity=4, snapshot_bytes=0)
    first = cache.walk(tenant)
    assert first.inputs is not None and len(first.passages) == 30

    _batch(redis_client, tenant, 30, 5)
    _entity(store, "c31", "CREATURE2", "seen again in the marsh")  # a second fragment rewrites an old row
    store.put_chunks([Chunk(id="c99", doc_id="d1", index=99, text="The marsh at night.", tokens=5)])
    redis_client.incr(Keys(tenant).graph_version())
    parsed: list[str] = []
    row_field = cache_module.row_field
    monkeypatch.setattr(cache_module, "row_field", lambda model, raw, name, field: (
        parsed.append(name), row_field(model, raw, name, field))[1])
    walked = cache.walk(tenant)
    assert cache._cache.get((tenant, WALK))[1] is walked and walked is not first
    assert sorted(set(parsed)) == sorted(["CREATURE2", *(f"CREATURE{i}" for i in range(30, 35))])
    fresh = BM25Cache(redis_client, capacity=4, snapshot_bytes=0).walk(tenant)
    for name in ("indptr", "indices", "prob", "degree", "entity_passages"):
        assert np.array_equal(getattr(walked, name), getattr(fresh, name)), name
    assert list(walked.passages) == list(fresh.passages) and "c99" in walked.passages
    marsh = walked.entities.find("THE MARSH")
    assert marsh >= 0 and walked.entity_passages[marsh] == 36  # the document's title links all its passages

