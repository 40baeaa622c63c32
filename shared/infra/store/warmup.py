"""Warm-ups: work a first query (or the end of a first ingestion) would otherwise pay, done ahead of it.

Only those that remove at least 10 ms, or 20%, of a user-visible latency are kept (measured once, first local query
through the gateway after ``graphfleet up`` with and without each: docs/benchmarks.md, "Warm-ups"):

* **a query worker's caches, when a tenant's index changes** (:class:`CacheWarmer`): BM25 indexes, the embedded
  store's vector matrices, neighbour lists, parsed communities and reports and the global report index
  (:func:`warm_tenant`), then one context-only local query with no LLM and no embedding call
  (:func:`warm_query_path`: code paths, parsed rows and token counts). The pipeline announces each change (the
  tenant id only, :func:`announce_index_update`); every query worker process warms the tenants it caches or has
  room for (never evicting another). The ingestion's last announcement names its job, which ends once the warmers
  that heard it acknowledged (:func:`await_warm_ups`, at most ``workers.warm_wait_s``): a query sent as soon as the
  job is done does not race the warm-up. Warming is idempotent: a missed announcement costs one cold query.
* **before a query worker consumes** (:func:`prepare_query_worker`): the same for the tenants indexed most recently
  (at most ``START_WARM_S``), the BM25 library's import (else paid by a fresh stack's first index warm-up, which its
  first ingestion waits for), a keep-alive connection to the LLM API and the embedder probe (an API call).
* **every worker, before its first task** (:func:`warm_worker`): the tokenizers, the runtime's clients and the Celery
  sender (:func:`warm_sender`: its result backend, a pooled producer's connection, every queue declared); a prefork
  child builds its own runtime and sender. The gateway warms its sender the same way.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from celery.signals import worker_init, worker_process_init, worker_ready, worker_shutdown

from shared.domain.storage import VECTOR_KINDS
from shared.infra.pretouched import reserve
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import index_updated_channel
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.index_loads import load_side_by_side
from shared.infra.store.lru import CACHED_TENANTS, LRU
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.warm_announce import (  # noqa: F401 - where callers import them from
    acknowledge_warm_up,
    announce_index_update,
    await_warm_ups,
    recent_announcements,
)

log = logging.getLogger(__name__)
START_WARM_S = 5.0  # before consuming, recent tenants are warmed for at most this long (the rest: in the background)


def warm_tenant(redis, tenant: str, bm25: BM25Cache, vectors=None, model: str | None = None) -> float:
    """Build the tenant's stale query caches in this process, then run one context-only local query on them
    (``warm_query_path``); seconds spent. ``vectors``: the process's vector store, warmed when it keeps a
    local copy (the embedded store's matrices; Weaviate keeps none)."""
    started = time.perf_counter()
    store = GraphStore(redis, tenant, snapshots=bm25.snapshots)
    with bm25.sharing_rows():  # the entity BM25 and the walk read the entity rows once between them
        for load in load_side_by_side(store, bm25, vectors):
            load.result()
    warm_global_index(store)
    warm_query_path(store, bm25, vectors, model)
    return time.perf_counter() - started


def warm_global_index(store: GraphStore) -> None:
    """Parse the communities and reports and index the reports a default global question ranks (BM25 over the
    full scan's candidates, ``global_select.report_index``), so a tenant's first global query does not build it."""
    from shared.domain.query.context_global import static_selection
    from shared.domain.query.global_select import report_index
    from shared.domain.query.params import QueryParam

    communities, reports = store.community_rows()
    candidates, _ = static_selection(communities, reports, QueryParam(mode="global"))
    if candidates:
        report_index(candidates)


WARM_QUESTION = "Who are the main people and what happens between them?"
WARM_CHUNK_COUNTS = 5000  # a tenant's passages whose source rows are counted ahead (at most this many)
WARM_GRAPH_ROWS = 5000  # a tenant's entity and relation rows are counted ahead when it has at most this many each


def warm_query_path(store: GraphStore, bm25: BM25Cache, vectors=None, model: str | None = None) -> None:
    """A context-only local query without LLM or embedding call (``stored_vector_embed``: the vector search and
    its fusion with BM25 run as a real question's do): reads, parses and counts what a first query would, and
    books nothing; then the token counts of the tenant's source rows, and of its entity, relation and report rows
    when it has few enough (a first query then encodes only the rows that changed). Logs a failure, never raises."""
    from shared.domain.query.context_local import report_section
    from shared.domain.query.engine import answer_query
    from shared.domain.query.line_tokens import line_counts
    from shared.domain.query.params import QueryParam

    try:
        answer_query(QueryParam(query=WARM_QUESTION, mode="local", only_need_context=True, model=model),
                     store, vectors, stored_vector_embed(vectors, store.tenant), None, bm25, walk_provider=bm25.walk)
        small = max(store.graph_sizes().values()) <= WARM_GRAPH_ROWS
        _count_rows(store, model, small)
        if small:
            reports = list(store.reports().values())  # a report's row is the same in every local context
            line_counts(report_section(reports, None, model)[0].rows, model)
    except Exception:  # noqa: BLE001 - warming is a courtesy: the real query reports its own errors
        log.warning("warm-up query of tenant %s failed", store.tenant, exc_info=True)


def stored_vector_embed(vectors, tenant: str):
    """An embedder for the warm-up query that answers every text with one of the tenant's stored vectors: no API
    call, nothing booked, yet its searches take a real question's path (the matrix product, the fusion with BM25).
    None when the store keeps no local copy (Weaviate searches on its server) or the tenant has no vectors."""
    sample = getattr(vectors, "sample_vector", None)
    if sample is None:
        return None
    vector = next((v for kind in VECTOR_KINDS if (v := sample(tenant, kind)) is not None), None)
    return None if vector is None else (lambda texts: [vector] * len(texts))


# tenant -> the revision (graph version and epoch, passages' version) whose rows this process counted last
_ROWS_COUNTED: LRU[str, tuple] = LRU(CACHED_TENANTS)


def _count_rows(store: GraphStore, model: str | None, graph_rows: bool) -> None:
    """The source rows' token counts, and the entity and relation rows' when ``graph_rows``: once per revision.
    An ingestion announces twice (its index, then its final reports); the second finds the passages and the
    graph as the first counted them, and skips rendering and looking up its rows again. Rows ingested
    with their counts (``shared.domain.query.row_counts``) are not encoded: their stored counts are put in the
    memo; only older rows, or rows stored for another encoding, are counted."""
    from shared.domain.query.context_local import ENTITY_NUMERIC, RELATION_NUMERIC, entity_cells, relation_cells
    from shared.domain.query.row_counts import rest_counts, source_counts

    revision = store.revision(store.k.vector_version("chunks"))
    if _ROWS_COUNTED.get(store.tenant) == (revision, graph_rows, model):
        return
    ids = store.all_chunk_ids()[:WARM_CHUNK_COUNTS]  # every query's source rows are counted from these
    source_counts(list(store.chunks(ids).values()), model)
    if graph_rows:
        by_name, by_pair = store.read_whole_graph()  # parsed once, and filed for the queries (``row_cache``)
        entities, relations = list(by_name.values()), list(by_pair.values())
        rest_counts([entity_cells("", e) for e in entities], entities, ENTITY_NUMERIC, model)
        rest_counts([relation_cells("", r) for r in relations], relations, RELATION_NUMERIC, model)
    _ROWS_COUNTED.put(store.tenant, (revision, graph_rows, model))


class CacheWarmer:
    """Listens for index updates and warms this process's caches; ``run`` blocks until ``stop`` is set
    (a daemon thread of each query worker process). Survives Redis restarts by resubscribing."""

    def __init__(self, redis, bm25: Callable[[], BM25Cache], on_warm: Callable[[str, float, str], object] | None = None,
                 poll_s: float = 0.5, retry_s: float = 1.0, vectors=None, model: str | None = None,
                 warm_recent: int = 0, warmed: dict[str, float] | None = None):
        self.redis, self.bm25, self.on_warm, self.vectors, self.model = redis, bm25, on_warm, vectors, model
        self.warm_recent = warm_recent  # tenants warmed once subscribed (the most recently indexed first)
        # tenant -> the announcement its caches were warmed after (``recent_announcements``), by this process
        # before it listened: the once-subscribed pass skips those not announced again since
        self.warmed = dict(warmed or {})
        self._pending: object = None  # what ``on_warm`` returned for the announcement being handled
        self.poll_s, self.retry_s = poll_s, retry_s
        self.subscribed = threading.Event()  # set once listening (tests wait on it before publishing)

    def handle(self, tenant: str, job_id: str = "") -> bool:
        """Warm ``tenant`` if this process caches it or has room; whether it was warmed (``job_id``: who asked)."""
        cache = self.bm25()
        if not cache.has_room_for(tenant):
            return False
        seconds = warm_tenant(self.redis, tenant, cache, self.vectors, self.model)
        if self.on_warm:
            self._pending = self.on_warm(tenant, seconds, job_id)
        return True

    def on_message(self, data: str) -> None:
        """An announcement: ``tenant``, or ``tenant job_id`` when a job waits for the warm-up's acknowledgement."""
        self.on_messages([data])

    def on_messages(self, batch: list[str]) -> None:
        """Announcements heard together (those queued while the last warm-up ran): each tenant is warmed once, and
        every job that named it is acknowledged, the first of them once a call the warm-up booked to it, still in
        flight in a thread, has ended. A tenant ingesting faster than its warm-ups take then costs one warm-up per
        round, not a backlog that grows with each announcement."""
        jobs: dict[str, list[str]] = {}
        for data in batch:
            tenant, _, job_id = data.partition(" ")
            jobs.setdefault(tenant, [])
            if job_id:
                jobs[tenant].append(job_id)
        failed: Exception | None = None
        for tenant, job_ids in jobs.items():
            self._pending = None
            try:
                self.handle(tenant, job_ids[0] if job_ids else "")
            except Exception as error:  # noqa: BLE001 - the other tenants are warmed all the same, then it is raised
                failed = failed or error
            finally:
                pending, self._pending = self._pending, None
                for job_id in job_ids:
                    if isinstance(pending, threading.Thread):
                        threading.Thread(target=self._acknowledge_after, args=(pending, tenant, job_id),
                                         name="graphfleet-warm-ack", daemon=True).start()
                    else:
                        acknowledge_warm_up(self.redis, tenant, job_id)
        if failed is not None:
            raise failed

    def _acknowledge_after(self, call: threading.Thread, tenant: str, job_id: str) -> None:
        """Acknowledge once the warm-up's booked call has ended. A Redis that went away meanwhile costs the job
        its wait for this answer (``await_warm_ups`` times out), not this thread an unhandled error."""
        call.join()
        try:
            acknowledge_warm_up(self.redis, tenant, job_id)
        except Exception:  # noqa: BLE001 - logged; the waiting job times out and goes on
            log.warning("could not acknowledge the warm-up of %s for job %s", tenant, job_id, exc_info=True)

    def _warm_recent(self, stop: threading.Event) -> None:
        """Once per process, after subscribing (no update meanwhile is missed): the recent tenants, but those warmed
        before listening and not announced since (current: warming again would take the first queries' CPU)."""
        recent = recent_announcements(self.redis, self.warm_recent) if self.warm_recent else {}
        self.warm_recent = 0
        for tenant, announced in recent.items():
            if stop.is_set():
                return
            if self.warmed.pop(tenant, None) != announced:
                self.handle(tenant)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            pubsub = None
            try:
                pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(index_updated_channel())
                self.subscribed.set()
                self._warm_recent(stop)
                while not stop.is_set():
                    if batch := _queued(pubsub, self.poll_s):
                        self.on_messages(batch)
            except Exception:  # noqa: BLE001 - Redis down or restarting: listen again shortly
                self.subscribed.clear()
                log.warning("query cache warmer: listening again in %.1f s", self.retry_s, exc_info=True)
                stop.wait(self.retry_s)
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        pubsub.close()


def _queued(pubsub, wait_s: float) -> list[str]:
    """The next announcement (waiting at most ``wait_s``) and every one already queued behind it."""
    batch: list[str] = []
    message = pubsub.get_message(timeout=wait_s)
    while message:
        if message.get("type") == "message":
            batch.append(to_str(message["data"]))
        message = pubsub.get_message(timeout=0)
    return batch


# ---- the Celery sender, in every process that sends (workers, the gateway)
def warm_sender(celery) -> None:
    """What a process's first send would otherwise pay, done ahead of it: Celery's result backend and task sender
    (built on first use), a pooled producer's broker connection and the declaration of every queue (the first
    publish to a queue declares it). Nothing is sent; declaring is idempotent (the workers declare the same)."""
    _ = celery.backend, celery.amqp.send_task_message
    with celery.producer_or_acquire() as producer:
        producer.connection.ensure_connection(max_retries=1)
        for queue in celery.amqp.queues.values():
            producer.maybe_declare(queue)


def _quietly(what: str, warm: Callable[[], object]) -> None:
    try:
        warm()
    except Exception:  # noqa: BLE001 - Redis or the broker not up yet: the first task or send builds it instead
        log.warning("%s not warmed before the first task", what, exc_info=True)


# ---- worker hooks (``workers/celery_app.py`` installs them with its per-process runtime)
_stop = threading.Event()
_prepared: dict[str, float] = {}  # tenant -> the announcement its caches were warmed after, before consuming
_probing = threading.Lock()  # one embedder probe at a time in this process


def warm_worker(app, runtime: Callable[[], object]) -> None:
    """Every worker, on ``worker_init``: each tokenizer a task may use (a BPE load is a noticeable amount of CPU),
    the runtime's clients (their modules load before a prefork pool forks its children) and the sender."""
    from shared.config import get_settings
    from shared.domain.tokens import get_encoding

    settings = get_settings()
    for model in {settings.llm_model, settings.effective_summary_model, settings.embedding_model, None}:
        get_encoding(model)
    _quietly("worker runtime", runtime)
    _quietly("worker sender", lambda: warm_sender(app))


def warm_child(app, runtime: Callable[[], object]) -> None:
    """A prefork child (merge, cluster workers) builds its own producer pool and runtime (mostly the LLM client's TLS
    context) now, not in its first task, on an ingestion's path. In a thread: the pool waits at most
    ``worker_proc_alive_timeout`` for a child's start-up; a task that starts meanwhile waits for the runtime's lock."""
    def build() -> None:
        _quietly("worker child's sender", lambda: warm_sender(app))
        _quietly("worker child's runtime", runtime)

    threading.Thread(target=build, name="warm-child", daemon=True).start()


def _probe_embedder(runtime: Callable[[], object], tenant: str, job_id: str) -> threading.Thread | None:
    """Whether the embedder only sees words (``Runtime.lexical_embedder``: a new deployment's first index makes one
    20-word embedding call, then every process knows), booked to ``job_id``, the ingestion whose end asked for this
    warm-up (a tenant's ledger is the sum of its jobs'), in a thread: the warmer goes on to the next announcement.
    The thread, or None when another probe is in flight: the job's warm-up is acknowledged once it ends
    (``CacheWarmer.on_message``), so the job never ends with a call still to be booked to it."""
    from shared.infra.messaging.queueing import QUERY, ROUTES
    from shared.infra.tenancy.usage import CallContext

    if not _probing.acquire(blocking=False):
        return None

    def probe() -> None:
        try:
            runtime().lexical_embedder(CallContext(tenant=tenant, stage="embed", job_id=job_id, queue=ROUTES[QUERY]))
        finally:
            _probing.release()

    thread = threading.Thread(target=probe, name="graphfleet-embedder-probe", daemon=True)
    thread.start()
    return thread


def _warmed(runtime: Callable[[], object], tenant: str, seconds: float, job_id: str = "") -> threading.Thread | None:
    """After a tenant's caches: the embedder probe when a job asked for the warm-up (else the first query probes, in
    its job), and, with an LLM, the metric series its next answer writes, created at zero (``prime_query_series``).
    The probe's thread when one started."""
    from shared.infra.messaging.queueing import QUERY, ROUTES
    from shared.infra.observability.metrics import observe_cache_warmup, prime_query_series
    from shared.infra.tenancy.tiers import TIERS

    observe_cache_warmup(seconds)
    log.info("query caches of tenant %s warmed in %.3f s", tenant, seconds)
    probe = _probe_embedder(runtime, tenant, job_id) if job_id else None
    rt = runtime()
    if rt.llm is not None:
        prime_query_series(rt.settings.llm_model, ROUTES[QUERY], QUERY, {tenant: TIERS.tier(rt.redis, tenant)})
    return probe


def _warmer(runtime: Callable[[], object], warm_recent: int = 0, warmed: dict[str, float] | None = None):
    rt = runtime()
    return CacheWarmer(rt.redis, lambda: runtime().indexes(), on_warm=lambda t, s, job: _warmed(runtime, t, s, job),
                       vectors=rt.vectors, model=rt.settings.llm_model, warm_recent=warm_recent, warmed=warmed)


def prepare_query_worker(runtime: Callable[[], object]) -> None:
    """Before a query worker consumes (``worker_init``): the memory its index loads read into
    (``pretouched``, when configured), the LLM connection and the most recent tenants, so that a worker reported
    ready answers its first query warm. Best effort: a failure leaves it cold."""
    started = time.monotonic()
    try:
        rt = runtime()
        if touched_s := reserve(rt.settings.query.pretouch_mb):
            log.info("%d MiB touched for index loads in %.2f s", rt.settings.query.pretouch_mb, touched_s)
            started += touched_s  # the recent tenants keep their whole time
        if rt.llm is not None:
            rt.llm.preconnect()
        warmer = _warmer(runtime)
        for tenant, announced in recent_announcements(rt.redis, CACHED_TENANTS).items():
            if time.monotonic() - started > START_WARM_S:
                break
            if warmer.handle(tenant):
                _prepared[tenant] = announced
        if _probing.acquire(timeout=START_WARM_S):  # a probe started above ends before the worker consumes
            _probing.release()
    except Exception:  # noqa: BLE001 - Redis not up yet: the background warmer and the first query catch up
        log.warning("query worker warm-up before consuming failed", exc_info=True)


def install(app, runtime: Callable[[], object]) -> None:
    """Connect the worker warm-ups. Query workers run a thread pool (``-P threads``): their queries share the caches
    the warmer thread fills; other workers only announce index updates."""
    from shared.infra.messaging.queueing import QUERY, ROUTES

    def consumes_queries() -> bool:
        return ROUTES[QUERY] in set(app.amqp.queues.consume_from or ())

    @worker_init.connect(weak=False)
    def _before_consuming(**_kwargs) -> None:
        warm_worker(app, runtime)
        if consumes_queries():
            prepare_query_worker(runtime)

    @worker_process_init.connect(weak=False)
    def _in_child(**_kwargs) -> None:
        warm_child(app, runtime)

    @worker_ready.connect(weak=False)
    def _start(**_kwargs) -> None:
        if consumes_queries():  # the updates, and once the recent tenants not warmed before or announced since
            _stop.clear()
            threading.Thread(target=lambda: _warmer(runtime, CACHED_TENANTS, _prepared).run(_stop),
                             name="graphfleet-cache-warmer", daemon=True).start()

    @worker_shutdown.connect(weak=False)
    def _halt(**_kwargs) -> None:
        _stop.set()
