"""Merge dirty entities and relations from their fragments (summaries via the LLM when long)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from shared.domain.merge import (
    build_summary_messages,
    merge_entity,
    merge_relation,
    needs_summary,
    summarize_description,
    summary_digest,
)
from shared.domain.merge_fold import fold_entity, fold_relation, fragments_digest, new_fragments
from shared.domain.models import Entity, EntityFragment, Relation, RelationFragment
from shared.domain.prompts.delimiters import GRAPH_FIELD_SEP as DESC_SEP
from shared.domain.query.context_local import entity_static, relation_static
from shared.domain.query.line_tokens import SEAM_ENCODINGS
from shared.domain.query.row_counts import counts_after
from shared.domain.tokens import count_tokens, get_encoding, tokens_over, truncate_text
from shared.infra.store.redis_graph import GraphStore, split_rel_field

SummarizeFn = Callable[[str, list[str]], str]


def plan_batches(store: GraphStore, batch_size: int) -> list[dict]:
    """Split the tenant's dirty entities and relations into merge batches."""
    names = store.dirty_members("entities")
    fields = store.dirty_members("relations")
    batches = [{"entities": names[i : i + batch_size], "relations": []} for i in range(0, len(names), batch_size)]
    batches += [{"entities": [], "relations": fields[i : i + batch_size]} for i in range(0, len(fields), batch_size)]
    return batches


def _finish_description(name: str, description: str, settings, summarize: SummarizeFn | None,
                        previous: Entity | Relation | None) -> tuple[str, str]:
    """The row's description and the digest of what its LLM summary was written from ("" when not summarized).
    A stored row summarized from the same fragments keeps its summary: no second LLM call for what it already
    says (a merge retried after a conflict or a redelivery, a key marked dirty with its fragments unchanged)."""
    fragments = [f for f in description.split(DESC_SEP) if f.strip()]
    over = lambda text, limit: tokens_over(text, limit, settings.effective_summary_model)  # noqa: E731
    if not needs_summary(fragments, settings.merge, over, key=name):
        return description, ""
    if summarize is None:  # no LLM: keep the fragments, bounded by the summary budget
        return truncate_text(DESC_SEP.join(fragments), settings.merge.summary_max_tokens), ""
    digest = summary_digest(name, fragments, settings.merge, settings.effective_summary_model)
    if previous is not None and previous.summary_of == digest:
        return previous.description, digest
    summary = summarize_description(name, fragments, summarize, settings.merge, settings.effective_summary_model)
    return summary, digest


def text_tokens(text: str, model: str | None) -> dict[str, int]:
    """A row text's token count under the query model's encoding, stored with the row: the estimate a query packs
    rows with when they have no count of their static part (``row_tokens``, stored beside it; see
    ``shared.domain.query.row_counts`` and ``shared.domain.query.context_common.graph_row_tokens``). Empty under the
    encodings whose queries use the static part's exact count instead (``SEAM_ENCODINGS``), so that a merge does
    not encode every description a second time for an estimate no query reads."""
    encoding = get_encoding(model).name
    return {} if encoding in SEAM_ENCODINGS else {encoding: count_tokens(text, model)}


def run_merge_batch(
    store: GraphStore, entities: list[str], relations: list[str], settings, summarize: SummarizeFn | None
) -> dict:
    def lost_content(previous: Entity | Relation | None, frags: list) -> None:
        """Before a row that lost fragments is written: clusterings must see it before reusing reports."""
        if previous is not None and not set(previous.source_ids) <= {f.source_id for f in frags}:
            store.note_removal()

    def merge_e(name: str, frags: list[EntityFragment], previous: Entity | None = None) -> Entity | None:
        lost_content(previous, frags)
        new = new_fragments(previous, frags)
        if new == []:  # nothing new since the row was merged
            return previous
        entity = merge_entity(name, frags) if new is None else fold_entity(previous, new)
        entity.description, entity.summary_of = _finish_description(name, entity.description, settings, summarize,
                                                                     previous)
        entity.summarized = bool(entity.summary_of)
        entity.merged_of = fragments_digest(frags)
        entity.text_tokens = text_tokens(entity.description, settings.llm_model)
        entity.row_tokens, entity.row_digest = counts_after(
            entity_static(entity), previous and entity_static(previous), previous, settings.llm_model)
        return entity

    def merge_r(src: str, tgt: str, frags: list[RelationFragment],
                previous: Relation | None = None) -> Relation | None:
        lost_content(previous, frags)
        new = new_fragments(previous, frags)
        if new == []:
            return previous
        relation = merge_relation(src, tgt, frags) if new is None else fold_relation(previous, new)
        relation.description, relation.summary_of = _finish_description(
            f"{src} -> {tgt}", relation.description, settings, summarize, previous)
        relation.merged_of = fragments_digest(frags)
        relation.text_tokens = text_tokens(relation.description, settings.llm_model)
        relation.row_tokens, relation.row_digest = counts_after(
            relation_static(relation), previous and relation_static(previous), previous, settings.llm_model)
        return relation

    summarize = _remembered(summarize) if summarize is not None else None
    written = deleted = 0
    # summaries are LLM calls: overlap them within the batch (merging itself is cheap and pure)
    pool = ThreadPoolExecutor(settings.merge.summary_concurrency) if summarize is not None else None
    map_fn = pool.map if pool is not None else map
    try:
        if entities:
            w, d = store.merge_batch("entities", entities, merge_e, map_fn=map_fn, previous=True)
            written, deleted = written + w, deleted + d
        if relations:
            w, d = store.merge_batch("relations", relations,
                                     lambda f, frags, previous=None: merge_r(*split_rel_field(f), frags, previous),
                                     map_fn=map_fn, previous=True)
            written, deleted = written + w, deleted + d
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return {"written": written, "deleted": deleted}


def _remembered(summarize: SummarizeFn) -> SummarizeFn:
    """``summarize`` answering a repeated question from memory for the batch's lifetime: a merge that conflicts
    with a concurrent writer is retried (``GraphStore.merge_batch``), and the summaries it already paid for are
    not asked again (they are not in the LLM cache: the stored row keeps the one that counts)."""
    answers: dict[tuple[str, tuple[str, ...]], str] = {}

    def summarize_once(name: str, fragments: list[str]) -> str:
        key = (name, tuple(fragments))
        if key not in answers:
            answers[key] = summarize(name, fragments)
        return answers[key]

    return summarize_once


def summarizer(chat: Callable[[list[dict], str], str] | None, settings) -> SummarizeFn | None:
    """``summarize(name, fragments) -> description`` over an LLM ``chat``, or None without one (long
    descriptions are then cut, not summarized)."""
    if chat is None:
        return None

    def summarize(name: str, fragments: list[str]) -> str:
        return chat(build_summary_messages(name, fragments, settings.merge.summary_length_recommended), "summarize")

    return summarize
