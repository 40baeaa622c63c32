"""Per-process clients (Redis pool, LLM client, vector store, embedder), built once per process on first use
after fork: every task of the process shares them (the local embedder's weights are read once)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from celery.signals import worker_process_init

from shared.config import get_settings
from shared.infra.jobs.query_state import QueryStore
from shared.infra.jobs.store import JobStore
from shared.infra.llm.client import LLMClient
from shared.infra.llm.embedding import is_lexical, make_embedder
from shared.infra.redis.conn import connect
from shared.infra.redis.key_migration import ensure_layout
from shared.infra.redis.keys import embedder_lexical_key
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.factory import make_vector_store
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.warmup import announce_index_update, await_warm_ups
from shared.infra.tenancy.tenants import TenantStore
from shared.infra.tenancy.usage import CallContext, UsageRecorder


@dataclass
class Runtime:
    settings: object
    redis: object
    recorder: UsageRecorder
    llm: LLMClient | None
    vectors: object
    embedder: object
    pid: int = field(default_factory=os.getpid)
    _lexical: bool | None = None
    _indexes: BM25Cache | None = None

    def lexical_embedder(self, ctx: CallContext) -> bool:
        """Whether the embedder only sees words (see ``shared.infra.llm.embedding``): measured once per
        deployment and embedding model (kept in Redis for the other processes). A failed probe counts as a
        model that knows meaning and is tried again by the next query."""
        if self._lexical is None:
            self._lexical = self._known_lexical()
            if self._lexical is None:
                try:
                    self._lexical = is_lexical(self.embedder, ctx)
                except Exception:  # noqa: BLE001 - the embedder is down: the query's own embed call will say so
                    return False
                self.redis.set(embedder_lexical_key(getattr(self.embedder, "name", "")), int(self._lexical))
        return self._lexical

    def _known_lexical(self) -> bool | None:
        declared = getattr(self.embedder, "lexical", None)
        known = self.redis.get(embedder_lexical_key(getattr(self.embedder, "name", "")))
        return bool(declared) if declared is not None else None if known is None else known in (b"1", "1")

    def store(self, tenant: str) -> GraphStore:
        return GraphStore(self.redis, tenant, lock_timeout_s=self.settings.workers.task_soft_time_limit_s,
                          snapshots=self.indexes().snapshots)

    def jobs(self, tenant: str) -> JobStore:
        return JobStore(self.redis, tenant)

    def tenants(self) -> TenantStore:
        return TenantStore(self.redis)

    def queries(self, tenant: str) -> QueryStore:
        return QueryStore(self.redis, tenant)

    def indexes(self) -> BM25Cache:
        """This process's parsed BM25 indexes and graph-walk indexes (shared by the query threads and the
        cache warmer); rebuilt when the Redis client changes."""
        if self._indexes is None or self._indexes.redis is not self.redis:
            self._indexes = BM25Cache(self.redis, synonyms=self.settings.embedding.synonym_threshold is not None,
                                      max_bytes=self.settings.query.index_cache_mb * 2**20,
                                      snapshot_bytes=self.settings.query.index_snapshot_mb * 2**20)
        return self._indexes

    def announce_index_update(self, tenant: str, job_id: str | None = None) -> None:
        """Query workers warm ``tenant``'s changed index; with ``job_id``, wait (≤ workers.warm_wait_s) until done."""
        listeners = announce_index_update(self.redis, tenant, job_id)
        if job_id:
            await_warm_ups(self.redis, tenant, job_id, listeners, self.settings.workers.warm_wait_s)

    def chat_fn(self, ctx: CallContext, model: str | None = None, cancel_check=None, max_tokens: int | None = None,
                cached: bool = True):
        """``chat(messages, stage) -> text`` bound to a call context (None without an LLM), answers capped;
        ``cached=False`` neither reads nor writes the LLM answer cache."""
        if self.llm is None:
            return None

        def chat(messages: list[dict], stage: str) -> str:
            if cancel_check is not None and cancel_check():
                from shared.infra.llm.client import CanceledError

                raise CanceledError("job canceled")
            return self.llm.chat(messages, ctx.with_stage(stage), model=model, max_tokens=max_tokens or None,
                                 use_cache=cached).text

        return chat


_lock = threading.Lock()
_runtime: Runtime | None = None


def build_runtime() -> Runtime:
    settings = get_settings()
    if not settings.redis_url:
        raise RuntimeError("GRAPHFLEET_REDIS_URL is not set for this worker")
    settings.check_llm_mode()  # no silent LLM-free fallback in production (GRAPHFLEET_LLM_FREE)
    redis = connect(settings.redis_url, settings)
    ensure_layout(redis)
    recorder = UsageRecorder(redis, listeners=_metric_listeners())
    llm = LLMClient(settings, redis, recorder, limiter=make_limiter(settings, redis)) if settings.llm_enabled else None
    vectors, embedder = make_vector_store(settings, redis), make_embedder(settings, llm, recorder)
    return Runtime(settings, redis, recorder, llm, vectors, embedder)


def make_limiter(settings, redis):
    """The global LLM rate limit from ``settings.ratelimit``, or None (no limit) when disabled."""
    from shared.infra.llm.ratelimit import RedisRateLimiter

    return RedisRateLimiter(redis, settings.ratelimit) if settings.ratelimit.enabled else None


def _metric_listeners() -> list:
    try:
        from shared.infra.observability.metrics import usage_listener
    except ImportError:
        return []
    return [usage_listener]


def runtime() -> Runtime:
    global _runtime
    if _runtime is None or _runtime.pid != os.getpid():
        with _lock:
            if _runtime is None or _runtime.pid != os.getpid():
                _runtime = build_runtime()
    return _runtime


@worker_process_init.connect
def _reset_after_fork(**_kwargs) -> None:
    global _runtime
    _runtime = None
