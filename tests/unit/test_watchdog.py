"""The job watchdog: what a stalled job still has to do (pure), and when a sweep resumes it (real Redis)."""

from __future__ import annotations

import json

import pytest

from shared.config import Settings
from shared.infra.jobs.store import JobSnapshot, JobStore
from shared.infra.messaging import queueing as q
from shared.infra.messaging.broker_probe import RedisProbe
from shared.infra.redis.keys import Keys, active_jobs_key
from shared.pipeline.resume import Step, plan_resume
from shared.pipeline.watchdog import Watchdog, jobs_with_messages


def snap(kind="ingest", status="running", flags=(), batches_done=None, **fields) -> JobSnapshot:
    base = {"kind": kind, "status": status}
    base.update({k: (json.dumps(v) if isinstance(v, list) else str(v)) for k, v in fields.items()})
    s = JobSnapshot(tenant="acme", job_id="job-1", fields=base, flags=dict.fromkeys(flags, "tok"),
                    batches_done=batches_done or {})
    s.docs, s.docs_done = {"d1", "d2"}, {"d1", "d2"}
    s.chunks, s.chunks_done = {"c1", "c2", "c3"}, {"c1", "c2", "c3"}
    return s


def tasks(steps: list[Step]) -> list[tuple]:
    return [(s.task, s.args, s.claim) for s in steps]


def test_finished_jobs_have_nothing_to_resume():
    for status in ("succeeded", "failed", "canceled"):
        assert plan_resume(snap(status=status)) == []


def test_unchunked_documents_are_chunked_again_and_a_delete_job_deletes_again():
    s = snap()
    s.docs_done = {"d1"}
    assert tasks(plan_resume(s)) == [(q.CHUNK, ("d2",), None)]
    s = snap(kind="delete")
    s.docs, s.docs_done = {"d9"}, set()
    assert tasks(plan_resume(s)) == [(q.DELETE_DOCUMENT, ("d9",), None)]


def test_only_the_chunks_not_finished_are_extracted_again():
    s = snap()
    s.chunks_done = {"c2"}
    assert tasks(plan_resume(s)) == [(q.EXTRACT, ("c1",), None), (q.EXTRACT, ("c3",), None)]
    assert plan_resume(s)[0].message_args(s) == ["acme", "job-1", "c1"]


def test_merge_is_claimed_then_planned_then_only_missing_batches_run():
    assert tasks(plan_resume(snap())) == [(q.PLAN_MERGE, (), "merge")]
    assert tasks(plan_resume(snap(flags=["merge"]))) == [(q.PLAN_MERGE, (), None)]
    s = snap(flags=["merge"], merge_batches=3, batches_done={"merge": {0, 2}})
    assert tasks(plan_resume(s)) == [(q.MERGE, (1,), None)]


def test_after_merge_index_and_cluster_start_under_the_cluster_claim():
    s = snap(flags=["merge"], merge_batches=1, batches_done={"merge": {0}})
    assert tasks(plan_resume(s)) == [(q.INDEX, (), "cluster"), (q.CLUSTER, (), None)]


def test_reports_resume_at_the_wave_in_progress():
    levels = [[2, ["a", "b"]], [1, ["c"]], [0, ["d"]]]
    base = dict(flags=["merge", "cluster"], merge_batches=1)
    # clustered, nothing planned yet; the index already finished
    s = snap(**base, index_done=1, report_waves=levels, batches_done={"merge": {0}})
    assert tasks(plan_resume(s)) == [(q.PLAN_REPORTS, (0,), None)]
    # not clustered yet and the index not done either
    s = snap(**base, batches_done={"merge": {0}})
    assert tasks(plan_resume(s)) == [(q.INDEX, (), None), (q.CLUSTER, (), None)]
    # level 1 planned with 2 batches, batch 1 missing
    s = snap(**base, index_done=1, report_waves=levels, report0_batches=2, report1_batches=2,
             batches_done={"merge": {0}, "report0": {0, 1}, "report1": {0}})
    assert tasks(plan_resume(s)) == [(q.REPORT, (1, 1), None)]
    # level 1 done: claim the advance to level 2 (or resend it when it was claimed and lost)
    s.batches_done["report1"] = {0, 1}
    assert tasks(plan_resume(s)) == [(q.PLAN_REPORTS, (2,), "report1_next")]
    s.flags["report1_next"] = "tok"
    assert tasks(plan_resume(s)) == [(q.PLAN_REPORTS, (2,), None)]
    # an empty level advances without a claim, as plan_reports itself does
    s = snap(**base, index_done=1, report_waves=levels, report0_batches=0, batches_done={"merge": {0}})
    assert tasks(plan_resume(s)) == [(q.PLAN_REPORTS, (1,), None)]


