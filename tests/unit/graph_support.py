"""Test helper: entity and relation mentions saved as extraction records, as the extract stage writes them."""

from __future__ import annotations

from shared.domain.models import Entity, EntityFragment, ExtractionResult, RelationFragment
from shared.infra.store.redis_graph import GraphStore


def save_mentions(store: GraphStore, chunk: str, nodes: list[str], edges, times: int = 2) -> None:
    """``nodes`` and ``edges`` mentioned in ``times`` chunks ``<chunk>/<i>`` (the LLM-free pruning keeps what is
    named twice); not merged."""
    for i in range(times):
        cid = f"{chunk}/{i}"
        store.save_extraction(ExtractionResult(
            chunk_id=cid,
            entities=[EntityFragment(name=n, description=f"about {n}", source_id=cid) for n in nodes],
            relations=[RelationFragment(src=a, tgt=b, description=f"{a} knows {b}", source_id=cid)
                       for a, b in edges]))


def joined_entity(name, frags) -> Entity:
    """A plain merge for store tests: the distinct descriptions joined in order, the chunk ids sorted."""
    descs = sorted({f.description for f in frags})
    return Entity(name=name, description="<SEP>".join(descs), source_ids=sorted({f.source_id for f in frags}))
