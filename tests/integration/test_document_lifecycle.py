"""Deleting a document removes exactly its contributions: the graph after deleting B equals the
graph of ingesting only A; adding a document regenerates only the reports that changed."""

from __future__ import annotations

import time

import pytest

from graphfleet_cli.local_client import LocalClient
from shared.domain.ids import new_job_id
from shared.infra.jobs.ingest_submit import DocumentInput, submit_ingestion
from shared.infra.jobs.store import JobStore
from shared.infra.messaging.queueing import DELETE_DOCUMENT
from shared.infra.redis.keys import recluster_due_key
from shared.infra.store.redis_graph import GraphStore
from tests.conftest import SAMPLE
from tests.integration.helpers import graph_snapshot, start_stack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(redis_server, simulator, tmp_path_factory):
    # a job past the clustering bound leaves the whole graph to a recluster job, submitted 2 s after the tenant's
    # last job ended (the watchdog sweeps every second)
    s = start_stack(redis_server.url, tmp_path_factory.mktemp("life"), simulator, concurrency=8,
                    GRAPHFLEET_CLUSTER__RECLUSTER_QUIET_S=2, GRAPHFLEET_WORKERS__WATCHDOG_INTERVAL_S=1)
    yield s
    s.stop()


def _texts():
    text = SAMPLE.read_text(encoding="utf-8-sig")
    return text[3000:40000], text[90000:130000]


def _ingest(client: LocalClient, tenant: str, texts: list[str]) -> dict:
    job = submit_ingestion(client.redis, client.celery, tenant, [DocumentInput(text=t) for t in texts],
                           client.settings)
    view = client.wait(tenant, job["job_id"], timeout=600)
    assert view["status"] == "succeeded", view
    return view


def _assert_report_cache_in_use(redis, store: GraphStore) -> None:
    """The report cache holds the current reports' signatures, and no signature of a community gone."""
    cached = {k.decode() for k in redis.hkeys(store.k.report_cache())}
    in_use = {r.signature for r in store.reports().values() if r.signature}
    assert in_use <= cached
    assert cached <= in_use | {c.signature for c in store.communities().values()}


def test_delete_equals_never_ingested(stack):
    client = LocalClient(stack.redis_url)
    a, b = _texts()
    _ingest(client, "life-ab", [a, b])
    store_ab = GraphStore(client.redis, "life-ab")
    docs = store_ab.documents(store_ab.list_document_ids()).values()
    doc_b = next(d for d in docs if store_ab.document_text(d.id) == b)
    job_id = new_job_id()
    JobStore(client.redis, "life-ab").create(job_id, "delete", [doc_b.id])
    client.celery.send_task(DELETE_DOCUMENT, args=["life-ab", job_id, doc_b.id])
    view = client.wait("life-ab", job_id, timeout=600)
    assert view["status"] == "succeeded", view
    _ingest(client, "life-a", [a])
    after_delete = graph_snapshot(store_ab)
    only_a = graph_snapshot(GraphStore(client.redis, "life-a"))
    assert after_delete["entities"] == only_a["entities"]
    assert after_delete["relations"] == only_a["relations"]
    assert after_delete["communities"] == only_a["communities"]
    assert store_ab.stats()["documents"] == 1
    assert set(store_ab.reports()) == set(store_ab.communities())
    _assert_report_cache_in_use(client.redis, store_ab)
    from shared.infra.store.redis_vectors import RedisVectorStore

    vectors = RedisVectorStore(client.redis)
    assert vectors.count("life-ab", "chunks") == store_ab.stats()["chunks"]
    assert vectors.count("life-ab", "entities") == store_ab.stats()["entities"]


def test_adding_a_document_regenerates_only_changed_reports(stack):
    client = LocalClient(stack.redis_url)
    a, b = _texts()
    first = _ingest(client, "life-inc", [a])
    reports_first = first["usage"]["by_stage"]["report"]["calls"]
    store = GraphStore(client.redis, "life-inc")
    signatures_first = {r.signature for r in store.reports().values()}
    second = _ingest(client, "life-inc", [b])
    llm_reports = sum(r.generated_by == "llm" for r in store.reports().values())
    regenerated = second["usage"]["by_stage"].get("report", {}).get("calls", 0)
    assert reports_first > 0
    # unchanged communities reuse their reports (matched by content signature)
    assert regenerated < llm_reports
    assert set(store.reports()) == set(store.communities())
    # the first clustering's reports whose communities changed are gone from the cache, not kept for ever
    _assert_report_cache_in_use(client.redis, store)
    assert signatures_first - {r.signature for r in store.reports().values()}
    # the ended job's per-chunk bookkeeping expires; its view reads the same once it has
    jobs = JobStore(client.redis, "life-inc")
    view = jobs.view(second["id"])
    bookkeeping = [jobs.k.job_chunks(second["id"]), jobs.k.job_chunks_done(second["id"]),
                   jobs.k.job_docs_done(second["id"]), jobs.k.job_stage_done(second["id"], "merge")]
    # the ending worker sets the expiry just after the end message that woke this client
    deadline = time.monotonic() + 20
    while not all(client.redis.ttl(key) > 0 for key in bookkeeping):
        assert time.monotonic() < deadline, {key: client.redis.ttl(key) for key in bookkeeping}
        time.sleep(0.05)
    client.redis.delete(*bookkeeping)
    assert jobs.view(second["id"]) == view


def _jobs_of_kind(client: LocalClient, tenant: str, kind: str) -> list[str]:
    jobs = JobStore(client.redis, tenant)
    return [j.decode() for j in client.redis.zrange(jobs.k.jobs(), 0, -1) if jobs.get_field(j.decode(), "kind") == kind]


def test_a_job_past_the_clustering_bound_leaves_the_whole_graph_to_a_recluster_job(stack):
    """The second job adds more than half the graph: it is clustered incrementally and ends; once the tenant is
    quiet, the watchdog submits a ``recluster`` job, which clusters the whole graph (the communities a tenant that
    ingested both at once has) and reports what moved."""
    client = LocalClient(stack.redis_url)
    a, b = _texts()
    _ingest(client, "life-defer", [a[:12000]])
    store = GraphStore(client.redis, "life-defer")
    _ingest(client, "life-defer", [a[12000:], b])
    meta = store.cluster_meta()
    assert int(meta["changed"]) > 0.5 * int(meta["full_size"]), meta  # extended past the bound
    assert client.redis.zscore(recluster_due_key(), "life-defer") is not None
    deadline = time.monotonic() + 120
    while not (ids := _jobs_of_kind(client, "life-defer", "recluster")):
        assert time.monotonic() < deadline, "no recluster job was submitted"
        time.sleep(0.2)
    view = client.wait("life-defer", ids[0], timeout=600)
    assert view["status"] == "succeeded" and view["kind"] == "recluster", view
    assert store.cluster_meta()["changed"] == "0"
    assert client.redis.zscore(recluster_due_key(), "life-defer") is None
    assert set(store.reports()) == set(store.communities())
    _assert_report_cache_in_use(client.redis, store)
    _ingest(client, "life-once", [a[:12000], a[12000:], b])
    assert graph_snapshot(store)["communities"] == graph_snapshot(GraphStore(client.redis, "life-once"))["communities"]
    time.sleep(4)  # quiet again, and nothing is due: no second recluster job
    assert len(_jobs_of_kind(client, "life-defer", "recluster")) == 1
