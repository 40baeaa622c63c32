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
from shared.infra.store.redis_graph import GraphStore
from tests.conftest import SAMPLE
from tests.integration.helpers import graph_snapshot, start_stack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(redis_server, simulator, tmp_path_factory):
    s = start_stack(redis_server.url, tmp_path_factory.mktemp("life"), simulator, concurrency=8)
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
