"""Graph-walk passage ranking, score fusion that keeps its better input, and graph rows cut to fit."""

import csv
import io

from shared.domain.models import Chunk, Entity, Relation
from shared.domain.query.context_local import build_local_context, entity_section
from shared.domain.query.engine import answer_query
from shared.domain.query.params import QueryParam, resolve
from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.fusion import fuse
from shared.domain.retrieval.graph_walk import WalkIndex
from shared.domain.retrieval.walk_build import build_walk
from shared.domain.tokens import count_tokens
from tests.memory_graph import InMemoryGraphReader

# A two-hop question: "Which river flows through the birthplace of the composer of Ode Nocturne?"
# p-ode names the composer (Lena Varga); p-varga says where she was born (Kestrel Falls); p-kestrel, the
# answer passage, shares no word with the question: only the entity Kestrel Falls leads there.
PASSAGES = {
    "p-ode": "Ode Nocturne is a piano piece by the composer Lena Varga, first played in 1921.",
    "p-varga": "Lena Varga was born in Kestrel Falls and studied in Vienna.",
    "p-kestrel": "Kestrel Falls lies on the Marrow, whose mills ground grain for centuries.",
}
DISTRACTORS = {f"p-d{i}": f"Composer number {i} wrote a nocturne about a stream birthplace piece {i}."
               for i in range(12)}
QUESTION = "Which stream flows through the birthplace of the composer of Ode Nocturne?"
ENTITIES = {
    "ODE NOCTURNE": ["p-ode"],
    "LENA VARGA": ["p-ode", "p-varga"],
    "KESTREL FALLS": ["p-varga", "p-kestrel"],
    "VIENNA": ["p-varga"],
    "MARROW": ["p-kestrel"],
    **{f"COMPOSER {i}": [f"p-d{i}"] for i in range(12)},
}
EDGES = [("ODE NOCTURNE", "LENA VARGA", 2.0), ("LENA VARGA", "KESTREL FALLS", 1.0), ("KESTREL FALLS", "MARROW", 1.0)]


def _bm25() -> BM25Index:
    return BM25Index.build({**PASSAGES, **DISTRACTORS}.items())


def _index() -> WalkIndex:
    return build_walk(list(PASSAGES) + list(DISTRACTORS), ENTITIES, EDGES)


def test_walk_finds_the_second_hop_passage_through_the_bridge_entity():
    bm25 = _bm25().query(QUESTION, top_k=20)
    assert "p-kestrel" not in [p for p, _ in bm25]  # no word in common: keyword search cannot find it
    index = _index()
    named = index.named_entities(QUESTION)
    assert [n for n, _ in named] == ["ODE NOCTURNE"]
    ranked = [p for p, _ in index.rank(named, bm25[:3], top_k=20)]
    # the seeded passages first, then the chain through LENA VARGA and KESTREL FALLS; distractors that
    # were not seeded share no entity with the chain and are not reached at all
    assert ranked == ["p-ode", "p-d0", "p-d1", "p-varga", "p-kestrel"]


def test_walk_result_has_entity_scores_and_counts_its_seeds():
    index = _index()
    res = index.walk([("ODE NOCTURNE", 1.0), ("NOT IN GRAPH", 1.0)], [("p-ode", 2.0), ("p-zzz", 1.0)], top_k=3)
    assert (res.entity_seeds, res.passage_seeds) == (1, 1)
    assert res.entities[0][0] in {"ODE NOCTURNE", "LENA VARGA"} and len(res.passages) == 3
    assert index.walk([], [], top_k=3).passages == []


def test_seeds_weigh_by_their_rank_not_by_the_scale_of_their_scores():
    """A runaway first score (a rare name, a passage far above the rest) must not take the whole restart
    mass: the second seed of a two-hop question is often its other hop."""
    index = _index()
    skewed = index.walk([("ODE NOCTURNE", 50.0), ("MARROW", 0.01)], [("p-ode", 1000.0), ("p-varga", 0.001)], top_k=5)
    level = index.walk([("ODE NOCTURNE", 1.0), ("MARROW", 0.9)], [("p-ode", 1.0), ("p-varga", 0.9)], top_k=5)
    assert skewed.passages == level.passages and skewed.entities == level.entities
    scores = dict(skewed.passages)
    assert scores["p-varga"] > 0.3 * scores["p-ode"]  # the second passage seed keeps a real share
    assert "p-kestrel" in scores  # reached from MARROW, the second entity seed, as much as from the chain


