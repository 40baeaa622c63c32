"""Shared fixtures for the query tests: a small graph in the in-memory reader and vector store."""

from __future__ import annotations

from shared.domain.models import Chunk, Community, CommunityReport, Document, Entity, Finding, Relation
from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.storage import VectorItem
from tests.memory_graph import InMemoryGraphReader, InMemoryVectorStore, hash_embed

CHUNKS = {
    "chunk-1": ("doc-a", "Scrooge is a miser who runs a counting house in London. He hates Christmas."),
    "chunk-2": ("doc-a", "Jacob Marley was Scrooge's business partner. Marley died seven years ago."),
    "chunk-3": ("doc-a", "Bob Cratchit is Scrooge's clerk. Cratchit earns fifteen shillings a week."),
    "chunk-4": ("doc-b", "Tiny Tim is Bob Cratchit's youngest son. Tiny Tim walks with a crutch."),
    "chunk-5": ("doc-b", "The Ghost of Christmas Past shows Scrooge his lonely school days."),
    "chunk-6": ("doc-c", "Fezziwig threw a warm Christmas party for his apprentices, Scrooge among them."),
    "chunk-7": ("doc-c", "The zeppelin quartermaster logged forty barrels of kerosene on Tuesday."),
}
ENTITIES = [
    ("SCROOGE", "person", "A miserly London moneylender who hates Christmas.", ["chunk-1", "chunk-2", "chunk-5"], 5),
    ("MARLEY", "person", "Scrooge's dead business partner.", ["chunk-2"], 1),
    ("BOB CRATCHIT", "person", "Scrooge's underpaid clerk.", ["chunk-3", "chunk-4"], 2),
    ("TINY TIM", "person", "Cratchit's ill youngest son.", ["chunk-4"], 1),
    ("GHOST OF CHRISTMAS PAST", "concept", "A spirit showing Scrooge his past.", ["chunk-5"], 1),
    ("FEZZIWIG", "person", "Scrooge's kind former employer.", ["chunk-6"], 1),
]
RELATIONS = [
    ("SCROOGE", "MARLEY", "Business partners.", 8.0, ["chunk-2"]),
    ("SCROOGE", "BOB CRATCHIT", "Employer and clerk.", 6.0, ["chunk-3"]),
    ("BOB CRATCHIT", "TINY TIM", "Father and son.", 9.0, ["chunk-4"]),
    ("SCROOGE", "GHOST OF CHRISTMAS PAST", "The ghost visits Scrooge.", 5.0, ["chunk-5"]),
    ("SCROOGE", "FEZZIWIG", "Former apprentice and master.", 4.0, ["chunk-6"]),
]


def make_graph(tenant: str = "t1") -> tuple[InMemoryGraphReader, InMemoryVectorStore]:
    r = InMemoryGraphReader(tenant=tenant)
    for cid, (doc, text) in CHUNKS.items():
        r.chunk_map[cid] = Chunk(id=cid, doc_id=doc, index=0, text=text, tokens=len(text.split()))
    for doc in {d for d, _ in CHUNKS.values()}:
        r.document_map[doc] = Document(id=doc, tenant=tenant, title=doc)
    for name, typ, desc, src, deg in ENTITIES:
        docs = sorted({CHUNKS[c][0] for c in src})
        r.entity_map[name] = Entity(name=name, type=typ, description=desc, source_ids=src, doc_ids=docs, degree=deg)
    for s, t, desc, w, src in RELATIONS:
        r.relation_map[(s, t)] = Relation(
            src=s, tgt=t, description=desc, weight=w, source_ids=src, doc_ids=[CHUNKS[c][0] for c in src], rank=3
        )
    comms = [
        Community(id="L0-0", level=0, nodes=[e[0] for e in ENTITIES], children=["L1-0", "L1-1"], occurrence=1.0),
        Community(
            id="L1-0",
            level=1,
            nodes=["SCROOGE", "MARLEY", "GHOST OF CHRISTMAS PAST", "FEZZIWIG"],
            parent="L0-0",
            occurrence=0.6,
        ),
        Community(id="L1-1", level=1, nodes=["BOB CRATCHIT", "TINY TIM"], parent="L0-0", occurrence=0.4),
    ]
    for c in comms:
        r.community_map[c.id] = c
    reps = [
        ("L0-0", "A Christmas Carol cast", "Scrooge, his partner, clerk and ghosts.", 8.0),
        ("L1-0", "Scrooge and his past", "Scrooge, Marley, Fezziwig and the Ghost of Christmas Past.", 7.0),
        ("L1-1", "The Cratchit family", "Bob Cratchit and his son Tiny Tim, poor but loving.", 3.0),
    ]
    for cid, title, summary, rating in reps:
        r.report_map[cid] = CommunityReport(
            community_id=cid,
            level=r.community_map[cid].level,
            title=title,
            summary=summary,
            rating=rating,
            findings=[Finding(summary=summary, explanation=f"{title} matter to the story.")],
        )
    store = InMemoryVectorStore()
    ents = [(n, f"{n} {d}") for n, _, d, _, _ in ENTITIES]
    store.upsert(
        tenant,
        "entities",
        [
            VectorItem(id=f"ent-{i}", vector=v, payload={"name": n})
            for i, ((n, _), v) in enumerate(zip(ents, hash_embed([t for _, t in ents]), strict=True))
        ],
    )
    store.upsert(
        tenant,
        "chunks",
        [
            VectorItem(id=c, vector=v, payload={"doc_id": d})
            for (c, (d, _)), v in zip(CHUNKS.items(), hash_embed([t for _, t in CHUNKS.values()]), strict=True)
        ],
    )
    return r, store


def bm25_provider_for(reader: InMemoryGraphReader):
    idx = {
        "entities": BM25Index.build((e.name, f"{e.name} {e.description}") for e in reader.entity_map.values()),
        "chunks": BM25Index.build((c.id, c.text) for c in reader.chunk_map.values()),
    }
    return lambda tenant, kind: idx.get(kind)


class ScriptedChat:
    """chat(messages, phase) fake: canned text per phase; records calls."""

    def __init__(self, replies: dict[str, str] | None = None, fail_phases: set[str] | None = None):
        self.replies = replies or {}
        self.fail = fail_phases or set()
        self.calls: list[tuple[str, list[dict]]] = []

    def __call__(self, messages, phase):
        self.calls.append((phase, messages))
        if phase in self.fail:
            raise RuntimeError(f"{phase} failed")

        class R:
            text = self.replies.get(phase, "- point one [Data: Sources (chunk-1)]\n- point two")
            prompt_tokens, completion_tokens, model = 100, 20, "gpt-4o-mini"

        return R()
