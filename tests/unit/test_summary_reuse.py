"""A merged row keeps its LLM summary with the digest of what it was written from: merging the same fragments again
(a key marked dirty with nothing new, a retried batch) asks the LLM nothing, new fragments are summarised with the
summary they join, a removed one merges every fragment again, and the summary calls of the ingest workers bypass
the LLM answer cache (the row is where the summary is kept)."""

from __future__ import annotations

from shared.config import get_settings
from shared.domain.models import EntityFragment, ExtractionResult, RelationFragment
from shared.infra.store.redis_graph import GraphStore
from shared.pipeline.merge_stage import run_merge_batch


def _settings():
    cfg = get_settings().model_copy(deep=True)
    cfg.merge.force_llm_summary_on_merge = 2  # two fragments call for a summary
    return cfg


def _extract(store: GraphStore, chunk: str, said: str) -> None:
    store.save_extraction(ExtractionResult(chunk_id=chunk, entities=[
        EntityFragment(name="SCROOGE", type="person", description=f"Scrooge {said}.", source_id=chunk)],
        relations=[RelationFragment(src="SCROOGE", tgt="MARLEY", description=f"Partners {said}.", source_id=chunk)]))


class Counting:
    """A summarizer that answers with the fragments it was given, counting its calls."""

    def __init__(self):
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def __call__(self, name: str, fragments: list[str]) -> str:
        self.calls.append((name, tuple(fragments)))
        return f"summary of {name}: " + " / ".join(sorted(fragments))


def _merge(store: GraphStore, cfg, summarize) -> None:
    run_merge_batch(store, store.dirty_members("entities"), store.dirty_members("relations"), cfg, summarize)


def test_merging_the_same_fragments_again_reuses_the_stored_summary(redis_client, tenant):
    store, cfg, summarize = GraphStore(redis_client, tenant), _settings(), Counting()
    _extract(store, "c1", "is a miser")
    _extract(store, "c2", "keeps a counting-house")
    _merge(store, cfg, summarize)
    assert [name for name, _ in summarize.calls] == ["SCROOGE", "MARLEY -> SCROOGE"]
    entity = store.entities(["SCROOGE"])["SCROOGE"]
    assert entity.summarized and entity.summary_of and entity.description.startswith("summary of SCROOGE")
    relation_description = next(iter(store.relations_of(["SCROOGE"], 10))).description

    store.redis.sadd(store.k.dirty("entities"), "SCROOGE")  # marked again, fragments unchanged
    store.redis.sadd(store.k.dirty("relations"), *store.redis.hkeys(store.k.relations()))
    _merge(store, cfg, summarize)
    assert len(summarize.calls) == 2
    again = store.entities(["SCROOGE"])["SCROOGE"]
    assert (again.description, again.summary_of) == (entity.description, entity.summary_of)

    _extract(store, "c3", "wakes on Christmas morning")  # a new fragment: summarised with the summary it joins
    _merge(store, cfg, summarize)
    assert summarize.calls[2:] == [
        ("SCROOGE", (entity.description, "Scrooge wakes on Christmas morning.")),
        ("MARLEY -> SCROOGE", (relation_description, "Partners wakes on Christmas morning."))]
    assert "Christmas" in store.entities(["SCROOGE"])["SCROOGE"].description
    assert store.entities(["SCROOGE"])["SCROOGE"].summary_of != entity.summary_of

    store.redis.sadd(store.k.dirty("entities"), "SCROOGE")  # marked again with nothing new: the row stands
    settings_changed = cfg.model_copy(deep=True)
    settings_changed.merge.summary_max_tokens = cfg.merge.summary_max_tokens // 2
    _merge(store, settings_changed, summarize)
    assert len(summarize.calls) == 4

    store.remove_chunk_fragments("c1")  # a fragment gone: every remaining one is merged (and summarised) again
    _merge(store, settings_changed, summarize)
    assert summarize.calls[4:] == [
        ("SCROOGE", ("Scrooge keeps a counting-house.", "Scrooge wakes on Christmas morning.")),
        ("MARLEY -> SCROOGE", ("Partners keeps a counting-house.", "Partners wakes on Christmas morning."))]
    assert store.entities(["SCROOGE"])["SCROOGE"].source_ids == ["c2", "c3"]