def test_two_adjacent_question_words_name_an_entity_written_as_one_word():
    index = build_walk(["p1", "p2"], {"SPACEDEV": ["p1"], "SIERRA NEVADA CORPORATION": ["p2"]}, [])
    assert [n for n, _ in index.named_entities("Who runs the corporation that owns Space Dev?")] == ["SPACEDEV"]
    assert index.named_entities("Who runs the corporation that owns space?") == []  # no join, no match


def _reader() -> InMemoryGraphReader:
    r = InMemoryGraphReader()
    for i, (pid, text) in enumerate({**PASSAGES, **DISTRACTORS}.items()):
        r.chunk_map[pid] = Chunk(id=pid, doc_id=f"doc-{pid}", index=i, text=text, tokens=count_tokens(text))
    for name, sources in ENTITIES.items():
        r.entity_map[name] = Entity(name=name, description=f"{name.title()} is mentioned.", source_ids=sources)
    for a, b, w in EDGES:
        r.relation_map[(a, b)] = Relation(src=a, tgt=b, weight=w, description=f"{a} relates to {b}.")
    return r


def test_graph_mode_puts_the_bridge_passage_in_a_context_that_has_room_for_three_passages():
    reader = _reader()
    bm25 = _bm25()
    indexes = lambda _tenant, kind: bm25 if kind == "chunks" else None  # noqa: E731
    param = QueryParam(mode="graph", query=QUESTION, only_need_context=True, max_total_tokens=360, model="gpt-4",
                       buffer_tokens=0, output_reserve=0, walk_passage_seeds=3)
    res = answer_query(param, reader, None, None, None, indexes, lexical_embedder=True)
    assert "on the Marrow" in res.context and "p-kestrel" in res.sources.chunks
    assert res.details["walk"]["named_entities"] == ["ODE NOCTURNE"]
    assert res.details["candidates"][:3] and res.budget.total_tokens <= res.budget.total_allowed
    naive = answer_query(param.model_copy(update={"mode": "naive"}), reader, None, None, None, indexes,
                         lexical_embedder=True)
    assert "p-kestrel" not in naive.sources.chunks  # plain retrieval cannot reach it


# ------------------------------------------------------------------ fusion
RELEVANT = {"r1", "r2", "r3"}


def _recall_at(ranked, k: int = 3) -> float:
    return len(RELEVANT & {i for i, _ in ranked[:k]}) / len(RELEVANT)


def _fixture(strong_first: bool):
    """A strong list (relevant items first by a wide margin) and a weak one (flat scores, mostly noise,
    the relevant items somewhere in the middle), as BM25 and a hashing embedder give on multi-hop
    questions (or the other way round, for a semantic embedder and a paraphrased question)."""
    strong = [("r1", 14.0), ("r2", 12.5), ("r3", 11.0)] + [(f"n{i}", 4.0 - i * 0.1) for i in range(20)]
    noise = iter(f"n{i}" for i in range(20))
    weak_ids = [next(noise) if i not in (8, 10, 13) else {8: "r1", 10: "r2", 13: "r3"}[i] for i in range(23)]
    weak = [(item, 0.31 - i * 0.002) for i, item in enumerate(weak_ids)]
    return (strong, weak) if strong_first else (weak, strong)


def test_zscore_fusion_is_never_below_its_better_input_in_either_direction():
    for strong_is_keyword in (True, False):
        keyword, vector = _fixture(strong_is_keyword)
        best = max(_recall_at(keyword), _recall_at(vector))
        assert _recall_at(fuse(keyword, vector, 0.5, "zscore")) >= best == 1.0


def test_rrf_drags_a_strong_list_down_where_zscore_does_not():
    keyword, vector = _fixture(True)
    rrf_order = [i for i, _ in fuse(keyword, vector, 0.5, "rrf")]
    z_order = [i for i, _ in fuse(keyword, vector, 0.5, "zscore")]
    assert z_order[:3] == ["r1", "r2", "r3"] and rrf_order[:3] != ["r1", "r2", "r3"]


