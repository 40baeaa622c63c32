"""A synthetic tenant of N passages, written into Redis by graphfleet's own stores and pipeline stages.

The graph is ``bench.harness.synthetic_graph.synthetic()``, the walk benchmark's (~8 entity mentions per passage,
30% of them Zipf-recurring names, ~6 entities per passage, ~3 relations per entity).
Each passage becomes what an ingestion leaves behind, written the way the ingestion writes it:

* a document (``DocumentStore.put_document``) whose title is the passage's first entity (the walk links a passage
  to its title), and one chunk of ~1 KB naming the passage's entities amid filler words (real words: the
  tokenizer's one-token words, Zipf-drawn), with its source row's token count (``chunk_stage``'s
  ``stored_counts``), stored in batches (``put_chunks``);
* the chunk's extraction: one fragment per entity it names (a type and a short description) and per relation
  (``ExtractionStore.save_extraction``);
* the merged entity and relation rows, the edge hash and the graph version: the merge stage itself
  (``merge_stage.plan_batches`` and ``run_merge_batch``, without an LLM, so a description of many fragments is cut
  to ``merge.summary_max_tokens`` instead of summarised);
* optionally the communities, the degrees and extractive reports (``cluster_stage.run_cluster``, a whole-graph
  Leiden, and ``report_stage.run_report_batch`` without an LLM); without them only the degrees are written;
* the vectors of both collections and the embedder record: the index stage itself (``index_stage.run_index``) with
  an embedder that answers each text with a random unit vector of 256 dimensions (seeded by the text) under the
  name of the local embedder, so a stack without an LLM queries it without re-embedding or refusing. Embedding
  100,000 passages for real is not needed to time loading them: the vector scores are meaningless, the BM25 half
  of the search finds the passages a question names.

The batches of each step (500 passages, a merge task's keys, a report task's communities) are spread over worker
processes (``build_tenant(workers=)``), as the pipeline spreads its tasks; the tenant is the same whichever process
writes which batch (each batch's words are seeded by the batch).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import multiprocessing
import re
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from bench.harness.synthetic_graph import synthetic
from shared.config import get_settings
from shared.domain.ids import chunk_id_for, content_hash, doc_id_for
from shared.domain.models import Chunk, Document, EntityFragment, ExtractionResult, RelationFragment
from shared.domain.query.row_counts import source_body, stored_counts
from shared.domain.storage import VECTOR_KINDS
from shared.domain.tokens import count_tokens_batch, get_encoding
from shared.infra.llm.local_embedder import DIMENSIONS, NAME
from shared.infra.redis.conn import connect
from shared.infra.redis.keys import Keys
from shared.infra.store.bm25_cache import WALK
from shared.infra.store.redis_graph import EDGES, GraphStore
from shared.infra.store.redis_vectors import RedisVectorStore, rowids_kind
from shared.infra.tenancy.usage import CallContext

TEXT_BYTES = 1000  # a passage's text is cut after the sentence that reaches this length
WRITE_BATCH = 500  # passages written per batch (chunks per ``put_chunks``)
SNAPSHOT_KINDS = (WALK, EDGES, *VECTOR_KINDS, *map(rowids_kind, VECTOR_KINDS))  # what a cold worker loads (``idxsnap``)
FanOut = Callable[[Callable, list[tuple]], list]  # fan_out(fn, jobs): [fn(*job) for job in jobs], maybe in processes
TYPES = ("person", "organization", "geo", "event", "concept")
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "be", "da", "fe", "go", "hu", "ji", "ke", "la",
              "mo", "nu", "pa", "qi", "re", "so", "tu", "va", "we", "xi", "yo", "zu", "bra", "cle", "dri", "fro")
VOCABULARY = 4000  # filler words, drawn with Zipf-like frequencies (a few very common, most rare)
_TOKEN_WORD = re.compile(rb" [a-z]{4,9}")


def _word(n: int, syllables: int) -> str:
    """``n`` written in syllables (base 32, at least ``syllables`` of them): distinct numbers, distinct words."""
    out = []
    while n or len(out) < syllables:
        n, digit = divmod(n, len(_SYLLABLES))
        out.append(_SYLLABLES[digit])
    return "".join(reversed(out))


def entity_name(rank: int) -> str:
    """A two-word upper-case name, one per rank: a first word of 1,024 (names share it, as people share first
    names) and a last word of its own. Multiplying by an odd number permutes the low 20 bits (the high ones are
    kept), so the last words are distinct and neighbouring ranks look unalike."""
    last = (rank & ~0xFFFFF) | ((rank * 40503 + 7) & 0xFFFFF)
    return f"{_word(rank * 613 % 1024, 2)} {_word(last, 4)}".upper()


@dataclass
class Shape:
    """Who is in which passage: passage index -> entity names named there, and the relations filed there."""

    passages: int
    names: list[list[str]]
    relations: list[list[tuple[str, str, float]]]


def tenant_shape(passages: int, seed: int = 7) -> Shape:
    """``synthetic()``'s graph with each relation given the passage it is read from: a relation of consecutive
    names of a passage (``synthetic``'s first edges, in its own order) comes from that passage, an extra random
    pair from its first end's first passage. Self-loops are dropped (an extractor files none)."""
    pids, sources, edges = synthetic(passages, seed)
    index = {p: i for i, p in enumerate(pids)}
    rank = {name: int(name[1:]) for name in sources}
    names: list[list[str]] = [[] for _ in pids]
    for name, ps in sources.items():
        for p in dict.fromkeys(ps):
            names[index[p]].append(entity_name(rank[name]))
    by_passage: dict[str, list[str]] = {}  # rebuilt as ``synthetic`` builds it, to know each edge's passage
    for name, ps in sources.items():
        for p in ps[:50]:
            by_passage.setdefault(p, []).append(name)
    origin = [index[p] for p, ents in by_passage.items() for _ in zip(ents, ents[1:], strict=False)]
    relations: list[list[tuple[str, str, float]]] = [[] for _ in pids]
    for i, (a, b, w) in enumerate(edges):
        if a != b:
            where = origin[i] if i < len(origin) else index[sources[a][0]]
            relations[where].append((entity_name(rank[a]), entity_name(rank[b]), w))
    return Shape(passages, names, relations)


@functools.lru_cache
def _redis(url: str):
    """One client per process and URL (the batches of a process share it)."""
    return connect(url)


@functools.lru_cache
def token_words(model: str | None, count: int = VOCABULARY) -> list[str]:
    """The first ``count`` tokens of the model's encoding that are a space and a lower-case word of 4-9 letters,
    in the encoding's order (roughly by frequency): real words, one token each, so a passage of them counts about
    as many tokens per KB as English prose (invented words would split into several)."""
    enc, words = get_encoding(model), []
    for token in range(enc.n_vocab):
        try:
            raw = enc.decode_single_token_bytes(token)
        except KeyError:  # ids the encoding leaves unassigned
            continue
        if _TOKEN_WORD.fullmatch(raw):
            words.append(raw[1:].decode())
            if len(words) == count:
                break
    return words


class Words:
    """Filler words with Zipf-like frequencies (the encoding's order), drawn from one seeded generator."""

    def __init__(self, seed: int | list[int], model: str | None):
        self.rng = np.random.default_rng(seed)
        self.vocabulary = token_words(model)
        weights = 1.0 / (np.arange(len(self.vocabulary)) + 10.0)
        self.cdf = np.cumsum(weights) / weights.sum()

    def draw(self, n: int) -> list[str]:
        return [self.vocabulary[i] for i in np.searchsorted(self.cdf, self.rng.random(n))]


def passage_text(names: list[str], words: Words) -> str:
    """A sentence per entity (its name, then filler), then filler sentences up to ``TEXT_BYTES``."""
    sentences, size = [], 0
    for subject in itertools.chain((n.title() for n in names), itertools.repeat(None)):
        if size >= TEXT_BYTES:
            break
        filler = words.draw(12)
        sentence = (f"{subject} " if subject else filler.pop(0).capitalize() + " ") + " ".join(filler) + "."
        sentences.append(sentence)
        size += len(sentence) + 1
    return " ".join(sentences)


def _type(name: str) -> str:
    return TYPES[zlib.crc32(name.encode()) % len(TYPES)]


def extraction(names: list[str], relations: list[tuple[str, str, float]], chunk: Chunk, words: Words
               ) -> ExtractionResult:
    """What an extractor would say of the passage: each name with a short description, each relation."""
    ents = [EntityFragment(name=n, type=_type(n), description=f"{n.title()} ({_type(n)}): " + " ".join(
        words.draw(10)) + ".", source_id=chunk.id, doc_id=chunk.doc_id) for n in names]
    rels = [RelationFragment(src=a, tgt=b, description=f"{a.title()} and {b.title()} " + " ".join(words.draw(8)) + ".",
                             keywords=", ".join(words.draw(2)), weight=w, source_id=chunk.id, doc_id=chunk.doc_id)
            for a, b, w in relations]
    return ExtractionResult(chunk_id=chunk.id, entities=ents, relations=rels)


def write_passages(url: str, tenant: str, seed: int, first: int, names: list[list[str]],
                   relations: list[list[tuple[str, str, float]]], model: str | None) -> None:
    """One batch of passages (``first`` onwards): their documents, their chunks in one ``put_chunks``, their
    extractions. The filler words are seeded by the batch: the same tenant whichever process writes it."""
    store, words = GraphStore(_redis(url), tenant), Words([seed, first], model)
    texts = [passage_text(ns, words) for ns in names]
    counts = stored_counts([source_body(t) for t in texts], model)  # as the chunk stage stores them
    chunks = [Chunk(id=chunk_id_for(t), doc_id=doc_id_for(t), index=0, text=t, tokens=n, start=0, end=len(t),
                    row_tokens=c, row_digest=d)
              for t, n, (c, d) in zip(texts, count_tokens_batch(texts, model), counts, strict=True)]
    now = time.time()
    for ns, chunk in zip(names, chunks, strict=True):
        store.put_document(Document(id=chunk.doc_id, tenant=tenant, title=ns[0].title(), chunk_ids=[chunk.id],
                                    text_hash=content_hash(chunk.text), status="processed", created_at=now), chunk.text)
    store.put_chunks(chunks)
    for ns, rels, chunk in zip(names, relations, chunks, strict=True):
        store.save_extraction(extraction(ns, rels, chunk, words))


def merge_batch(url: str, tenant: str, entities: list[str], relations: list[str]) -> None:
    """One merge task's batch, without an LLM."""
    from shared.pipeline.merge_stage import run_merge_batch

    run_merge_batch(GraphStore(_redis(url), tenant), entities, relations, get_settings(), None)


def _llm_like(settings):
    """The settings of an ingestion with an LLM where clustering is concerned: every entity is clustered (the
    LLM-free "fast" strategy prunes rare ones first)."""
    return settings.model_copy(update={"extraction": settings.extraction.model_copy(update={"strategy": "llm"})})


def report_batch(url: str, tenant: str, community_ids: list[str]) -> None:
    """One report task's batch: extractive reports (no LLM)."""
    from shared.pipeline.report_stage import run_report_batch

    run_report_batch(GraphStore(_redis(url), tenant), community_ids, _llm_like(get_settings()), None)


def cluster_and_report(store: GraphStore, url: str, fan_out: FanOut) -> int:
    """A whole-graph clustering (which writes the degrees), then the reports wave after wave, each wave's
    batches side by side, as the cluster and report stages run them; how many communities."""
    from shared.pipeline.cluster_stage import run_cluster

    settings = get_settings()
    waves = run_cluster(store, _llm_like(settings))
    per_task = settings.report.extractive_per_task
    for wave in sorted(waves):
        ids = waves[wave]
        fan_out(report_batch, [(url, store.tenant, ids[i : i + per_task]) for i in range(0, len(ids), per_task)])
    return sum(map(len, waves.values()))


def degrees_only(store: GraphStore) -> None:
    """The degrees a clustering would write, without clustering (``--no-communities``)."""
    from shared.pipeline.cluster_stage import degrees_of

    store.update_degrees(degrees_of(store.edge_list()), [], store.degree_deltas())


class RandomEmbedder:
    """A random unit vector per text (seeded by the text: the same text, the same vector), named and sized as the
    local embedder, so the tenant's embedder record is the one a stack without an LLM queries with."""

    lexical = False

    def __init__(self):
        self.name, self.dim = NAME, DIMENSIONS

    def embed(self, texts, ctx=None) -> list[np.ndarray]:
        out = []
        for text in texts:
            v = np.random.default_rng(zlib.crc32(text.encode())).standard_normal(self.dim).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return out


def index_all(store: GraphStore) -> None:
    """The index stage: both collections' vectors and the embedder record."""
    from shared.pipeline.index_stage import run_index

    ctx = CallContext(tenant=store.tenant, stage="embed", job_id="synthetic", queue="indexer")
    run_index(store, RedisVectorStore(store.redis), RandomEmbedder(), ctx, batch=500, parallel=2)


@dataclass
class BuiltTenant:
    """What was written and how long each step took."""

    tenant: str
    shape: Shape
    seconds: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)

    def questions(self, seed: int = 11) -> Iterator[str]:
        """Endless distinct questions naming two entities of a random passage (BM25 finds the passage)."""
        rng = np.random.default_rng(seed)
        for i in itertools.count():
            names = self.shape.names[int(rng.integers(0, self.shape.passages))]
            a, b = names[0], names[1 % len(names)]
            yield f"How is {a.title()} connected to {b.title()}? ({i})"