def test_finalize_once_reports_and_index_are_done():
    s = snap(flags=["merge", "cluster"], merge_batches=0, reports_done=1, index_done=1)
    assert tasks(plan_resume(s)) == [(q.FINALIZE, (), "finalize")]
    s.flags["finalize"] = "tok"
    assert tasks(plan_resume(s)) == [(q.FINALIZE, (), None)]
    s = snap(flags=["merge", "cluster"], merge_batches=0, reports_done=1)
    assert tasks(plan_resume(s)) == [(q.INDEX, (), None)]


def test_a_query_job_is_answered_again():
    assert tasks(plan_resume(snap(kind="query", status="queued"))) == [(q.QUERY, (), None)]


def test_a_global_query_resumes_its_missing_map_group_then_past_its_deadline_the_deadline(redis_client, tenant):
    from shared.infra.jobs.query_state import QueryStore
    from shared.pipeline.flow import QueryFlow

    jobs = JobStore(redis_client, tenant)
    jobs.create("qry-1", "query", params={"query": "who?", "mode": "global"})
    jobs.mark_running("qry-1", "retrieve")
    maps, _deadline = QueryFlow(jobs, tenant, "qry-1", "task-1").map_planned(3, 60.0, now=1000.0)
    assert len(maps) == 3
    for group in (0, 2):
        QueryStore(redis_client, tenant).record_map("qry-1", group, "", 1000.0, 1001.0, "map@h", 3)
    stalled = jobs.snapshot("qry-1")
    assert tasks(plan_resume(stalled, now=1030.0)) == [(q.GLOBAL_MAP, (1,), None)]
    assert tasks(plan_resume(stalled, now=1060.0)) == [(q.QUERY_DEADLINE, (), None)]  # lost with the group
    assert jobs.claim_advance("qry-1", "reduce", "deadline")  # the deadline fired: its reduce is what is left
    assert tasks(plan_resume(jobs.snapshot("qry-1"), now=1060.0)) == [(q.GLOBAL_REDUCE, (), None)]


# ---- sweeps against a real Redis


@pytest.fixture()
def watchdog(redis_client):
    redis_client.delete(active_jobs_key(), "gf:watchdog", "extractor", "unacked")
    settings = Settings(redis_url="redis://unused", workers={"watchdog_interval_s": 1, "stall_timeout_s": 10})
    sent: list[tuple[str, list]] = []
    # the broker's queues and unacked hash are read from this Redis, whatever the session's broker
    yield Watchdog(redis_client, settings, lambda msg: sent.append((msg.TASK, msg.args())),
                   probe=RedisProbe(redis_client)), sent
    redis_client.delete(active_jobs_key(), "gf:watchdog", "extractor", "unacked")


def _running_job(redis, tenant: str) -> str:
    jobs = JobStore(redis, tenant)
    jobs.create("job-a", "ingest", ["d1"])
    jobs.mark_running("job-a", "extract")
    jobs.doc_chunked("job-a", "d1")
    jobs.add_chunks("job-a", ["c1", "c2"])
    jobs.chunk_finished("job-a", "c1")
    return "job-a"


@pytest.mark.serial  # global sweep keys and lock: another stack's watchdog on the same Redis would sweep first
def test_a_stalled_job_with_no_message_anywhere_is_resumed_once(redis_client, tenant, watchdog):
    dog, sent = watchdog
    job = _running_job(redis_client, tenant)
    assert dog.sweep(now=1000) == []  # first sight
    assert dog.sweep(now=1009) == []  # not stalled long enough
    assert dog.sweep(now=1011) == []  # stalled, absent from the broker once
    resumed = dog.sweep(now=1012)  # absent twice: resumed
    assert [(t, j, [s.task for s in steps]) for t, j, steps in resumed] == [(tenant, job, [q.EXTRACT])]
    assert sent == [(q.EXTRACT, [tenant, job, "c2"])]
    assert redis_client.hget(Keys(tenant).job(job), "resumes") == b"1"
    # the resume restarts the stall clock: nothing more is sent right away
    assert dog.sweep(now=1013) == [] and len(sent) == 1


@pytest.mark.serial  # global sweep keys and lock: another stack's watchdog on the same Redis would sweep first
def test_a_job_with_a_message_queued_or_in_flight_is_left_alone(redis_client, tenant, watchdog):
    dog, sent = watchdog
    job = _running_job(redis_client, tenant)
    message = json.dumps({"headers": {"task": q.EXTRACT, "argsrepr": repr([tenant, job, "c2"])}})
    redis_client.lpush("extractor", message)
    for now in (1000, 1011, 1012, 1013):
        assert dog.sweep(now=now) == []
    redis_client.delete("extractor")
    redis_client.hset("unacked", "tag", json.dumps([json.loads(message), "", "extractor"]))
    assert jobs_with_messages(redis_client, {job, "job-other"}, ["extractor"]) == {job}
    for now in (1014, 1015, 1016):
        assert dog.sweep(now=now) == []
    assert sent == []


