"""Query tasks: ``query`` answers local/naive/hybrid/causal/graph inline, and global inline too when its selected
reports fit one call (else it fans out one map task per group on the ``map_analyst`` queue; the last map, or the
deadline, triggers the reducer). A query whose task keeps killing its worker or escapes with an error ends
``failed`` (the task shell); a lost map group is left to the deadline, which reduces with the groups that answered."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from shared.domain.query.context_global import build_map_messages
from shared.domain.query.engine import answer_query, global_entity_hits
from shared.domain.query.global_run import answer_direct, finish_global, start_global
from shared.domain.query.result import extractive_answer
from shared.infra.messages import GlobalMap, GlobalReduce, QueryDeadline, RunQuery
from shared.pipeline.query_stage import query_param, save_result, tenant_preset
from workers.job import Job
from workers.shell import job_task

log = logging.getLogger(__name__)
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="gf-entity-search")
STREAMED = ("answer", "reduce")  # phases whose tokens are published as the LLM produces them
PARAMS = ("params",)  # the job field each query task reads first: read at its admission (``workers.shell``)


def _chat(job: Job):
    """``chat(messages, phase) -> ChatResult`` for this query (usage booked per phase), or None without an LLM;
    the answer (and the global reduce) is streamed: each token becomes a ``token`` event of the query, all of
    them written before the call returns (so before the query is finished)."""
    llm = job.rt.llm
    if llm is None:
        return None
    ctx = job.context("answer")

    def chat(messages, phase):
        if phase not in STREAMED:
            return llm.chat(messages, ctx.with_stage(phase))
        tokens = job.queries.token_sink(job.msg.job_id)
        try:
            return llm.chat(messages, ctx.with_stage(phase), on_token=tokens)
        finally:
            tokens.flush()

    return chat


def _param(job: Job):
    return query_param(job.jobs, job.msg.job_id, job.settings, job.fields)


@job_task(RunQuery, guard="ended", mark="retrieve", read=PARAMS)
def run_query(job: Job, msg: RunQuery) -> None:
    try:
        param = _param(job)
        chat = _chat(job)
        if param.mode == "global":
            _start_global(job, param, chat is not None)
            return
        ctx = job.context("embed")
        indexes = job.rt.indexes()
        result = answer_query(param, job.store, job.rt.vectors, job.embed(ctx), chat, indexes,
                              prices=job.settings.llm.prices, walk_provider=indexes.walk,
                              lexical_embedder=job.rt.lexical_embedder(ctx),
                              tenant_preset=tenant_preset(job.rt.tenants(), job.settings, msg.tenant))
    except Exception as exc:  # noqa: BLE001 - the job records the cause instead of hanging
        job.fail_query(exc)
        return
    save_result(job.jobs, msg.job_id, result)


def _entity_hits(job: Job, param):
    """The question's entity search, started now and read by ``start_global`` once it loaded the reports."""
    ctx, indexes = job.context("embed"), job.rt.indexes()
    return _POOL.submit(global_entity_hits, param, job.store, job.rt.vectors, job.embed(ctx), indexes,
                        job.rt.lexical_embedder(ctx)).result


def _start_global(job: Job, param, llm: bool) -> None:
    plan, result = start_global(param, job.store, entity_hits=_entity_hits(job, param))
    if param.only_need_context or not llm or not plan.groups:
        if not param.only_need_context:
            result.answer = extractive_answer(param.query, result.sources)
            result.answer_kind = "extractive" if result.answer else "none"
        save_result(job.jobs, job.msg.job_id, result)
        return
    chat = _chat(job)
    direct = answer_direct(param, plan, result, lambda m, phase: chat(m, phase).text)
    if direct is not None:  # the selected reports fit one call: answered here, no map phase
        save_result(job.jobs, job.msg.job_id, direct)
        return
    if len(plan.groups) == 1:  # one map call: here, without the hops to a map worker and to the reduce
        try:
            text = chat(build_map_messages(plan.groups[0], param.query), "map").text
        except Exception as exc:  # noqa: BLE001 - a failed group makes the answer partial, not hung
            log.warning("map of %s failed: %s", job.msg.job_id, exc)
            text = None
        save_result(job.jobs, job.msg.job_id,
                    finish_global(param, plan, result, {0: text}, lambda m, phase: chat(m, phase).text))
        return
    job.queries.save_plan(job.msg.job_id, plan, result)
    job.jobs.set(job.msg.job_id, stage="map", map_groups=len(plan.groups))
    job.stream("map", {"done": 0, "total": len(plan.groups)})
    job.send(*(GlobalMap(job.msg.tenant, job.msg.job_id, group.index) for group in plan.groups))
    job.send(QueryDeadline(job.msg.tenant, job.msg.job_id), countdown=param.deadline_s)


@job_task(GlobalMap, guard="running", read=PARAMS, give_up=lambda job, cause: None)
def global_map(job: Job, msg: GlobalMap) -> None:
    plan = job.queries.plan(msg.job_id)
    group = next(g for g in plan.groups if g.index == msg.group)
    param = _param(job)
    began = time.time()
    try:
        text = _chat(job)(build_map_messages(group, param.query), "map").text
    except Exception as exc:  # noqa: BLE001 - a failed group makes the answer partial, not hung
        log.warning("map group %s of %s failed: %s", msg.group, msg.job_id, exc)
        text = ""
    answered = job.queries.record_map(msg.job_id, msg.group, text, began, time.time(), job.worker, len(plan.groups))
    if answered >= len(plan.groups) and job.jobs.claim_advance(msg.job_id, "reduce", job.token):
        job.send(GlobalReduce(msg.tenant, msg.job_id))


@job_task(QueryDeadline, guard="running", read=PARAMS)
def query_deadline(job: Job, msg: QueryDeadline) -> None:
    if job.jobs.claim_advance(msg.job_id, "reduce", "deadline"):
        _reduce(job)


@job_task(GlobalReduce, guard="running", read=PARAMS)
def global_reduce(job: Job, msg: GlobalReduce) -> None:
    _reduce(job)


def _reduce(job: Job) -> None:
    query_id = job.msg.job_id
    job.jobs.set(query_id, stage="reduce")
    plan, result = job.queries.plan(query_id), job.queries.partial(query_id)
    answered = job.queries.map_answers(query_id)
    results = {g.index: answered.get(g.index) for g in plan.groups}
    param = _param(job)
    chat = _chat(job)
    try:
        result = finish_global(param, plan, result, results, lambda m, phase: chat(m, phase).text)
    except Exception as exc:  # noqa: BLE001
        job.fail(f"reduce: {type(exc).__name__}: {exc}")
        return
    save_result(job.jobs, query_id, result)
