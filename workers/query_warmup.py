"""Runs the query cache warmer (``shared.infra.cache_warmup``) in a daemon thread of every worker process
that consumes the ``query`` queue. Query workers run a thread pool (``-P threads``, as in
``graphfleet up`` and docker-compose), so the queries share this process's caches; under a prefork
pool the children would keep their own caches and this warmer would not reach them. Other workers
only announce index updates.

Before such a worker consumes (``worker_init``), it readies what every query uses whatever its tenant (the BM25
library's import, a Redis connection, a keep-alive connection to the LLM API, the embedder probe when another
process already measured it; Celery's backend and the OpenAI SDK's lazily built models are warmed in every worker,
``workers.celery_app._warm_up``) and the tenants whose index changed most recently, as far as the cache has room
and for at most ``START_WARM_S`` (``shared.infra.cache_warmup``): a worker that reports ready answers its first
query warm."""

from __future__ import annotations

import json
import logging
import threading
import time

from celery.signals import worker_init, worker_ready, worker_shutdown

from shared.domain.retrieval import bm25
from shared.infra.cache_warmup import CacheWarmer, recent_announcements
from shared.infra.llm import wire
from shared.infra.llm.usage import CallContext
from shared.infra.lru import CACHED_TENANTS
from shared.infra.metrics import observe_cache_warmup, prime_query_series
from shared.infra.queueing import QUERY, ROUTES
from shared.infra.tiers import TIERS
from workers.runtime import runtime

log = logging.getLogger(__name__)
_stop = threading.Event()
_prepared: dict[str, float] = {}  # tenant -> the announcement its caches were warmed after, before consuming


START_WARM_S = 5.0  # before consuming, recent tenants are warmed for at most this long (the rest: in the background)


def _warmed(tenant: str, seconds: float) -> None:
    """After a tenant's caches: the embedder probe, if no process measured it yet (a new deployment's first
    index): one 20-word embedding call, booked to that tenant as its first query would have been; and, with an
    LLM, the metric series its next answer writes, created at zero (``prime_query_series``)."""
    observe_cache_warmup(seconds)
    log.info("query caches of tenant %s warmed in %.3f s", tenant, seconds)
    rt = runtime()
    rt.lexical_embedder(CallContext(tenant=tenant, stage="embed", queue=ROUTES[QUERY]))
    if rt.llm is not None:
        prime_query_series(rt.settings.llm_model, ROUTES[QUERY], QUERY, {tenant: TIERS.tier(rt.redis, tenant)})


def _warmer(rt, warm_recent: int = 0, warmed: dict[str, float] | None = None) -> CacheWarmer:
    return CacheWarmer(rt.redis, lambda: runtime().indexes(), on_warm=_warmed, vectors=rt.vectors,
                       model=rt.settings.llm_model, warm_recent=warm_recent, warmed=warmed)


def _prepare() -> None:
    """Before the worker consumes (``worker_init``): the clients and the most recent tenants, so that
    a worker reported ready answers its first query warm. Best effort: a failure only leaves it cold."""
    started = time.monotonic()
    try:
        bm25.preload()
        rt = runtime()
        rt.warm_clients()
        if rt.llm is not None:
            rt.llm.preconnect()
        warmer = _warmer(rt)
        for tenant, announced in recent_announcements(rt.redis, CACHED_TENANTS).items():
            if time.monotonic() - started > START_WARM_S:
                break
            if warmer.handle(tenant):
                _prepared[tenant] = announced
    except Exception:  # noqa: BLE001 - Redis not up yet: the background warmer and the first query catch up
        log.warning("query worker warm-up before consuming failed", exc_info=True)


def _loop() -> None:
    """The background warmer: index updates, and once the recent tenants that ``_prepare`` did not warm or that
    were announced again since."""
    _warmer(runtime(), warm_recent=CACHED_TENANTS, warmed=_prepared).run(_stop)


_COMPLETION = {"id": "warm", "object": "chat.completion", "created": 0, "model": "warm",
               "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
_CHUNKS = [{"id": "warm", "object": "chat.completion.chunk", "created": 0, "model": "warm",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}]},
           {"id": "warm", "object": "chat.completion.chunk", "created": 0, "model": "warm", "choices": [],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}]
_EMBEDDING = {"object": "list", "model": "warm", "data": [{"object": "embedding", "index": 0, "embedding": [0.0]}],
              "usage": {"prompt_tokens": 1, "total_tokens": 1}}


def warm_openai_sdk() -> None:
    """One chat completion (plain, and streamed) and one embedding sent as ``LLMClient`` sends them
    (``shared.infra.llm.wire``) through the SDK against an in-memory transport: the SDK builds its request
    options, headers and status handling on first use (CPU at a process's first query); these caches are the
    SDK's, shared by every client of the process. No request leaves the process, nothing is booked. Best
    effort."""
    try:
        import openai

        http = wire.sdk_http()

        def answer(request):
            body = json.loads(request.content or b"{}")
            if request.url.path.endswith("/embeddings"):
                return http.Response(200, json=_EMBEDDING)
            if body.get("stream"):
                events = "".join(f"data: {json.dumps(c)}\n\n" for c in _CHUNKS) + "data: [DONE]\n\n"
                return http.Response(200, content=events.encode(), headers={"content-type": "text/event-stream"})
            return http.Response(200, json=_COMPLETION)

        client = openai.OpenAI(base_url="http://warm.invalid/v1", api_key="warm", max_retries=0,
                               http_client=openai.DefaultHttpxClient(transport=http.MockTransport(answer)))
        messages = [{"role": "user", "content": "warm"}]
        body = {"model": "warm", "messages": messages, "temperature": 0.0}
        wire.chat(client, body)
        wire.chat_stream(client, body, lambda _piece: None)
        wire.embed(client, "warm", ["warm"])
    except Exception:  # noqa: BLE001 - the first query builds them instead
        log.warning("OpenAI SDK warm-up failed", exc_info=True)


def install(app) -> None:
    @worker_init.connect(weak=False)
    def _before_consuming(**_kwargs) -> None:
        if ROUTES[QUERY] in set(app.amqp.queues.consume_from or ()):
            _prepare()

    @worker_ready.connect(weak=False)
    def _start(**_kwargs) -> None:
        if ROUTES[QUERY] not in set(app.amqp.queues.consume_from or ()):
            return
        _stop.clear()
        threading.Thread(target=_loop, name="graphfleet-cache-warmer", daemon=True).start()

    @worker_shutdown.connect(weak=False)
    def _halt(**_kwargs) -> None:
        _stop.set()
