"""The whole-graph clustering a job left for later: when the watchdog's sweep submits the ``recluster`` job of a
tenant marked due (quiet for ``recluster_quiet_s``, or marked ``recluster_max_delay_s`` ago; never while it ingests),
and what it submits.
On a real Redis; the broker is a list of the messages sent."""

from __future__ import annotations

from shared.config import get_settings
from shared.infra.jobs.store import JobStore, active_member
from shared.infra.messaging.messages import PlanMerge
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import recluster_due_key
from shared.pipeline.flow import CLAIM_MERGE
from shared.pipeline.recluster import KIND, due, ingesting, mark_due, overdue, submit_due


def _settings(quiet_s: float = 30.0, max_delay_s: float = 900.0):
    s = get_settings()
    cluster = s.cluster.model_copy(update={"recluster_quiet_s": quiet_s, "recluster_max_delay_s": max_delay_s})
    return s.model_copy(update={"cluster": cluster})


def test_a_tenant_is_due_once_quiet_or_once_marked_long_enough_but_never_while_it_ingests():
    assert due(100.0, busy=False, last_activity=None, now=100.0, quiet_s=30, max_delay_s=900)  # no job at all
    assert not due(100.0, busy=False, last_activity=90.0, now=110.0, quiet_s=30, max_delay_s=900)  # ended 20 s ago
    assert due(100.0, busy=False, last_activity=90.0, now=120.0, quiet_s=30, max_delay_s=900)  # quiet 30 s
    assert not due(100.0, busy=True, last_activity=90.0, now=999.0, quiet_s=30, max_delay_s=900)  # ingesting
    assert due(100.0, busy=False, last_activity=990.0, now=1000.0, quiet_s=30, max_delay_s=900)  # marked 900 s ago
    # ingesting at the max delay: that ingestion's cluster stage clusters the whole graph (``overdue``)
    assert not due(100.0, busy=True, last_activity=990.0, now=1000.0, quiet_s=30, max_delay_s=900)


def test_the_sweep_submits_one_recluster_job_per_due_tenant_and_takes_the_mark(redis_client, tenant):
    quiet, busy, fresh = f"{tenant}-quiet", f"{tenant}-busy", f"{tenant}-fresh"
    jobs = {t: JobStore(redis_client, t) for t in (quiet, busy, fresh)}
    for store in jobs.values():
        store.create("job-1", "ingest", ["d1"])
    now = float(to_str(redis_client.hget(jobs[quiet].k.job("job-1"), "updated_at"))) + 60
    jobs[quiet].finish("job-1", "succeeded")
    redis_client.hset(jobs[quiet].k.job("job-1"), "finished_at", now - 45)  # ended 45 s ago
    jobs[fresh].finish("job-1", "succeeded")  # ended just now (``now`` is a minute ahead: 60 s ago)
    redis_client.hset(jobs[fresh].k.job("job-1"), "finished_at", now - 5)
    jobs[quiet].create("qry-1", "query")  # a query since, still running: the tenant is quiet all the same
    for t in (quiet, busy, fresh):
        mark_due(redis_client, t, now - 50)
    mark_due(redis_client, quiet, now)  # a second mark keeps the first one's time
    sent: list = []

    submitted = submit_due(redis_client, _settings(), sent.append, busy_tenants={busy}, now=now)

    assert [t for t, _job in submitted] == [quiet]
    job_id = submitted[0][1]
    view = jobs[quiet].snapshot(job_id)
    assert view.kind == KIND and view.docs == set() and CLAIM_MERGE in view.flags
    assert sent == [PlanMerge(quiet, job_id)]
    due_now = {to_str(m): s for m, s in redis_client.zrange(recluster_due_key(), 0, -1, withscores=True)}
    assert quiet not in due_now and due_now[busy] == now - 50 and due_now[fresh] == now - 50

    later = submit_due(redis_client, _settings(max_delay_s=60), sent.append, busy_tenants={busy}, now=now + 10)
    assert [t for t, _job in later] == [fresh]  # marked 60 s ago: due, unless an ingestion of it runs
    assert {to_str(m) for m in redis_client.zrange(recluster_due_key(), 0, -1)} & {quiet, busy, fresh} == {busy}
    assert overdue(redis_client, busy, _settings(max_delay_s=60), now=now + 10)  # its own next job clusters whole
    assert not overdue(redis_client, busy, _settings(), now=now + 10) and not overdue(redis_client, quiet, _settings())


def test_only_an_ingestion_keeps_a_tenant_busy():
    members = [active_member("a", "job-1"), active_member("b", "qry-1"), active_member("c", "qry-2"),
               active_member("c", "job-2")]
    assert ingesting(members) == {"a", "c"}