def test_a_row_that_was_not_summarized_is_summarized_once_it_needs_to(redis_client, tenant):
    store, cfg, summarize = GraphStore(redis_client, tenant), _settings(), Counting()
    _extract(store, "c1", "is a miser")
    _merge(store, cfg, summarize)  # one fragment: no summary
    assert summarize.calls == [] and not store.entities(["SCROOGE"])["SCROOGE"].summary_of
    _extract(store, "c2", "keeps a counting-house")
    _merge(store, cfg, summarize)
    assert [name for name, _ in summarize.calls] == ["SCROOGE", "MARLEY -> SCROOGE"]
    store.redis.hdel(store.k.entities(), "SCROOGE")  # without an LLM (and no row to build on) nothing is summarised
    store.redis.sadd(store.k.dirty("entities"), "SCROOGE")
    _merge(store, cfg, None)
    entity = store.entities(["SCROOGE"])["SCROOGE"]
    assert not entity.summarized and not entity.summary_of and "counting-house" in entity.description


def test_a_batch_retried_after_a_conflict_does_not_ask_for_its_summaries_again(redis_client, tenant, monkeypatch):
    store, cfg, summarize = GraphStore(redis_client, tenant), _settings(), Counting()
    _extract(store, "c1", "is a miser")
    _extract(store, "c2", "keeps a counting-house")
    conflicts = []
    write = store._write_merged

    def conflicting_once(*args):
        if not conflicts:  # a concurrent writer changed a fragment hash while the batch merged
            conflicts.append(1)
            return set()
        return write(*args)

    monkeypatch.setattr(store, "_write_merged", conflicting_once)
    _merge(store, cfg, summarize)
    assert conflicts and [name for name, _ in summarize.calls] == ["SCROOGE", "MARLEY -> SCROOGE"]
    assert store.entities(["SCROOGE"])["SCROOGE"].summarized


def test_uncached_calls_neither_read_nor_write_the_llm_cache(redis_client, tenant):
    from llm_simulator.config import SimConfig
    from llm_simulator.server import start_in_thread
    from shared.config import Settings
    from shared.infra.llm.client import LLMClient
    from shared.infra.tenancy.usage import CallContext, UsageRecorder
    from workers.runtime import Runtime

    url, stop = start_in_thread(SimConfig(port=0, seed=3))
    try:
        settings = Settings(llm_base_url=url, llm_api_key="sk-x")
        recorder = UsageRecorder(redis_client)
        client = LLMClient(settings, redis_client, recorder)
        ctx = CallContext(tenant=tenant, stage="summarize", job_id="j1")
        msgs = [{"role": "user", "content": "Summarize: Scrooge is a miser."}]
        uncached = Runtime(settings, redis_client, recorder, client, None, None).chat_fn(ctx, cached=False)
        assert uncached(msgs, "summarize") and uncached(msgs, "summarize")
        assert not list(redis_client.scan_iter(match=f"*{tenant}*llmcache*"))
        cached = Runtime(settings, redis_client, recorder, client, None, None).chat_fn(ctx)
        cached(msgs, "summarize")
        assert client.chat(msgs, ctx).cache_hit  # the default still caches
    finally:
        stop()


def test_a_summary_is_asked_for_the_recommended_length_and_takes_new_parts_until_they_pass_the_trigger(
        redis_client, tenant):
    """The LLM is asked for ``summary_length_recommended`` tokens (half the trigger, as LightRAG does), so a summarised
    row folds a later fragment in without a new summary until the new parts bring it past the trigger again."""
    from shared.pipeline.merge_stage import summarizer

    asked: list[str] = []
    cfg = get_settings().model_copy(deep=True)
    cfg.merge.force_llm_summary_on_merge, cfg.merge.summary_trigger_tokens = 3, 60
    cfg.merge.summary_length_recommended = 30
    summarize = summarizer(lambda messages, _stage: asked.append(messages[0]["content"]) or "Scrooge is a miser.", cfg)
    store = GraphStore(redis_client, tenant)
    for chunk, said in (("c1", "is a miser"), ("c2", "keeps a counting-house"), ("c3", "hates Christmas")):
        _extract(store, chunk, said)
    _merge(store, cfg, summarize)
    assert len(asked) == 2 and all("under 30 tokens" in text for text in asked)
    _extract(store, "c4", "sees a ghost")  # the summary plus one short part: under the trigger, no call
    _merge(store, cfg, summarize)
    assert len(asked) == 2
    assert store.entities(["SCROOGE"])["SCROOGE"].description.endswith("Scrooge sees a ghost.")
    _extract(store, "c5", "wakes on Christmas morning and buys the prize turkey for the Cratchit family at once")
    _extract(store, "c6", "raises Bob Cratchit's salary and becomes a second father to Tiny Tim, who did not die")
    _merge(store, cfg, summarize)  # the new parts bring it past the trigger: summarised again
    assert len(asked) == 4
