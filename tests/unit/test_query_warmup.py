"""Per-process query caches: bounded by tenant, rebuilt once per index version, and warmed in the
background when the pipeline announces an index update (real Redis, no Celery)."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from shared.domain.models import Chunk, Entity, EntityFragment, ExtractionResult
from shared.domain.storage import VectorItem
from shared.infra.redis.keys import Keys, index_updated_channel
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.lru import LRU
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.redis_vectors import RedisVectorStore
from shared.infra.store.warmup import CacheWarmer, announce_index_update, warm_tenant


def _fill(redis, tenant: str, words: str) -> None:
    """One chunk and one merged entity, the way the pipeline leaves them."""
    store = GraphStore(redis, tenant)
    store.put_chunks([Chunk(id=f"{tenant}-c1", doc_id="d1", index=0, text=f"The {words} went to market.", tokens=6)])
    store.save_extraction(ExtractionResult(chunk_id=f"{tenant}-c1", entities=[
        EntityFragment(name=words.upper(), description=f"a {words}", source_id=f"{tenant}-c1")]))
    store.merge_entity(words.upper(), lambda name, frags: Entity(
        name=name, description=frags[0].description, source_ids=[f.source_id for f in frags]))
    for kind in ("entities", "chunks"):
        redis.incr(Keys(tenant).vector_version(kind))  # what the index stage does after writing vectors


def _wait(condition, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@contextlib.contextmanager
def running(warmer: CacheWarmer, release: threading.Event | None = None):
    """``warmer.run`` on a thread while inside; on leaving, ``release`` is set (a warm-up the test holds ends) and the
    warmer is stopped."""
    stop = threading.Event()
    thread = threading.Thread(target=warmer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        if release is not None:
            release.set()
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_lru_keeps_the_most_recently_used():
    lru: LRU[str, int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # "a" is now the most recent
    lru.put("c", 3)
    assert list(lru) == ["a", "c"] and lru.get("b") is None and len(lru) == 2
    with pytest.raises(ValueError):
        LRU(0)


def test_bm25_cache_builds_once_per_version_and_stays_bounded(redis_client, tenant):
    _fill(redis_client, tenant, "grey goose")
    cache = BM25Cache(redis_client, capacity=2)
    index = cache(tenant, "entities")
    assert [name for name, _ in index.query("goose")] == ["GREY GOOSE"]
    assert cache(tenant, "entities") is index and cache.builds == 1
    redis_client.incr(Keys(tenant).vector_version("entities"))  # the index changed: rebuilt once
    assert cache(tenant, "entities") is not index and cache.builds == 2
    others = [f"{tenant}x{i}" for i in range(3)]
    for other in others:
        cache.warm(other)
    assert cache.tenants() == set(others[-2:])  # two tenants kept, the least recently used went first
    assert not cache.has_room_for(tenant) and cache.has_room_for(others[-1])


def test_warm_tenant_leaves_nothing_for_the_next_query_to_build(redis_client, tenant):
    _fill(redis_client, tenant, "red fox")
    vectors = RedisVectorStore(redis_client)
    vectors.upsert(tenant, "entities", [VectorItem(id="RED FOX", vector=[1.0, 0.0], payload={"name": "RED FOX"})])
    vectors.upsert(tenant, "chunks", [VectorItem(id=f"{tenant}-c1", vector=[0.0, 1.0], payload={})])
    cache = BM25Cache(redis_client)
    warm_tenant(redis_client, tenant, cache, vectors)
    assert cache.builds == 2 and vectors.loads == 2
    assert [c for c, _ in cache(tenant, "chunks").query("fox market")] == [f"{tenant}-c1"]
    assert cache(tenant, "entities") is not None and cache.builds == 2  # the query found both ready
    assert [h.id for h in vectors.search(tenant, "entities", [1.0, 0.1], 1)] == ["RED FOX"]
    assert vectors.search(tenant, "chunks", [0.0, 1.0], 1) and vectors.loads == 2
    warm_tenant(redis_client, tenant, cache, object())  # a store without a local copy (Weaviate) is skipped


class _CountingVectors(RedisVectorStore):
    """The embedded store, counting its searches."""

    def __init__(self, redis):
        super().__init__(redis)
        self.searched: list[str] = []

    def search(self, tenant, kind, vector, top_k, min_score=-1.0):
        self.searched.append(kind)
        return super().search(tenant, kind, vector, top_k, min_score)


def test_the_warm_up_query_takes_the_vector_path_with_a_stored_vector_and_no_embedding_call(redis_client, tenant):
    """BM25 alone would leave the vector search and its fusion cold for the first real question: the warm-up's
    question is answered with one of the tenant's stored vectors (no embedder exists here, so no API call can be
    made), and its context is the one BM25 and that vector find."""
    from shared.infra.store.warmup import stored_vector_embed

    _fill(redis_client, tenant, "red fox")
    vectors = _CountingVectors(redis_client)
    assert stored_vector_embed(vectors, tenant) is None  # no vectors yet: BM25 only, as before
    vectors.upsert(tenant, "entities", [VectorItem(id="RED FOX", vector=[3.0, 4.0], payload={"name": "RED FOX"})])
    vectors.upsert(tenant, "chunks", [VectorItem(id=f"{tenant}-c1", vector=[0.0, 1.0], payload={})])
    embed = stored_vector_embed(vectors, tenant)
    # the first kind's first row, normalised (stored as float16)
    assert [list(v) for v in embed(["a", "b"])] == [pytest.approx([0.6, 0.8], abs=1e-3)] * 2
    assert stored_vector_embed(object(), tenant) is None  # a store without a local copy: no stand-in
    warm_tenant(redis_client, tenant, BM25Cache(redis_client), vectors)
    assert {"entities", "chunks"} <= set(vectors.searched)  # both searches read the matrices


def test_warmer_rebuilds_a_tenants_caches_when_its_index_update_is_announced(redis_client, tenant):
    _fill(redis_client, tenant, "blue whale")
    cache = BM25Cache(redis_client)
    warmed: list[str] = []
    warmer = CacheWarmer(redis_client, lambda: cache, on_warm=lambda t, _s, _job: warmed.append(t), poll_s=0.05)
    with running(warmer):
        assert warmer.subscribed.wait(10)
        announce_index_update(redis_client, tenant)
        assert _wait(lambda: warmed == [tenant])
        assert cache.builds == 2 and cache.tenants() == {tenant}
        before = cache(tenant, "chunks")
        _fill(redis_client, tenant, "green turtle")  # a second ingestion: new versions, announced again
        announce_index_update(redis_client, tenant)
        assert _wait(lambda: warmed == [tenant, tenant])
        assert cache.builds == 4 and cache(tenant, "chunks") is not before
        assert [n for n, _ in cache(tenant, "entities").query("turtle")] == ["GREEN TURTLE"]


def test_a_job_that_names_itself_in_its_announcement_ends_after_the_warm_up_not_during_it(redis_client, tenant):
    """The ingestion's last announcement names its job: the warmers that heard it acknowledge once warm, and
    ``await_warm_ups`` returns only then (the client's first query does not race the warm-up)."""
    from shared.infra.store.warmup import await_warm_ups

    _fill(redis_client, tenant, "brown bear")
    cache = BM25Cache(redis_client)
    warmed: list[str] = []
    release = threading.Event()

    def on_warm(name: str, _seconds: float, _job: str) -> None:
        release.wait(20)  # the warm-up is still running until the test says so
        warmed.append(name)

    warmer = CacheWarmer(redis_client, lambda: cache, on_warm=on_warm, poll_s=0.05)
    with running(warmer, release):
        assert warmer.subscribed.wait(10)
        listeners = announce_index_update(redis_client, tenant, "job-1")
        assert listeners >= 1
        assert await_warm_ups(redis_client, tenant, "job-1", listeners, timeout_s=0.3) < listeners  # still warming
        assert warmed == []
        release.set()
        assert await_warm_ups(redis_client, tenant, "job-1", listeners, timeout_s=20) == listeners
        assert warmed == [tenant]  # acknowledged after the warm-up, not before
        assert not redis_client.exists(Keys(tenant).job_warmed("job-1"))  # the wait cleans its key
        announce_index_update(redis_client, tenant)  # an announcement without a job: warmed, nothing acknowledged
        assert _wait(lambda: warmed == [tenant, tenant])
        assert not redis_client.exists(Keys(tenant).job_warmed("job-1"))


def test_a_warm_up_acknowledges_its_job_once_the_call_it_booked_to_the_job_has_ended(redis_client, tenant):
    """The embedder probe books its call to the job that asked for the warm-up and runs in a thread (the warmer
    goes on): the job's end waits for it, so the job never ends with a call still to be booked to it."""
    from shared.infra.store.warmup import await_warm_ups

    cache, release = BM25Cache(redis_client), threading.Event()
    probe = threading.Thread(target=release.wait, args=(30,), daemon=True)
    warmer = CacheWarmer(redis_client, lambda: cache, on_warm=lambda _t, _s, job: probe.start() or probe)
    warmer.on_message(f"{tenant} j-probe")  # returns while the probe's call is in flight
    assert await_warm_ups(redis_client, tenant, "j-probe", 1, timeout_s=0.3) == 0
    release.set()
    assert await_warm_ups(redis_client, tenant, "j-probe", 1, timeout_s=10) == 1


def test_a_warm_up_that_fails_or_has_no_room_still_acknowledges_and_a_silent_listener_only_costs_the_bound(
        redis_client, tenant):
    from shared.infra.store.warmup import await_warm_ups

    full = BM25Cache(redis_client, capacity=1)
    full.warm(tenant + "-other")
    assert await_warm_ups(redis_client, tenant, "j0", 0, timeout_s=5) == 0  # nobody heard it: no wait
    CacheWarmer(redis_client, lambda: full).on_message(f"{tenant} j1")  # no room: not warmed, acknowledged
    assert await_warm_ups(redis_client, tenant, "j1", 1, timeout_s=5) == 1

    def broken():
        raise RuntimeError("index unreadable")

    with pytest.raises(RuntimeError):
        CacheWarmer(redis_client, broken).on_message(f"{tenant} j2")
    assert await_warm_ups(redis_client, tenant, "j2", 1, timeout_s=5) == 1  # acknowledged all the same
    silent = redis_client.pubsub(ignore_subscribe_messages=True)
    silent.subscribe(index_updated_channel())  # a listener that never acknowledges (an older worker)
    try:
        _wait(lambda: redis_client.pubsub_numsub(index_updated_channel())[0][1] >= 1)
        listeners = announce_index_update(redis_client, tenant, "j3")
        assert listeners >= 1
        assert await_warm_ups(redis_client, tenant, "j3", listeners, timeout_s=0.2) < listeners  # the bound, then on
    finally:
        silent.close()


def test_warmer_never_evicts_a_cached_tenant_for_one_it_has_no_room_for(redis_client, tenant):
    cache = BM25Cache(redis_client, capacity=1)
    cache.warm(tenant)
    warmer = CacheWarmer(redis_client, lambda: cache)
    assert warmer.handle(tenant + "-other") is False
    assert cache.tenants() == {tenant}
    assert warmer.handle(tenant) is True


def test_a_starting_warmer_warms_the_most_recently_indexed_tenants_and_runs_their_query_path(redis_client, tenant):
    from shared.domain import tokens
    from shared.infra.store.warmup import recent_announcements

    for name, words in ((tenant + "-old", "grey heron"), (tenant, "white stork")):
        _fill(redis_client, name, words)
        announce_index_update(redis_client, name)  # remembered with its time, latest first
    assert list(recent_announcements(redis_client, 2))[:2] == [tenant, tenant + "-old"]
    cache = BM25Cache(redis_client, capacity=4)
    warmed: list[str] = []
    warmer = CacheWarmer(redis_client, lambda: cache, on_warm=lambda t, _s, _job: warmed.append(t), poll_s=0.05,
                         warm_recent=1)
    tokens._count_cache.clear()
    with running(warmer):
        assert _wait(lambda: warmed == [tenant])  # only the most recent one: warm_recent=1
        assert cache.tenants() == {tenant} and cache.builds == 2
        # the warm-up query packed a context: the rows a first query counts are counted already
        assert tokens._count_cache._counts, "the warm-up query counted its context's rows"


def test_a_starting_warmer_skips_the_tenants_warmed_before_it_listened_unless_announced_again(redis_client, tenant):
    """What a query worker warmed before consuming is not warmed again by its background pass (that would take
    the CPU from its first queries); a tenant announced since, or not warmed then, is."""
    from shared.infra.store.warmup import recent_announcements

    names = [tenant + "-a", tenant + "-b", tenant + "-c"]
    for name in names:
        _fill(redis_client, name, "white stork")
        announce_index_update(redis_client, name)
    before = recent_announcements(redis_client, 10)
    warmed_before = {name: before[name] for name in names[:2]}  # a and b were warmed before listening
    announce_index_update(redis_client, names[1])  # then b changed again
    cache = BM25Cache(redis_client, capacity=8)
    warmed: list[str] = []
    # the three most recent are these (the session's Redis remembers other tests' tenants too, older)
    warmer = CacheWarmer(redis_client, lambda: cache, on_warm=lambda t, _s, _job: warmed.append(t), poll_s=0.05,
                         warm_recent=3, warmed=warmed_before)
    with running(warmer):
        assert _wait(lambda: set(warmed) >= {names[1], names[2]})
        time.sleep(0.2)
        assert sorted(t for t in warmed if t in names) == sorted(names[1:])  # a: current since warmed, skipped
        announce_index_update(redis_client, names[0])  # an update after listening is always warmed
        assert _wait(lambda: names[0] in warmed)


def test_the_warm_up_counts_a_small_tenants_graph_rows_whatever_its_question_retrieves(redis_client, tenant,
                                                                                      monkeypatch):
    from shared.domain import tokens
    from shared.domain.models import CommunityReport
    from shared.domain.query import engine
    from shared.domain.query.context_local import entity_cells, report_section
    from shared.domain.query.row_counts import line_rest
    from shared.infra.store.warmup import warm_query_path

    _fill(redis_client, tenant, "black kite")
    monkeypatch.setattr(engine, "answer_query", lambda *a, **k: None)  # the warm question retrieves nothing
    tokens._count_cache.clear()
    store = GraphStore(redis_client, tenant)
    warm_query_path(store, BM25Cache(redis_client), model="gpt-4o-mini")
    kite = store.entities(["BLACK KITE"])["BLACK KITE"]
    line = line_rest(entity_cells("E7", kite))  # whatever rank a later query gives the row: counted already
    encoding = tokens.get_encoding("gpt-4o-mini").name
    assert tokens._count_cache.get(encoding, line) is not None
    report = CommunityReport(community_id="L0-1", level=0, title="BLACK KITE", summary="A bird at the market.")
    store.save_reports([report])
    tokens._count_cache.clear()
    warm_query_path(store, BM25Cache(redis_client), model="gpt-4o-mini")
    row = report_section([report], None, "gpt-4o-mini")[0].rows[0]  # a report's row, as any local context has it
    assert tokens._count_cache.get(encoding, row + "\n") is not None
    # only the reports changed (an ingestion's final announcement after its index-time one): the graph's rows,
    # counted for this revision already, are not rendered and looked up again
    assert tokens._count_cache.get(encoding, line) is None
    _fill(redis_client, tenant, "black kite")  # a graph write: a new revision, counted again
    warm_query_path(store, BM25Cache(redis_client), model="gpt-4o-mini")
    kite = store.entities(["BLACK KITE"])["BLACK KITE"]
    assert tokens._count_cache.get(encoding, line_rest(entity_cells("E7", kite))) is not None


def test_a_worker_loads_the_chat_and_embedding_tokenizers_before_consuming(redis_server):
    """The first query's embedding call counts its input with the embedding model's tokenizer: a fresh worker
    process loads both tokenizers on ``worker_init`` (``warmup.warm_worker``), not during its first query."""
    import json
    import subprocess
    import sys

    from tests.unit.test_secure_defaults import worker_env

    code = ("import json\nimport tiktoken.registry as r\nfrom workers.celery_app import app\n"
            "from workers.runtime import runtime\nfrom shared.infra.store import warmup\nbefore = sorted(r.ENCODINGS)\n"
            "warmup.warm_worker(app, runtime)\nprint(json.dumps([before, sorted(r.ENCODINGS)]))")
    env = worker_env(redis_server.url, GRAPHFLEET_LLM_MODEL="gpt-4o-mini",
                     GRAPHFLEET_EMBEDDING_MODEL="text-embedding-3-small")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, after = (set(names) for names in json.loads(out.stdout.strip().splitlines()[-1]))
    assert {"o200k_base", "cl100k_base"} <= after
    assert "cl100k_base" not in before


def test_warming_a_tenant_measures_the_embedder_once_so_the_first_query_does_not(redis_server, redis_client, simulator,
                                                                                 tenant):
    """A new deployment's first index: the query worker probes the embedding model (one 20-word call, booked
    to the ingestion job whose end asked for the warm-up, so the tenant's ledger stays the sum of its jobs) when it
    warms that tenant, not during the tenant's first query, and in a thread of its own: the warmer is free for the
    next announcement (a job's final one, which the job's end waits for) while the call is in flight. Once known
    (kept in Redis for every process), warming makes no call; a warm-up no job asked for makes none either."""
    import json
    import subprocess
    import sys
    import uuid

    import httpx

    from shared.infra.redis.keys import embedder_lexical_key
    from shared.infra.tenancy.usage import read_usage
    from tests.unit.test_secure_defaults import worker_env

    model = f"text-embedding-probe-{uuid.uuid4().hex[:8]}"  # never probed by another test
    code = ("import json, sys, threading\nfrom shared.infra.store.warmup import _warmed\n"
            "from workers.runtime import runtime\nrt, gate = runtime(), threading.Event()\nreal = rt.embedder.embed\n"
            "rt.embedder.embed = lambda texts, ctx: (gate.wait(30), real(texts, ctx))[1]\n"
            "_warmed(runtime, sys.argv[1], 0.0, sys.argv[2])\n"
            "open_call = rt._lexical is None\ngate.set()\n"  # _warmed returned, the call held
            "[t.join(60) for t in threading.enumerate() if t.name == 'graphfleet-embedder-probe']\n"
            "print(json.dumps([open_call, rt._lexical]))")
    env = worker_env(redis_server.url, GRAPHFLEET_LLM_BASE_URL=simulator, GRAPHFLEET_LLM_API_KEY="sk-test",
                     GRAPHFLEET_EMBEDDING_MODEL=model)
    stats = simulator.removesuffix("/v1") + "/stats"

    def warm(job_id: str = "job-probe") -> tuple[list, int]:
        before = httpx.get(stats).json()["embeddings"]["calls"]
        out = subprocess.run([sys.executable, "-c", code, tenant, job_id], env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1]), httpx.get(stats).json()["embeddings"]["calls"] - before

    assert warm("") == ([True, None], 0)  # no job asked for this warm-up: the first query will probe, in its job
    # _warmed returned while the probe's call was held; the simulator's local model knows meaning: one call
    assert warm() == ([True, False], 1)
    assert redis_client.get(embedder_lexical_key(model)) in (b"0", "0")
    assert [(r.stage, r.model, r.job_id) for r in read_usage(redis_client, tenant)] == [("embed", model, "job-probe")]
    again = warm()  # a second process (or a restart) reads the answer
    assert (again[0][1], again[1]) == (False, 0)
