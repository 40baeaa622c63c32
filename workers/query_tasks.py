"""Query tasks: ``query`` answers local/naive/hybrid/causal inline and fans global out as one
map task per group on the ``map_analyst`` queue; the last map (or the deadline) triggers the reducer.
Each task runs under ``workers.delivery.JobTask`` (redelivery cap, error path): a query whose task
keeps killing its worker or escapes with an error ends ``failed``; a lost map group is left to the
deadline, which reduces with the groups that answered."""

from __future__ import annotations

import json
import logging
import time

from shared.domain.query.context_global import GlobalPlan, build_map_messages
from shared.domain.query.engine import answer_query
from shared.domain.query.global_run import finish_global, start_global
from shared.domain.query.params import QueryParam
from shared.domain.query.result import PhaseUsage, QueryResult
from shared.infra import queueing as q
from shared.infra.llm.usage import CallContext, job_usage
from shared.infra.store.bm25_cache import BM25Cache
from workers.celery_app import app
from workers.delivery import JobTask
from workers.runtime import runtime

log = logging.getLogger(__name__)
_bm25: BM25Cache | None = None


def _bm25_provider(redis) -> BM25Cache:
    global _bm25
    if _bm25 is None or _bm25.redis is not redis:
        _bm25 = BM25Cache(redis)
    return _bm25


def _param(jobs, query_id: str, settings) -> QueryParam:
    raw = json.loads(jobs.get_field(query_id, "params") or "{}")
    param = QueryParam.model_validate(raw)
    if param.model is None:
        param.model = settings.llm_model
    if param.model_context_limit is None:
        from shared.domain.query.budget import model_context_limit

        param.model_context_limit = model_context_limit(param.model, table=settings.query.context_limits or None)
    return param


def _chat(rt, tenant: str, query_id: str, queue: str):
    if rt.llm is None:
        return None
    ctx = CallContext(tenant=tenant, stage="answer", job_id=query_id, queue=queue)
    return lambda messages, phase: rt.llm.chat(messages, ctx.with_stage(phase))


def _save(rt, tenant: str, query_id: str, result: QueryResult, started: float) -> None:
    jobs = rt.jobs(tenant)
    usage = job_usage(rt.redis, tenant, query_id)
    result.usage = {stage: PhaseUsage(calls=v.get("calls", 0), prompt_tokens=v.get("prompt_tokens", 0),
                                      completion_tokens=v.get("completion_tokens", 0))
                    for stage, v in usage["by_stage"].items()}
    payload = result.model_dump(mode="json")
    payload["seconds"] = round(time.time() - started, 4)
    payload["total_usage"] = {k: usage[k] for k in ("calls", "prompt_tokens", "completion_tokens", "cost_usd")}
    jobs.finish(query_id, "failed" if result.answer_kind == "none" and result.partial else "succeeded",
                result=json.dumps(payload))


@app.task(name=q.QUERY, bind=True, base=JobTask)
def run_query(self, tenant: str, query_id: str) -> None:
    rt = runtime()
    jobs, store = rt.jobs(tenant), rt.store(tenant)
    if jobs.status(query_id) in ("succeeded", "failed", "canceled"):
        return
    started = float(jobs.get_field(query_id, "created_at") or time.time())
    jobs.mark_running(query_id, "retrieve")
    try:
        param = _param(jobs, query_id, rt.settings)
        chat = _chat(rt, tenant, query_id, "query")
        if param.mode == "global":
            _start_global(rt, tenant, query_id, param, store, chat is not None)
            return
        ctx = CallContext(tenant=tenant, stage="embed", job_id=query_id, queue="query")
        indexes = _bm25_provider(rt.redis)
        result = answer_query(param, store, rt.vectors, lambda texts: rt.embedder.embed(texts, ctx), chat,
                              indexes, prices=rt.settings.llm.prices, walk_provider=indexes.walk,
                              lexical_embedder=rt.lexical_embedder(ctx),
                              tenant_preset=rt.settings.query.tenant_presets.get(tenant))
    except Exception as exc:  # noqa: BLE001 - the job records the cause instead of hanging
        log.exception("query %s failed", query_id)
        jobs.finish(query_id, "failed", error=f"{type(exc).__name__}: {exc}"[:500])
        return
    _save(rt, tenant, query_id, result, started)