def test_zscore_fusion_with_an_empty_or_flat_list_keeps_the_other_order():
    keyword, _ = _fixture(True)
    assert [i for i, _ in fuse(keyword, [], 0.5, "zscore")][:3] == ["r1", "r2", "r3"]
    flat = [(i, 0.5) for i, _ in reversed(keyword)]
    assert [i for i, _ in fuse(keyword, flat, 0.5, "zscore")][:3] == ["r1", "r2", "r3"]


# ------------------------------------------------------------------ graph rows cut to fit
def test_a_long_first_entity_is_cut_at_a_sentence_boundary_instead_of_leaving_the_section_empty():
    long_desc = " ".join(f"Sentence number {i} about the merged entity." for i in range(200))
    entity = Entity(name="MERGED", type="concept", description=long_desc, source_ids=["c1"])
    section, evidence = entity_section([entity], cap=120, model="gpt-4")
    from shared.domain.query.budget import allocate

    out = allocate([section], 120, "gpt-4")
    assert out.kept_index["entities"] == [0] and out.reports[0].partial_item
    text = out.texts["entities"]
    assert "Sentence number 0 about the merged entity." in text and count_tokens(text, "gpt-4") <= 120
    row = next(csv.reader(io.StringIO(text.split("\n")[3])))
    assert row[1] == "MERGED" and row[3].endswith("entity.")  # whole sentences only
    assert evidence[0].text.startswith("MERGED: Sentence number 0") and len(evidence[0].text) < len(long_desc)


def test_local_context_entities_section_is_not_empty_when_the_top_entity_description_is_huge():
    reader = _reader()
    reader.entity_map["ODE NOCTURNE"] = Entity(
        name="ODE NOCTURNE", description=" ".join(f"Fact {i} about the piece." for i in range(600)),
        source_ids=["p-ode"], degree=50)
    p = resolve(QueryParam(query=QUESTION, max_total_tokens=1200, model="gpt-4", budget_split="fixed"))
    ctx, rep, src = build_local_context(reader, [("ODE NOCTURNE", 1.0), ("LENA VARGA", 0.5)], p, [("p-ode", 1.0)])
    assert "ODE NOCTURNE" in src.entities and rep.section("entities").kept >= 1
    assert count_tokens(ctx, "gpt-4") <= rep.total_allowed


def _exact_pagerank(index: WalkIndex, seeds: dict[int, float], damping: float = 0.5):
    """Personalized PageRank by power iteration to convergence over a dense transition matrix built from
    the CSR arrays' weights (rows of nodes with no edge restart at the seeds)."""
    import numpy as np

    n = index.node_count
    weights = np.zeros((n, n))
    for u in range(n):
        for arc in range(index.indptr[u], index.indptr[u + 1]):
            weights[u, index.indices[arc]] += index.prob[arc] * index.degree[u]
    assert np.allclose(weights, weights.T)  # undirected: each edge both ways, with one weight
    restart = np.zeros(n)
    restart[list(seeds)] = list(seeds.values())
    restart /= restart.sum()
    out = weights.sum(axis=1)
    step = np.where(out[:, None] > 0, weights / np.where(out > 0, out, 1.0)[:, None], restart[None, :])
    x = restart.copy()
    for _ in range(200):
        x = damping * x @ step + (1 - damping) * restart
    return x


