"""Store behaviour against a real Redis (no Celery): concurrency, idempotence, tenant scoping."""

from __future__ import annotations

import json
import threading
import time

import numpy as np

from shared.domain.models import EntityFragment, ExtractionResult, RelationFragment
from shared.domain.storage import VectorItem
from shared.infra.jobs.status import wait_finished
from shared.infra.jobs.store import JobStore
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.redis_vectors import RedisVectorStore
from tests.clusters import subscribers
from tests.unit.graph_support import joined_entity

_merge = joined_entity


def test_concurrent_writers_and_mergers_lose_no_fragment(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    n = 40

    def writer(i):
        store.save_extraction(ExtractionResult(chunk_id=f"c{i}", entities=[
            EntityFragment(name="SCROOGE", description=f"d{i}", source_id=f"c{i}")]))
        store.merge_entity("SCROOGE", _merge)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in store.dirty_members("entities"):
        store.merge_entity(name, _merge)
    entity = store.entities(["SCROOGE"])["SCROOGE"]
    assert len(entity.source_ids) == n
    assert store.dirty_members("entities") == []


def test_relation_keys_are_order_independent(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    store.save_extraction(ExtractionResult(chunk_id="c1", relations=[
        RelationFragment(src="B", tgt="A", source_id="c1", weight=2)]))
    store.save_extraction(ExtractionResult(chunk_id="c2", relations=[
        RelationFragment(src="A", tgt="B", source_id="c2", weight=3)]))
    assert store.dirty_members("relations") == ["A\x1fB"]


def test_extraction_rewrite_is_idempotent_and_removal_marks_dirty(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    result = ExtractionResult(chunk_id="c1", entities=[EntityFragment(name="X", description="x", source_id="c1")])
    store.save_extraction(result)
    store.save_extraction(result)
    assert redis_client.hlen(store.k.entity_fragments("X")) == 1
    store.merge_entity("X", _merge)
    names, _ = store.remove_chunk_fragments("c1")
    assert names == {"X"}
    assert store.merge_entity("X", _merge) is False
    assert store.entities(["X"]) == {}


def test_claim_advance_allows_one_claimant_and_its_redelivery(redis_client, tenant):
    jobs = JobStore(redis_client, tenant)
    jobs.create("job-1", "ingest", ["d1"])
    assert jobs.claim_advance("job-1", "merge", "task-a")
    assert not jobs.claim_advance("job-1", "merge", "task-b")
    assert jobs.claim_advance("job-1", "merge", "task-a")  # redelivered task keeps its claim


def test_vector_store_is_tenant_scoped_and_ranks_by_cosine(redis_client, tenant):
    vs = RedisVectorStore(redis_client)
    other = tenant + "x"
    vs.upsert(tenant, "entities", [VectorItem("a", [1, 0, 0]), VectorItem("b", [0.7, 0.7, 0]),
                                    VectorItem("c", [0, 0, 1])])
    vs.upsert(other, "entities", [VectorItem("secret", [1, 0, 0])])
    hits = vs.search(tenant, "entities", [1, 0.1, 0], top_k=2)
    assert [h.id for h in hits] == ["a", "b"]
    assert np.isclose(hits[0].score, 1 / np.sqrt(1.01), atol=1e-5)
    assert all(h.id != "secret" for h in vs.search(tenant, "entities", [1, 0, 0], top_k=10))
    assert [h.id for h in vs.search(tenant, "entities", [1, 0, 0], top_k=10, min_score=0.5)] == ["a", "b"]
    vs.delete(tenant, "entities", ["a"])
    assert [h.id for h in vs.search(tenant, "entities", [1, 0, 0], top_k=1)] == ["b"]
    vs.drop_tenant(tenant)
    assert vs.count(tenant, "entities") == 0 and vs.count(other, "entities") == 1


def _community(cid: str, occurrence: float = 1.0):
    from shared.domain.models import Community

    return Community(id=cid, level=0, nodes=[cid.lower()], occurrence=occurrence)


def _report(cid: str, title: str):
    from shared.domain.models import CommunityReport

    return CommunityReport(community_id=cid, level=0, title=title, summary=f"about {title}", signature=title)


def test_parsed_community_rows_follow_every_write_from_any_client(redis_server, redis_client, tenant):
    """Reports/communities are parsed once per revision and process; any write, by this client or
    another process's, and a tenant rebuilt from scratch, must be seen by the next read."""
    from shared.infra.redis.conn import connect

    reader = GraphStore(redis_client, tenant)
    other = connect(redis_server.url)  # another process's connection
    try:
        writer = GraphStore(other, tenant)
        writer.replace_communities([_community("L0-0"), _community("L0-1")], {0: 2}, version=1)
        writer.save_reports([_report("L0-0", "first")])
        assert set(reader.communities()) == {"L0-0", "L0-1"}
        assert reader.reports()["L0-0"].title == "first"
        assert reader.reports() is not reader.reports()  # callers own the dict
        reader.reports().clear()  # ...so clearing one does not empty the cache
        assert set(reader.reports()) == {"L0-0"}

        writer.save_reports([_report("L0-0", "second"), _report("L0-1", "other")])
        assert reader.reports()["L0-0"].title == "second"
        writer.prune_reports({"L0-1"})
        assert set(reader.reports()) == {"L0-1"}
        writer.replace_communities([_community("L0-7")], {0: 1}, version=2)
        assert set(reader.communities()) == {"L0-7"}
        writer.save_reports([_report("L0-7", "new")])
        writer.prune_reports()  # by default: the reports of the communities no longer stored
        assert set(reader.reports()) == {"L0-7"}

        # the tenant deleted and rebuilt with the same ids: a counter could repeat, the revision cannot
        other.delete(*other.scan_iter(match=f"{writer.k.p}*"))
        assert reader.reports() == {} and reader.communities() == {}
        writer.replace_communities([_community("L0-7")], {0: 1}, version=2)
        writer.save_reports([_report("L0-7", "rebuilt")])
        assert reader.reports()["L0-7"].title == "rebuilt"
        # and another tenant never reads this one's rows
        assert GraphStore(redis_client, tenant + "x").reports() == {}
    finally:
        other.close()


def test_wait_finished_wakes_on_the_end_of_job_message_and_only_for_that_tenants_job(redis_client, tenant):
    jobs, other = JobStore(redis_client, tenant), JobStore(redis_client, tenant + "-other")
    jobs.create("q1", "query")
    other.create("q1", "query")  # same job id in another tenant: its end must not wake this waiter
    seen: list[str | None] = []
    waiter = threading.Thread(target=lambda: seen.append(wait_finished(jobs, "q1", timeout=30, recheck_s=30)))
    waiter.start()
    deadline = time.monotonic() + 10
    while subscribers(redis_client, jobs.k.job_done_channel("q1")) == 0:  # the waiter has subscribed
        assert time.monotonic() < deadline
        time.sleep(0.01)
    other.finish("q1", "failed")
    waiter.join(timeout=0.3)
    assert waiter.is_alive() and seen == []  # another tenant's job of the same id ended: still waiting
    jobs.finish("q1", "succeeded", result={"answer": "x"})
    waiter.join(timeout=10)  # recheck_s=30: only the published message can have woken it this soon
    assert not waiter.is_alive() and seen == ["succeeded"]
    # already ended, unknown job, and a job that never ends within the timeout
    assert wait_finished(jobs, "q1", timeout=5) == "succeeded"
    assert wait_finished(jobs, "missing", timeout=5) is None
    jobs.create("q2", "query")
    assert wait_finished(jobs, "q2", timeout=0.2, recheck_s=0.05) is None
    jobs.cancel("q2")
    assert wait_finished(jobs, "q2", timeout=5) == "canceled"



def test_wait_finished_re_reads_the_status_when_the_subscription_fails(redis_client, tenant):
    """A pubsub that cannot subscribe (a cluster node gone: the subscription is not routed around it as commands
    are), or whose connection drops mid-wait: the wait carries on by re-reading the status, and sees the end."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    class Broken:
        def __init__(self, fail_at: str):
            self.fail_at = fail_at

        def subscribe(self, *channels):
            if self.fail_at == "subscribe":
                raise RedisConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")

        def get_message(self, timeout):
            raise RedisConnectionError("Connection closed by server.")

        def close(self):
            raise RedisConnectionError("already gone")

    class Client:  # the real client, but its pubsubs fail
        def __init__(self, fail_at: str):
            self.fail_at = fail_at

        def __getattr__(self, name):
            return getattr(redis_client, name)

        def pubsub(self, **_kwargs):
            return Broken(self.fail_at)

    for fail_at in ("subscribe", "get_message"):
        jobs = JobStore(Client(fail_at), tenant)
        jobs.create(fail_at, "query")
        ender = threading.Timer(0.3, lambda j=fail_at: JobStore(redis_client, tenant).finish(j, "succeeded"))
        ender.start()
        try:
            assert wait_finished(jobs, fail_at, timeout=30, recheck_s=0.05) == "succeeded"
        finally:
            ender.cancel()


def test_parsed_entity_and_relation_rows_follow_every_graph_write_and_a_rebuilt_tenant(
        redis_server, redis_client, tenant):
    """Entity and relation rows are parsed once per (graph version, epoch) and process: a merge by another
    process's client is seen at the next read, a degree written apart from the version too, and a tenant deleted
    and rebuilt (its version counter starts again) never gets the old incarnation's rows."""
    from shared.domain.merge import merge_relation
    from shared.infra.redis.conn import connect
    from shared.infra.store.redis_graph import split_rel_field

    reader = GraphStore(redis_client, tenant)
    other = connect(redis_server.url)
    try:
        writer = GraphStore(other, tenant)

        def write(description: str, chunk: str = "c1") -> None:
            writer.save_extraction(ExtractionResult(chunk_id=chunk, entities=[
                EntityFragment(name="A", type="person", description=description, source_id=chunk)], relations=[
                RelationFragment(src="A", tgt="B", description=description, source_id=chunk)]))
            writer.merge_batch("entities", ["A"], _merge)
            writer.merge_batch("relations", writer.dirty_members("relations"),
                               lambda field, frags: merge_relation(*split_rel_field(field), frags))

        write("first")
        assert reader.entities(["A", "nobody"])["A"].description == "first"
        rel = reader.relations([("B", "A")])[("A", "B")]
        assert rel.description == "first" and reader.relations([("A", "B")])[("A", "B")] is rel  # parsed once
        reader.entities(["A"])["A"].description = "changed by a caller"  # each caller gets its own entity
        assert reader.entities(["A"])["A"].description == "first"

        write("second", "c2")
        assert reader.entities(["A"])["A"].description == "first<SEP>second"
        assert "second" in reader.relations([("A", "B")])[("A", "B")].description
        writer.set_degrees({"A": 7})
        assert reader.entities(["A"])["A"].degree == 7
        assert set(reader.neighbors(["A"])["A"]) == {"B"}

        other.delete(*other.scan_iter(match=f"{writer.k.p}*"))  # deleted, then rebuilt to the same version (4)
        write("rebuilt")
        write("again", "c2")
        assert reader.entities(["A"])["A"].description == "again<SEP>rebuilt"
        assert "rebuilt" in reader.relations([("A", "B")])[("A", "B")].description
        assert GraphStore(redis_client, tenant + "x").entities(["A"]) == {}  # never another tenant's rows
        other.delete(*other.scan_iter(match=f"{writer.k.p}*"))
        assert reader.entities(["A"]) == {} and reader.relations([("A", "B")]) == {}
    finally:
        other.close()


def test_a_job_ends_once_with_its_metrics_claimed_once_and_leaves_the_active_set(redis_client, tenant, monkeypatch):
    """``finish`` and ``cancel`` (one script, ``FINISH``): the first end wins, its fields written and its waiters
    woken; a later end of the same job changes nothing and records no second metric; an unknown job is not
    created; the result's usage and creation time come back together (``usage_and_created``)."""
    from shared.infra.jobs import store as jobs_module
    from shared.infra.jobs.store import active_member
    from shared.infra.redis.keys import active_jobs_key

    finished: list[tuple] = []

    class Listener:
        def job_submitted(self, kind, tier):
            pass

        def job_finished(self, kind, status, seconds, tier):
            finished.append((kind, status, seconds is not None and seconds >= 0))

    monkeypatch.setattr(jobs_module, "_listeners", [Listener()])
    jobs = JobStore(redis_client, tenant)
    jobs.create("j1", "query")
    assert redis_client.zscore(active_jobs_key(), active_member(tenant, "j1")) is not None
    redis_client.hincrby(jobs.k.job_usage("j1"), "calls:answer", 2)
    usage, created = jobs.usage_and_created("j1")
    assert usage["by_stage"] == {"answer": {"calls": 2}} and created == float(jobs.get_field("j1", "created_at"))
    assert jobs.finish("j1", "succeeded", result={"answer": "x"}) is True
    assert jobs.status("j1") == "succeeded" and json.loads(jobs.get_field("j1", "result")) == {"answer": "x"}
    assert jobs.get_field("j1", "stage") == "done" and jobs.get_field("j1", "finished_at")
    assert redis_client.zscore(active_jobs_key(), active_member(tenant, "j1")) is None
    assert jobs.cancel("j1") is False and jobs.finish("j1", "failed") is False  # ended: nothing changes
    assert jobs.status("j1") == "succeeded" and finished == [("query", "succeeded", True)]
    assert jobs.finish("nobody", "succeeded") is False and not jobs.exists("nobody")
    jobs.create("j2", "ingest")
    assert jobs.cancel("j2") is True
    assert jobs.status("j2") == "canceled" and jobs.get_field("j2", "stage") == "canceled"
    assert finished[-1] == ("ingest", "canceled", True) and len(finished) == 2


def test_admit_counts_each_delivery_and_applies_the_guard_in_one_step(redis_client, tenant):
    """``JobStore.admit``: the delivery count of (task, item) grows by one per call whatever the guard says; past
    the limit nothing else happens; each guard refuses what it names; a stage mark never reopens an ended job."""
    jobs = JobStore(redis_client, tenant)
    jobs.create("j", "ingest")
    assert jobs.admit("j", "t.extract", "c1", 3, "canceled", "extract")[:2] == (1, True)
    assert jobs.status("j") == "running" and jobs.get_field("j", "stage") == "extract"
    started = jobs.get_field("j", "started_at")
    assert jobs.admit("j", "t.extract", "c1", 3, "active", "glean")[:2] == (2, True)
    assert jobs.get_field("j", "started_at") == started and set(jobs.stage_times("j")) == {"extract", "glean"}
    assert jobs.admit("j", "t.extract", "c2", 3, "running", None)[:2] == (1, True)  # another item: its own count
    assert jobs.admit("j", "t.extract", "c1", 3, "canceled", "extract")[:2] == (3, True)
    assert jobs.admit("j", "t.extract", "c1", 3, "canceled", "late")[:2] == (4, False)  # poison: the job untouched
    assert jobs.get_field("j", "stage") == "extract" and "late" not in jobs.stage_times("j")
    jobs.cancel("j")
    for guard in ("canceled", "ended", "running", "active"):
        assert jobs.admit("j", "t.merge", guard, 3, guard, "merge")[:2] == (1, False)
    assert jobs.admit("j", "t.merge", "none", 3, None, "merge")[:2] == (1, True)  # no guard: runs, not reopened
    assert jobs.status("j") == "canceled" and "merge" not in jobs.stage_times("j")
    jobs.create("q", "query")
    assert jobs.admit("q", "t.query", "-", 3, "running", None)[:2] == (1, False)  # queued, not running
    assert jobs.admit("q", "t.query", "-", 3, "ended", "retrieve")[:2] == (2, True) and jobs.status("q") == "running"
    assert jobs.admit("gone", "t.query", "-", 3, "active", "retrieve")[:2] == (1, False) and not jobs.exists("gone")
    assert jobs.admit("gone", "t.query", "-", 3, "ended", "retrieve")[:2] == (2, True) and not jobs.exists("gone")


def test_admit_reads_the_fields_a_task_asks_for_only_when_it_is_admitted(redis_client, tenant):
    """``admit(read=...)``: the job fields the body reads first come back with an admission (None when unset), in
    the same script; a refused or poison delivery reads nothing; no ``read``, no fields."""
    jobs = JobStore(redis_client, tenant)
    jobs.create("q", "query", params={"query": "who?", "mode": "local"})
    admitted = jobs.admit("q", "t.query", "-", 3, "ended", "retrieve", ("params", "nothing"))
    assert admitted.admitted and admitted.count == 1
    assert json.loads(admitted.fields["params"])["query"] == "who?" and admitted.fields["nothing"] is None
    assert admitted.fields["params"] == jobs.get_field("q", "params")
    assert jobs.admit("q", "t.query", "-", 3, "ended", "retrieve").fields == {}
    assert jobs.admit("q", "t.query", "-", 2, "ended", None, ("params",)) == (3, False, {})  # poison
    jobs.cancel("q")
    assert jobs.admit("q", "t.map", "0", 3, "running", None, ("params",)) == (1, False, {})
    assert jobs.admit("q", "t.query", "x", 3, "active", "retrieve", ("params",)) == (1, False, {})
