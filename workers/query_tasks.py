"""Query tasks, the shells of the declared query flow (``shared.pipeline.flow.QUERY``): ``query`` answers
local/naive/hybrid/causal/graph queries, and global ones that need no map phase, or plans the map groups and fans
them out on the ``map_analyst`` queue with the deadline; the last map group to answer, or the deadline, starts the
reducer. A query whose task keeps killing its worker or escapes with an error ends ``failed`` (the task shell); a
lost map group is left to the deadline, which reduces with the groups that answered."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from shared.domain.query.context_global import build_map_messages
from shared.domain.query.engine import answer_query, global_entity_hits
from shared.domain.query.global_run import answer_without_map, finish_global, start_global
from shared.infra.jobs.query_record import query_param, save_result, tenant_preset
from shared.infra.messaging.messages import GlobalMap, GlobalReduce, QueryDeadline, RunQuery
from shared.infra.store.index_loads import prefetch_cold
from shared.infra.store.stale_reads import serving_stale
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


def _text(chat):
    """``chat`` answering the text only, as the global query's pure steps take it (None stays None)."""
    return None if chat is None else (lambda messages, phase: chat(messages, phase).text)


def _param(job: Job):
    return query_param(job.jobs, job.msg.job_id, job.settings, job.fields)


@job_task(RunQuery, guard="ended", mark="retrieve", read=PARAMS)
def run_query(job: Job, msg: RunQuery) -> None:
    try:
        param = _param(job)
        chat = _chat(job)
        if param.mode == "global":
            _answer_global(job, param, chat)
            return
        ctx = job.context("embed")
        indexes = job.rt.indexes()
        prefetch_cold(job.store, indexes, job.rt.vectors, param.mode)
        with serving_stale(job.settings.query.stale_index_after_s):  # a rebuild for a newer version goes on behind
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
    embed, lexical, after = job.embed(ctx), job.rt.lexical_embedder(ctx), job.settings.query.stale_index_after_s

    def search():
        with serving_stale(after):  # as a local query's: a rebuild for a newer version goes on behind it
            return global_entity_hits(param, job.store, job.rt.vectors, embed, indexes, lexical)

    return _POOL.submit(search).result


def _answer_global(job: Job, param, chat) -> None:
    """The answer here, or the plan kept for the map and reduce tasks and the map fan-out sent with the deadline."""
    plan, result = start_global(param, job.store, entity_hits=_entity_hits(job, param))
    answered = answer_without_map(param, plan, result, _text(chat))
    if answered is not None:
        save_result(job.jobs, job.msg.job_id, answered)
        return
    job.queries.save_plan(job.msg.job_id, plan, result)
    maps, deadline = job.query_flow.map_planned(len(plan.groups), param.deadline_s, time.time())
    job.stream("map", {"done": 0, "total": len(plan.groups)})
    job.send(*maps)
    job.send(deadline, countdown=param.deadline_s)


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
    job.send(*job.query_flow.map_answered(answered, len(plan.groups)))


@job_task(QueryDeadline, guard="running", read=PARAMS)
def query_deadline(job: Job, msg: QueryDeadline) -> None:
    if job.query_flow.deadline_passed():
        _reduce(job)


@job_task(GlobalReduce, guard="running", read=PARAMS)
def global_reduce(job: Job, msg: GlobalReduce) -> None:
    _reduce(job)


def _reduce(job: Job) -> None:
    """Reduce the map groups' answers (a group missing makes the result partial) and end the query with it."""
    query_id = job.msg.job_id
    job.jobs.set(query_id, stage="reduce")
    plan, result = job.queries.plan(query_id), job.queries.partial(query_id)
    answered = job.queries.map_answers(query_id)
    results = {g.index: answered.get(g.index) for g in plan.groups}
    param, chat = _param(job), _text(_chat(job))
    try:
        result = finish_global(param, plan, result, results, chat)
    except Exception as exc:  # noqa: BLE001
        job.fail(f"reduce: {type(exc).__name__}: {exc}")
        return
    save_result(job.jobs, query_id, result)