def _random_graph(passages: int = 400, seed: int = 5) -> WalkIndex:
    """Passages of ~6 entities each, a few names shared by many passages, relations between entities."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sources: dict[str, list[str]] = {}
    for i in range(passages):
        for e in set(rng.zipf(1.8, size=6) % (passages * 3)):
            sources.setdefault(f"E{e}", []).append(f"p{i}")
    names = sorted(sources)
    pairs = {tuple(sorted((names[a], names[b]))): float(rng.integers(1, 6))  # one edge per pair, as a store holds
             for a, b in rng.integers(0, len(names), (300, 2))}
    edges = [(a, b, w) for (a, b), w in pairs.items()]
    return build_walk([f"p{i}" for i in range(passages + 3)], sources, edges)  # 3 passages with no edge


def _best(scores, k: int) -> list[int]:
    import numpy as np

    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


def test_push_is_within_its_bound_of_the_exact_pagerank_and_ranks_the_same():
    import numpy as np

    from shared.domain.retrieval.graph_walk import EPSILON

    for index, seeds in ((_index(), {0: 1.0, 3: 0.5, 17: 2.0}),
                         (_random_graph(), {5: 1.0, 77: 0.5, 402: 0.25, 410: 1.0, 450: 2.0})):
        exact = _exact_pagerank(index, seeds)
        push = index.pagerank(seeds, 0.5)
        approx = np.zeros(index.node_count)
        approx[push.nodes] = push.scores
        error = exact - approx
        degree = index.degree
        assert error.min() > -1e-12 and (error < EPSILON * degree).all()  # below, by under eps per degree
        assert abs(error.sum() - push.residual) < 1e-9  # the L1 error is the residual it reports,
        assert push.residual < 0.5 * EPSILON * degree.sum()  # under damping * eps * the graph's volume
        n_p = len(index.passages)  # the walk ranks passages and entities apart: each ranking is the same, but
        for part in (slice(0, n_p), slice(n_p, None)):  # for two nodes nearer than their error bounds
            top = _best(approx[part], 10)
            assert sorted(top) == sorted(_best(exact[part], 10))
            ex, bound = exact[part], EPSILON * degree[part]
            for i, j in zip(top, top[1:], strict=False):
                assert ex[i] >= ex[j] - bound[i] - bound[j]


def test_a_coarser_push_does_less_work_and_keeps_its_bound():
    import numpy as np

    index = _random_graph()
    seeds = {5: 1.0, 450: 2.0}
    exact = _exact_pagerank(index, seeds)
    fine, coarse = index.pagerank(seeds, 0.5, 1e-6), index.pagerank(seeds, 0.5, 1e-3)
    assert coarse.residual > fine.residual
    approx = np.zeros(index.node_count)
    approx[coarse.nodes] = coarse.scores
    degree = index.degree
    assert ((exact - approx) < 1e-3 * degree).all() and abs((exact - approx).sum() - coarse.residual) < 1e-9


def test_a_seed_with_no_edge_keeps_its_restart_mass():
    index = _random_graph()
    push = index.pagerank({401: 1.0}, 0.5)  # passage 401 has no entity: every step restarts there
    assert list(push.nodes) == [401] and abs(push.scores[0] - 1.0) < 1e-4


def test_global_context_shows_the_groups_relevant_to_the_question_first():
    from shared.domain.query.budget import BudgetReport
    from shared.domain.query.context_global import GlobalPlan, MapGroup, visible_context

    topics = ["whaling ships and harpoons", "opera singers in Milan", "volcanoes of Iceland"]
    groups = [MapGroup(index=i, report_ids=[f"c{i}"], context=f"-----Reports-----\nc{i},{t}", tokens=20)
              for i, t in enumerate(topics)]
    plan = GlobalPlan(groups=groups, selected=[f"c{i}" for i in range(3)], candidates=3, group_budget=30,
                      budget=BudgetReport(), context_budget=30)
    first = {q: visible_context(plan, "gpt-4", q)[0] for q in ("Which volcanoes erupted in Iceland?",
                                                             "Who sang opera in Milan?")}
    assert "volcanoes" in first["Which volcanoes erupted in Iceland?"]
    assert "opera" in first["Who sang opera in Milan?"] and "volcanoes" not in first["Who sang opera in Milan?"]


def test_document_titles_link_passages_to_the_entity_they_are_about():
    from shared.domain.retrieval.walk_build import with_titles

    sources = {"SAMUEL FULLER": ["p-helmet"], "SAMUEL FULLER SAMUEL": ["p-fuller"], "ED WOOD": ["p-x"]}
    titles = {"p-fuller": "Samuel Fuller", "p-wood": "Ed Wood (film)", "p-new": "Kestrel Falls", "p-none": "",
              "p-file": "ed_wood.txt"}
    linked = with_titles(sources, titles)
    assert linked["SAMUEL FULLER"] == ["p-helmet", "p-fuller"]  # the extractor's run-on name is not needed
    assert linked["ED WOOD"] == ["p-x", "p-wood", "p-file"]  # "(film)" and a file name's ".txt" dropped
    assert linked["KESTREL FALLS"] == ["p-new"]  # a title node of its own
    assert sources["SAMUEL FULLER"] == ["p-helmet"]  # the input is not changed
    index = build_walk(["p-helmet", "p-fuller"], sources, [], {"p-fuller": "Samuel Fuller"})
    ranked = [p for p, _ in index.rank([("SAMUEL FULLER", 1.0)], [], top_k=5)]
    assert set(ranked) == {"p-helmet", "p-fuller"}
