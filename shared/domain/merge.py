"""Merging entity and relation fragments, and map-reduce summarisation of descriptions (pure).

Each chunk's view of an entity/relation is one fragment (one field of a Redis hash keyed by chunk
id); a merged record computed here from *all* fragments is independent of fragment order (commutative) and of
repeated fragments (idempotent). A row whose fragments only gained new ones since is folded instead
(``merge_fold``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import TypeVar

from shared.config import MergeSettings
from shared.domain.models import Entity, EntityFragment, Relation, RelationFragment
from shared.domain.packing import group_rows
from shared.domain.prompts.delimiters import GRAPH_FIELD_SEP
from shared.domain.prompts.summarize_descriptions import TEMPLATE as SUMMARY_TEMPLATE
from shared.domain.tokens import count_tokens_batch, truncate_text

UNKNOWN_TYPE = "unknown"

F = TypeVar("F", EntityFragment, RelationFragment)
Summarize = Callable[[str, list[str]], str]


def relation_key(a: str, b: str) -> tuple[str, str]:
    """Order-independent key of an (undirected) relation: (A, B) and (B, A) are the same edge."""
    return (a, b) if a <= b else (b, a)


def split_description(description: str) -> list[str]:
    """The non-empty parts of a ``<SEP>``-joined description."""
    return [part.strip() for part in description.split(GRAPH_FIELD_SEP) if part.strip()]


def unique_fragments(fragments: Iterable[F]) -> list[F]:
    """Drop exact duplicates (a re-delivered fragment must not count twice)."""
    seen: dict[str, F] = {}
    for fragment in fragments:
        seen.setdefault(fragment.model_dump_json(), fragment)
    return [seen[k] for k in sorted(seen)]


def merge_descriptions(fragments: Iterable[EntityFragment | RelationFragment]) -> str:
    """Distinct description parts, ordered by (source chunk id, text), joined with ``<SEP>``."""
    parts = sorted({(f.source_id, part) for f in fragments for part in split_description(f.description)})
    ordered: list[str] = []
    seen: set[str] = set()
    for _, part in parts:
        if part not in seen:
            seen.add(part)
            ordered.append(part)
    return GRAPH_FIELD_SEP.join(ordered)


def majority_type(types: Iterable[str]) -> str:
    """Most frequent real type; ties go to the alphabetically first; ``unknown`` loses to any real type."""
    counts = Counter(t for t in types if t and t != UNKNOWN_TYPE)
    if not counts:
        return UNKNOWN_TYPE
    return min(counts, key=lambda t: (-counts[t], t))


def merge_entity(name: str, fragments: list[EntityFragment]) -> Entity:
    frags = unique_fragments(fragments)
    return Entity(
        name=name,
        type=majority_type(f.type for f in frags),
        description=merge_descriptions(frags),
        source_ids=sorted({f.source_id for f in frags}),
        doc_ids=sorted({f.doc_id for f in frags if f.doc_id}),
    )


def merge_keywords(values: Iterable[str]) -> str:
    words = {w.strip() for value in values for w in value.split(",") if w.strip()}
    return ", ".join(sorted(words))


def merge_relation(src: str, tgt: str, fragments: list[RelationFragment]) -> Relation:
    """Undirected merge: endpoints are stored as ``relation_key(src, tgt)``; weights are summed."""
    a, b = relation_key(src, tgt)
    frags = unique_fragments(fragments)
    return Relation(
        src=a,
        tgt=b,
        description=merge_descriptions(frags),
        keywords=merge_keywords(f.keywords for f in frags),
        weight=math.fsum(f.weight for f in frags),  # fsum: exact, so independent of order
        source_ids=sorted({f.source_id for f in frags}),
        doc_ids=sorted({f.doc_id for f in frags if f.doc_id}),
    )


def drop_sources(fragments: list[F], chunk_ids: Collection[str]) -> list[F]:
    """Fragments that do not come from any of ``chunk_ids`` (document deletion)."""
    gone = set(chunk_ids)
    return [f for f in fragments if f.source_id not in gone]


def needs_summary(
    description_fragments: list[str], settings: MergeSettings, tokens_over: Callable[[str, int], bool],
    key: str | None = None,
) -> bool:
    """True when there are many fragments or their joined text is long (``tokens_over(text, limit)``: whether the
    text has more than ``limit`` tokens). With the row's ``key``, "many" is that row's own count
    (``summary_part_trigger``)."""
    if len(description_fragments) >= summary_part_trigger(settings, key, description_fragments):
        return True
    return tokens_over(GRAPH_FIELD_SEP.join(description_fragments), settings.summary_trigger_tokens)


def summary_part_trigger(settings: MergeSettings, key: str | None, fragments: list[str]) -> int:
    """The part count at which the row ``key`` is summarised: ``force_llm_summary_on_merge`` moved by up to
    ``summary_trigger_spread`` of it either way, drawn from a hash of the key and its first part (the last summary
    once there is one), so a retried merge decides alike and each summary draws the next count afresh. Never
    below 2; exactly the setting without a key."""
    base = settings.force_llm_summary_on_merge
    spread = int(base * settings.summary_trigger_spread)
    if key is None or spread == 0:
        return base
    first = fragments[0] if fragments else ""
    draw = hashlib.blake2b(f"{key}\x00{first}".encode("utf-8", "surrogatepass"), digest_size=4).digest()
    return max(2, base - spread + int.from_bytes(draw, "big") % (2 * spread + 1))


def build_summary_messages(name: str, fragments: list[str], max_tokens: int) -> list[dict]:
    description_list = "\n".join(f"- {fragment}" for fragment in fragments)
    content = SUMMARY_TEMPLATE.format(max_tokens=max_tokens, entity_name=name, description_list=description_list)
    return [{"role": "user", "content": content}]


def summary_digest(name: str, fragments: list[str], settings: MergeSettings, model: str | None) -> str:
    """What an LLM summary of ``fragments`` is written from (the name, the fragments, the model, the budgets and the
    prompt), as 16 hex digits: stored with the summary, so merging the same fragments again reuses it."""
    material = json.dumps([name, fragments, model or "", settings.summary_max_tokens, settings.summary_context_size,
                           settings.summary_length_recommended, SUMMARY_TEMPLATE], ensure_ascii=False)
    return hashlib.blake2b(material.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def summarize_description(
    name: str,
    fragments: list[str],
    summarize: Summarize,
    settings: MergeSettings,
    model: str | None = None,
) -> str:
    """One description from many fragments; map-reduce when they exceed ``summary_context_size``.

    Every fragment (and every partial summary) is capped at half the context budget, so each
    group except possibly the last holds at least two items and the number of items strictly
    decreases each round: the recursion always terminates.
    """
    budget = max(settings.summary_context_size, 16)
    cap = budget // 2 - 1
    items = [truncate_text(f.strip(), cap, model) for f in fragments if f.strip()]
    if not items:
        return ""
    while True:
        counts = count_tokens_batch(items, model)
        if sum(counts) + len(counts) <= budget:
            return summarize(name, items).strip()
        groups = [[items[i] for i in group] for group in group_rows(counts, budget)]
        partials = [truncate_text(summarize(name, group).strip(), cap, model) for group in groups]
        items = [item for item in partials if item]
        if not items:
            return ""