@contextlib.contextmanager
def fan_out_pool(workers: int) -> Iterator[FanOut]:
    """``fan_out(fn, jobs)``: ``fn(*job)`` for every job, in this process (``workers`` 1) or in that many fresh
    processes (a merge or a report batch is CPU-bound Python: the pipeline runs its tasks in several processes
    too), returning when all are done; a job's error is raised."""
    if workers <= 1:
        yield lambda fn, jobs: [fn(*job) for job in jobs]
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield lambda fn, jobs: [f.result() for f in [pool.submit(fn, *job) for job in jobs]]


def _steps(built: BuiltTenant, url: str, seed: int, communities: bool, fan_out: FanOut):
    """(name, step) in the pipeline's order: rows, merge, clustering and reports (or degrees), index."""
    model, tenant, shape = get_settings().llm_model, built.tenant, built.shape
    store = GraphStore(_redis(url), tenant)
    batches = range(0, shape.passages, WRITE_BATCH)

    def merge() -> None:
        from shared.pipeline.merge_stage import plan_batches

        plans = plan_batches(store, get_settings().merge.entities_per_task)
        fan_out(merge_batch, [(url, tenant, b["entities"], b["relations"]) for b in plans])

    return [
        ("rows", lambda: fan_out(write_passages, [
            (url, tenant, seed, i, shape.names[i : i + WRITE_BATCH], shape.relations[i : i + WRITE_BATCH], model)
            for i in batches])),
        ("merge", merge),
        ("cluster", lambda: built.sizes.update(communities=cluster_and_report(store, url, fan_out)) if communities
         else degrees_only(store)),
        ("index", lambda: index_all(store)),
    ]