def _start_global(rt, tenant: str, query_id: str, param: QueryParam, store, llm: bool) -> None:
    plan, result = start_global(param, store)
    if param.only_need_context or not llm or not plan.groups:
        if not param.only_need_context:
            from shared.domain.query.result import extractive_answer

            result.answer = extractive_answer(param.query, result.sources)
            result.answer_kind = "extractive" if result.answer else "none"
        _save(rt, tenant, query_id, result, float(rt.jobs(tenant).get_field(query_id, "created_at")))
        return
    k = store.k
    pipe = rt.redis.pipeline()
    pipe.set(k.query(query_id) + ":plan", plan.model_dump_json())
    pipe.set(k.query(query_id) + ":result", result.model_dump_json())
    pipe.execute()
    rt.jobs(tenant).set(query_id, stage="map", map_groups=len(plan.groups))
    for group in plan.groups:
        app.send_task(q.GLOBAL_MAP, args=[tenant, query_id, group.index])
    app.send_task(q.QUERY_DEADLINE, args=[tenant, query_id], countdown=param.deadline_s)


@app.task(name=q.GLOBAL_MAP, bind=True, base=JobTask, give_up=staticmethod(lambda *_: None))
def global_map(self, tenant: str, query_id: str, group_index: int) -> None:
    rt = runtime()
    jobs, store = rt.jobs(tenant), rt.store(tenant)
    if jobs.status(query_id) != "running":
        return
    plan = GlobalPlan.model_validate_json(rt.redis.get(store.k.query(query_id) + ":plan"))
    group = next(g for g in plan.groups if g.index == group_index)
    param = _param(jobs, query_id, rt.settings)
    chat = _chat(rt, tenant, query_id, "map_analyst")
    began = time.time()
    try:
        text = chat(build_map_messages(group, param.query), "map").text
    except Exception as exc:  # noqa: BLE001 - a failed group makes the answer partial, not hung
        log.warning("map group %s of %s failed: %s", group_index, query_id, exc)
        text = ""
    pipe = rt.redis.pipeline()
    pipe.hset(store.k.query(query_id) + ":maptimes", str(group_index),
              json.dumps([began, time.time(), self.request.hostname]))
    pipe.hset(store.k.query_map_results(query_id), str(group_index), text)
    pipe.hlen(store.k.query_map_results(query_id))
    answered = pipe.execute()[-1]
    if answered >= len(plan.groups) and jobs.claim_advance(query_id, "reduce", self.request.id):
        app.send_task(q.GLOBAL_REDUCE, args=[tenant, query_id])


@app.task(name=q.QUERY_DEADLINE, bind=True, base=JobTask)
def query_deadline(self, tenant: str, query_id: str) -> None:
    rt = runtime()
    jobs = rt.jobs(tenant)
    if jobs.status(query_id) == "running" and jobs.claim_advance(query_id, "reduce", "deadline"):
        global_reduce.run(tenant, query_id)


@app.task(name=q.GLOBAL_REDUCE, bind=True, base=JobTask)
def global_reduce(self, tenant: str, query_id: str) -> None:
    rt = runtime()
    jobs, store = rt.jobs(tenant), rt.store(tenant)
    if jobs.status(query_id) != "running":
        return
    jobs.set(query_id, stage="reduce")
    plan = GlobalPlan.model_validate_json(rt.redis.get(store.k.query(query_id) + ":plan"))
    result = QueryResult.model_validate_json(rt.redis.get(store.k.query(query_id) + ":result"))
    raw = rt.redis.hgetall(store.k.query_map_results(query_id))
    answered = {int(k): (v.decode() if isinstance(v, bytes) else v) or None for k, v in raw.items()}
    results = {g.index: answered.get(g.index) for g in plan.groups}
    param = _param(jobs, query_id, rt.settings)
    chat = _chat(rt, tenant, query_id, "reducer")
    try:
        result = finish_global(param, plan, result, results, lambda m, phase: chat(m, phase).text)
    except Exception as exc:  # noqa: BLE001
        jobs.finish(query_id, "failed", error=f"reduce: {type(exc).__name__}: {exc}"[:500])
        return
    _save(rt, tenant, query_id, result, float(jobs.get_field(query_id, "created_at")))
