"""Folding a key's new fragments into its stored row instead of merging every fragment again (pure).

A hub entity named in every batch holds ever more fragments; merging it from all of them, and summarising them
all again, made each batch dearer than the last. A row records a digest of the fragments it was merged from
(``merged_of``). When the key's fragments are that same set plus fragments of chunks the row does not list yet,
only those are folded in: their description parts are added to the row's description (an LLM summary counts as
one part, so it is summarised again, from itself and the new parts, once enough new parts pile up: LightRAG's
incremental merge), weights are added, keywords, chunk and document ids joined. Anything else (a fragment removed,
or one of the row's own fragments changed) merges every fragment as before (``merge.merge_entity``).

What a fold approximates: the entity type is the majority over the row's type, counted once per chunk it lists,
and the new fragments' types; the description parts keep the order in which they arrived.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from shared.domain.merge import majority_type, merge_descriptions, merge_keywords, split_description, unique_fragments
from shared.domain.models import Entity, EntityFragment, Relation, RelationFragment
from shared.domain.prompts.delimiters import GRAPH_FIELD_SEP


def fragments_digest(fragments: Sequence[EntityFragment | RelationFragment]) -> str:
    """16 hex digits naming a set of fragments (order and repeats do not matter)."""
    h = hashlib.blake2b(digest_size=8)
    for text in sorted({f.model_dump_json() for f in fragments}):
        h.update(text.encode("utf-8", "surrogatepass"))
        h.update(b"\x1e")
    return h.hexdigest()


def new_fragments(row: Entity | Relation | None, fragments: list) -> list | None:
    """The fragments to fold into ``row``, or None when the row cannot take a fold (absent, merged before rows
    kept their digest, or its own fragments are no longer exactly what it was merged from)."""
    if row is None or not row.merged_of:
        return None
    known = set(row.source_ids)
    old = [f for f in fragments if f.source_id in known]
    if {f.source_id for f in old} != known or fragments_digest(old) != row.merged_of:
        return None
    return [f for f in fragments if f.source_id not in known]


def _folded_description(row: Entity | Relation, new: list) -> str:
    parts = [row.description.strip()] if row.summary_of else split_description(row.description)
    seen = set(parts)
    added = [p for p in split_description(merge_descriptions(new)) if p not in seen]
    return GRAPH_FIELD_SEP.join([p for p in parts if p] + added)


def fold_entity(row: Entity, new: list[EntityFragment]) -> Entity:
    """``row`` with ``new`` folded in (description not yet summarised: the merge stage decides)."""
    frags = unique_fragments(new)
    return Entity(
        name=row.name,
        type=majority_type([row.type] * len(row.source_ids) + [f.type for f in frags]),
        description=_folded_description(row, frags),
        source_ids=sorted({*row.source_ids, *(f.source_id for f in frags)}),
        doc_ids=sorted({*row.doc_ids, *(f.doc_id for f in frags if f.doc_id)}),
    )


def fold_relation(row: Relation, new: list[RelationFragment]) -> Relation:
    frags = unique_fragments(new)
    return Relation(
        src=row.src,
        tgt=row.tgt,
        description=_folded_description(row, frags),
        keywords=merge_keywords([row.keywords, *(f.keywords for f in frags)]),
        weight=math.fsum([row.weight, *(f.weight for f in frags)]),
        source_ids=sorted({*row.source_ids, *(f.source_id for f in frags)}),
        doc_ids=sorted({*row.doc_ids, *(f.doc_id for f in frags if f.doc_id)}),
    )
