"""``graphfleet.Client`` / ``graphfleet.AsyncClient`` against the live gateway (real workers, Redis, uvicorn; the LLM
simulator is the only fake): typed results, errors carrying the API's code, bounded retries on 429."""

from __future__ import annotations

import asyncio

import httpx
import pytest

import graphfleet
from graphfleet import AsyncClient, Client
from graphfleet._base import retry_after
from tests.gateway.helpers import ADMIN
from tests.gateway.live import unique

pytestmark = pytest.mark.integration

TEXT = "Ebenezer Scrooge runs a counting-house in London. Bob Cratchit is his clerk and works in the cold."


class CountingTransport(httpx.HTTPTransport):
    def __init__(self):
        super().__init__()
        self.statuses: list[int] = []

    def handle_request(self, request):
        response = super().handle_request(request)
        self.statuses.append(response.status_code)
        return response


def test_admin_creates_tenants_and_keys_and_errors_carry_the_api_code(live):
    with Client(live.url, ADMIN) as admin:
        tenant_id = unique("cl")
        tenant = admin.create_tenant(tenant_id, name="Client Co", limits={"requests_per_minute": 100_000})
        assert isinstance(tenant, graphfleet.Tenant) and tenant.id == tenant_id and tenant.name == "Client Co"
        assert admin.get_tenant(tenant_id).limits["requests_per_minute"] == 100_000
        with pytest.raises(graphfleet.ConflictError) as exists:
            admin.create_tenant(tenant_id)
        assert exists.value.status == 409 and exists.value.code == "tenant_exists"
        with pytest.raises(graphfleet.NotFoundError) as missing:
            admin.get_tenant(unique("nobody"))
        assert missing.value.status == 404 and missing.value.message
        key = admin.create_key(tenant_id, "ci")
        assert isinstance(key, graphfleet.ApiKey) and key.api_key and key.tenant == tenant_id
        with Client(live.url, key.api_key) as user:
            assert user.current_tenant().id == tenant_id
            revoked = admin.revoke_key(tenant_id, key.key_id)
            assert isinstance(revoked, graphfleet.KeyRevoked) and revoked.revoked
            with pytest.raises(graphfleet.AuthError) as denied:
                user.graph_stats()
            assert denied.value.status == 401 and denied.value.code == "invalid_api_key"
        with pytest.raises(graphfleet.BadRequestError) as invalid:
            admin.create_tenant("Not A Valid Id!")
        assert invalid.value.status == 422


def test_ingest_wait_query_documents_jobs_usage_graph(live, tmp_path):
    api = live.new_tenant("clf")
    (tmp_path / "one.txt").write_text("Marley was Scrooge's partner. Marley died seven years ago.", encoding="utf-8")
    (tmp_path / "skip.bin").write_bytes(b"\x00")
    seen: list[graphfleet.Job] = []
    with Client(live.url, api.key, max_retries=2) as gf:
        jobs = [gf.ingest_text(TEXT, id="doc-text", title="text", metadata={"source": "test"}),
                gf.ingest_bytes(b"Fezziwig gives a Christmas ball for his apprentices.", "two.md"),
                gf.ingest_paths([tmp_path])]
        assert all(isinstance(j, graphfleet.JobAccepted) and j.kind == "ingest" for j in jobs)
        for job in jobs:
            done = gf.wait_job(job.job_id, poll=0.1, progress=seen.append)
            assert done.status == "succeeded" and done.finished, done
        assert seen[-1].finished and {j.job_id for j in seen} == {j.job_id for j in jobs}
        page = gf.list_documents()
        assert isinstance(page, graphfleet.DocumentPage) and page.total == 3
        assert {d.title for d in page.items} == {"text", "two.md", "one.txt"}
        doc = gf.get_document("doc-text")
        assert doc.metadata == {"source": "test"} and doc.status == "processed" and doc.chunks >= 1
        stats = gf.graph_stats()
        assert stats.documents == 3 and stats.entities > 0
        assert gf.export_graphml().startswith(b"<?xml")
        context = gf.query("Who is Scrooge?", mode="naive", only_need_context=True)
        assert context.model_extra.get("context")  # result fields beyond the typed ones are kept
        answer = gf.query("Who is Bob Cratchit?", mode="local", max_total_tokens=3000)
        assert isinstance(answer, graphfleet.QueryResult) and answer.status == "succeeded" and answer.answer
        job = gf.get_job(jobs[0].job_id)
        assert job.kind == "ingest" and job.usage["calls"] > 0
        late = gf.cancel_job(jobs[0].job_id)
        assert isinstance(late, graphfleet.CancelResult) and late.canceled is False
        usage = gf.usage(group_by="stage")
        assert usage.tenant == api.id and usage.totals["calls"] > 0 and usage.groups
        deletion = gf.delete_document("doc-text")
        assert deletion.kind == "delete" and gf.wait_job(deletion.job_id, poll=0.1).status == "succeeded"
        with pytest.raises(graphfleet.NotFoundError):
            gf.get_document("doc-text")
        with pytest.raises(graphfleet.NotFoundError):
            gf.get_job("job-does-not-exist")


def test_async_client(live):
    api = live.new_tenant("cla")

    async def scenario():
        seen = []

        async def progress(job):
            seen.append(job.status)

        async with AsyncClient(live.url, api.key) as gf:
            accepted = await gf.ingest_text(TEXT, id="a1")
            done = await gf.wait_job(accepted.job_id, poll=0.1, progress=progress)
            page = await gf.list_documents(status="processed")
            result = await gf.query("Who is Scrooge?", mode="naive")
            with pytest.raises(graphfleet.NotFoundError) as missing:
                await gf.get_query("qry-missing")
            return done, seen, page, result, missing.value

    done, seen, page, result, missing = asyncio.run(scenario())
    assert done.status == "succeeded" and seen[-1] == "succeeded"
    assert [d.id for d in page.items] == ["a1"] and page.status == "processed"
    assert result.status == "succeeded" and result.answer
    assert missing.code and missing.status == 404


def test_429_is_retried_a_bounded_number_of_times_then_raised(live):
    api = live.new_tenant("clr", requests_per_minute=1, burst=1)  # one request, then Retry-After ~60 s
    transport = CountingTransport()
    with Client(live.url, api.key, max_retries=2, max_retry_delay=0.01, transport=transport) as gf:
        gf.current_tenant()
        with pytest.raises(graphfleet.RateLimitedError) as limited:
            gf.graph_stats()
    assert transport.statuses == [200, 429, 429, 429]  # the first call, then 1 + max_retries attempts
    assert limited.value.code == "rate_limited" and limited.value.retry_after >= 1


def test_retry_delay_follows_retry_after_within_the_cap():
    request = httpx.Request("GET", "http://gateway/v1/jobs/x")
    assert retry_after(httpx.Response(429, headers={"Retry-After": "7"}, request=request), 0, 30.0) == 7.0
    assert retry_after(httpx.Response(503, headers={"Retry-After": "120"}, request=request), 0, 30.0) == 30.0
    assert retry_after(httpx.Response(503, request=request), 2, 30.0) == 2.0  # no header: exponential


def test_unreachable_gateway_is_a_transport_error():
    with Client("http://127.0.0.1:9", "k", max_retries=0) as gf, pytest.raises(graphfleet.TransportError):
        gf.graph_stats()