def _dog(redis_client, probe, sent: list) -> Watchdog:
    settings = Settings(redis_url="redis://unused",
                        workers={"watchdog_interval_s": 1, "stall_timeout_s": 100, "lost_timeout_s": 10})
    return Watchdog(redis_client, settings, lambda msg: sent.append((msg.TASK, msg.args())), probe=probe)


@pytest.mark.serial  # global sweep keys and lock: another stack's watchdog on the same Redis would sweep first
def test_on_a_redis_broker_a_job_that_lost_its_message_is_resumed_after_the_lost_timeout(redis_client, tenant,
                                                                                          watchdog):
    """A worker killed between kombu's BRPOP and its ``QoS.append`` leaves the message in neither its queue nor
    ``unacked``: on a Redis broker, where the sweep sees every message, ``lost_timeout_s`` (shorter than the
    stall timeout) is enough to resume the job; a job whose message sits in ``unacked`` is still left alone."""
    sent: list = []
    dog = _dog(redis_client, RedisProbe(redis_client), sent)
    job = _running_job(redis_client, tenant)
    assert dog.stall_timeout() == 10
    assert dog.sweep(now=1000) == [] and dog.sweep(now=1009) == []  # no progress for less than 10 s
    assert dog.sweep(now=1011) == []  # no progress for 10 s, absent from the broker once
    resumed = dog.sweep(now=1012)  # absent twice: resumed, long before the 100 s stall timeout
    assert [(t, j, [s.task for s in steps]) for t, j, steps in resumed] == [(tenant, job, [q.EXTRACT])]
    assert sent == [(q.EXTRACT, [tenant, job, "c2"])]

    message = json.dumps({"headers": {"task": q.EXTRACT, "argsrepr": repr([tenant, job, "c2"])}})
    redis_client.hset("unacked", "tag", json.dumps([json.loads(message), "", "extractor"]))  # a dead worker's
    for now in (1030, 1041, 1042, 1043):
        assert dog.sweep(now=now) == []
    assert len(sent) == 1


@pytest.mark.serial  # global sweep keys and lock: another stack's watchdog on the same Redis would sweep first
def test_a_probe_that_cannot_see_every_message_keeps_the_stall_timeout(redis_client, tenant, watchdog):
    class Coarse(RedisProbe):
        kind = "amqp"  # RabbitMQ's probe: a queue cannot be read without taking its messages

    sent: list = []
    dog = _dog(redis_client, Coarse(redis_client), sent)
    _running_job(redis_client, tenant)
    assert dog.stall_timeout() == 100
    for now in (1000, 1011, 1012, 1050):
        assert dog.sweep(now=now) == []
    assert dog.sweep(now=1101) == [] and dog.sweep(now=1102) != []  # after the stall timeout


@pytest.mark.serial  # global sweep keys and lock: another stack's watchdog on the same Redis would sweep first
def test_progress_resets_the_stall_clock_and_finished_jobs_leave_the_index(redis_client, tenant, watchdog):
    dog, sent = watchdog
    job = _running_job(redis_client, tenant)
    dog.sweep(now=1000)
    JobStore(redis_client, tenant).chunk_finished(job, "c2")  # progress: all chunks done -> merge next
    assert dog.sweep(now=1011) == [] and dog.sweep(now=1012) == []  # the clock restarted at 1011
    JobStore(redis_client, tenant).finish(job, "succeeded")
    assert redis_client.zcard(active_jobs_key()) == 0
    assert dog.sweep(now=2000) == [] and sent == []


@pytest.mark.serial  # global sweep keys and lock: another stack's watchdog on the same Redis would sweep first
def test_only_one_sweep_runs_at_a_time(redis_client, tenant, watchdog):
    dog, _sent = watchdog
    lock = redis_client.lock("gf:watchdog:lock", timeout=30)
    assert lock.acquire(blocking=False)
    try:
        _running_job(redis_client, tenant)
        for now in (1000, 1011, 1012):
            assert dog.sweep(now=now) == []
        assert not redis_client.exists("gf:watchdog")  # it did not even look
    finally:
        lock.release()


def test_a_message_sent_by_field_name_is_found_in_its_queue(tmp_path, tenant):
    """Messages travel as keyword fields (``shared.infra.messaging.messages.send``): the job id is still seen in the
    broker, in the real message Celery writes (a Redis broker of this test's own)."""
    from shared.infra.messaging.messages import ExtractChunk, send
    from shared.infra.messaging.queueing import make_celery
    from shared.infra.redis.conn import EmbeddedRedis, connect

    server = EmbeddedRedis(tmp_path / "broker", persist=False).start()
    client = connect(server.url)
    celery = make_celery(Settings(redis_url=server.url, broker_url=server.url))
    try:
        send(celery, ExtractChunk(tenant, "job-kw", "c9"))
        assert jobs_with_messages(client, {"job-kw", "job-other"}, ["extractor"]) == {"job-kw"}
    finally:
        celery.close()
        client.close()
        server.stop()