def build_tenant(url: str, tenant: str, passages: int, communities: bool = True, seed: int = 7, workers: int = 1,
                 say: Callable[[str], None] = lambda _m: None) -> BuiltTenant:
    """Write the synthetic tenant (see the module docstring) into the Redis at ``url``, batches spread over
    ``workers`` processes; ``say`` hears each step as it ends."""
    built = BuiltTenant(tenant, tenant_shape(passages, seed))
    with fan_out_pool(workers) as fan_out:
        for name, step in _steps(built, url, seed, communities, fan_out):
            started = time.perf_counter()
            step()
            built.seconds[name] = round(time.perf_counter() - started, 2)
            say(f"{name}: {built.seconds[name]} s")
    store = GraphStore(_redis(url), tenant)
    built.sizes.update(passages=passages, chunks=store.redis.scard(store.k.chunks()), **store.graph_sizes())
    return built


def snapshot_sizes(redis, tenant: str) -> dict[str, int]:
    """Bytes of each stored index snapshot (0: none)."""
    k = Keys(tenant)
    return {kind: int(redis.hget(k.index_snapshot(kind), "size") or 0) for kind in SNAPSHOT_KINDS}


def drop_snapshots(redis, tenant: str) -> None:
    """Delete the tenant's index snapshots: a cold process then builds every index from the rows."""
    k = Keys(tenant)
    redis.delete(*(k.index_snapshot(kind) for kind in SNAPSHOT_KINDS))


