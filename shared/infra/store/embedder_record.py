"""Which embedder made a tenant's vectors, and the refusal of a query whose embedder is another one.

Vectors of two embedders cannot be compared: their dimensions may differ, and when they are the same (the
hashing embedder and the local model both give 256) the scores are meaningless. So each tenant records the
embedder of its vectors (``Keys.vector_embedder``, a hash of the tenant's own: ``name``, ``dims``, ``state``,
``job_id``): the index stage writes it (``shared.pipeline.reembed``), and a query reads it before embedding its
question (``checked_embed``) and refuses with ``embedder_mismatch`` when the deployment embeds with another
embedder, or with ``reembedding`` while an ingestion re-embeds the tenant.

A tenant whose vectors were stored before embedders were recorded has no record. Its embedder is told by
embedding one of its stored chunks again (``reproduces``): the hashing embedder is deterministic and local, so a
query tells it at no cost; an ingestion also tries its own embedder (one embedding call, once per tenant). An
embedder that cannot be told that way is left unknown: queries go on as before (unless the dimensions differ)
and the next ingestion re-embeds the tenant.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys

READY, REEMBEDDING = "ready", "reembedding"
SAME_VECTOR = 0.99  # cosine at which a stored vector counts as made by the embedder that re-made it
UNRECORDED = "an unrecorded embedder"  # the name of a legacy tenant's embedder that could not be told


@dataclass(frozen=True)
class EmbedderRecord:
    name: str
    dims: int | None = None
    state: str = READY  # REEMBEDDING: an ingestion is re-embedding the whole tenant with this embedder
    job_id: str = ""  # the ingestion that started the re-embedding

    def label(self) -> str:
        return f"{self.name} ({self.dims} dims)" if self.dims else self.name

    def same_embedder(self, other: EmbedderRecord) -> bool:
        return self.name == other.name and (not self.dims or not other.dims or self.dims == other.dims)


class EmbedderMismatch(RuntimeError):
    """A query against vectors of another embedder (``embedder_mismatch: ...``) or being re-embedded
    (``reembedding: ...``); its message is the query job's failure cause as it is."""


def describe(embedder) -> EmbedderRecord:
    """The embedder as a record: its name, and its dimensions when known (an endpoint's model tells them with its
    first answer)."""
    return EmbedderRecord(getattr(embedder, "name", "") or "unnamed", getattr(embedder, "dim", None) or None)


def read_record(redis, tenant: str) -> EmbedderRecord | None:
    raw = {to_str(k): to_str(v) for k, v in redis.hgetall(Keys(tenant).vector_embedder()).items()}
    if not raw.get("name"):
        return None
    return EmbedderRecord(raw["name"], int(raw["dims"]) if raw.get("dims") else None, raw.get("state") or READY,
                          raw.get("job_id", ""))


def write_record(redis, tenant: str, record: EmbedderRecord) -> None:
    key = Keys(tenant).vector_embedder()
    pipe = redis.pipeline(transaction=True)
    pipe.delete(key)
    pipe.hset(key, mapping={"name": record.name, "dims": record.dims or "", "state": record.state,
                            "job_id": record.job_id, "at": time.time()})
    pipe.execute()


def forget_record(redis, tenant: str) -> None:
    redis.delete(Keys(tenant).vector_embedder())


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        return -1.0
    return float(x @ y / max(np.linalg.norm(x) * np.linalg.norm(y), 1e-12))


def stored_sample(store, vectors) -> tuple[str, list[float]] | None:
    """(text, stored vector) of one of the tenant's chunks, or None when it has no chunk vectors."""
    sample = vectors.sample_item(store.tenant, "chunks")
    if sample is None:
        return None
    chunk = store.chunks([sample[0]]).get(sample[0])
    return None if chunk is None else (chunk.text, sample[1])


def reproduces(embed: Callable[[list[str]], list[list[float]]], sample: tuple[str, list[float]]) -> bool:
    """Whether ``embed`` makes the sample's stored vector again from its text."""
    text, stored = sample
    return _cosine(embed([text])[0], stored) >= SAME_VECTOR


def hashing_record(sample: tuple[str, list[float]]) -> EmbedderRecord | None:
    """The hashing embedder of the sample's dimensions when it made the sample, else None (no call: it is local)."""
    from shared.infra.llm.embedding import HashingEmbedder

    hashing = HashingEmbedder(len(sample[1]))
    if reproduces(lambda texts: hashing.embed(texts, None), sample):
        return EmbedderRecord(hashing.name, hashing.dim)
    return None


def legacy_record(store, vectors) -> EmbedderRecord | None:
    """What a query can tell of an unrecorded tenant's vectors: the hashing embedder, or an unknown embedder of
    the stored dimensions; None when the tenant has no vectors."""
    sample = stored_sample(store, vectors)
    if sample is None:
        return None
    return hashing_record(sample) or EmbedderRecord(UNRECORDED, len(sample[1]))


def provider_hint(record: EmbedderRecord) -> str:
    """How a deployment embeds with ``record``'s embedder again."""
    from shared.infra.llm.local_embedder import NAME

    if record.name == UNRECORDED:
        return "set GRAPHFLEET_EMBEDDING__PROVIDER back to the embedder that made them"
    if record.name.startswith("hashing-"):
        return "set GRAPHFLEET_EMBEDDING__PROVIDER=hashing back"
    if record.name == NAME:
        return "set GRAPHFLEET_EMBEDDING__PROVIDER=local back"
    return f"set GRAPHFLEET_EMBEDDING__PROVIDER=openai and GRAPHFLEET_EMBEDDING_MODEL={record.name} back"


def refusal(tenant: str, stored: EmbedderRecord, current: EmbedderRecord) -> str | None:
    """Why a query of ``current``'s vectors cannot read ``tenant``'s, or None when it can."""
    if stored.same_embedder(current):
        if stored.state != REEMBEDDING:
            return None
        return (f"reembedding: tenant {tenant}'s vectors are being re-embedded with {current.label()} by ingestion "
                f"job {stored.job_id or '?'}: query again once it has finished (if it failed, ingest again: any "
                "batch finishes the re-embedding)")
    if stored.name == UNRECORDED and current.dims in (None, stored.dims):
        return None  # an unknown embedder of the same dimensions: cannot be told, the next ingestion re-embeds
    made = "are being re-embedded with" if stored.state == REEMBEDDING else "were made by"
    return (f"embedder_mismatch: tenant {tenant}'s vectors {made} {stored.label()}; this deployment embeds with "
            f"{current.label()}: ingest again (any batch re-embeds the tenant) or {provider_hint(stored)}")


def check_tenant(store, vectors, embedder) -> None:
    """Raise :class:`EmbedderMismatch` when ``embedder`` cannot search the tenant's vectors."""
    stored = read_record(store.redis, store.tenant) or legacy_record(store, vectors)
    cause = refusal(store.tenant, stored, describe(embedder)) if stored is not None else None
    if cause:
        raise EmbedderMismatch(cause)


def checked_embed(store, vectors, embedder, ctx) -> Callable[[list[str]], list[list[float]]]:
    """A query's ``embed(texts)``: checks the tenant's embedder before its first call (``check_tenant``, once per
    query: the record read, and for an unrecorded tenant a stored vector compared), so a mode reads vectors only
    when they are this embedder's, and a mode that reads none (BM25 alone) is never refused."""
    checked = False

    def embed(texts: list[str]) -> list[list[float]]:
        nonlocal checked
        if not checked:
            check_tenant(store, vectors, embedder)
            checked = True
        return embedder.embed(texts, ctx)

    return embed