def warm_snapshots(redis_url: str, tenant: str) -> float:
    """What an ingestion's announcement makes a query worker do (``warmup.warm_tenant``, which writes the
    snapshots as it builds each index), in this process with a query worker's settings; seconds."""
    from shared.infra.store.bm25_cache import BM25Cache
    from shared.infra.store.warmup import warm_tenant

    settings = get_settings()
    redis = connect(redis_url)
    bm25 = BM25Cache(redis, synonyms=settings.embedding.synonym_threshold is not None,
                     max_bytes=settings.query.index_cache_mb * 2**20,
                     snapshot_bytes=settings.query.index_snapshot_mb * 2**20)
    return warm_tenant(redis, tenant, bm25, RedisVectorStore(redis), settings.llm_model)


def local_context(redis, tenant: str, question: str, **param):
    """A context-only local query in this process through the worker's engine (``answer_query`` with the
    per-process caches), its question embedded as one of the tenant's stored vectors (as the warm-up does);
    ``param``: more ``QueryParam`` fields."""
    from shared.domain.query.engine import answer_query
    from shared.domain.query.params import QueryParam
    from shared.infra.store.bm25_cache import BM25Cache
    from shared.infra.store.warmup import stored_vector_embed

    bm25, vectors = BM25Cache(redis), RedisVectorStore(redis)
    store = GraphStore(redis, tenant, snapshots=bm25.snapshots)
    param = QueryParam(query=question, mode="local", only_need_context=True, model=get_settings().llm_model, **param)
    return answer_query(param, store, vectors, stored_vector_embed(vectors, tenant), None, bm25,
                        walk_provider=bm25.walk)
