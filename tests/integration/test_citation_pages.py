"""Citations name the narrowest pages the cited text spans. A real multi-page PDF is uploaded through the real
gateway (uvicorn subprocess) to real Celery workers with no LLM (the LLM-free mode: extractive answers), chunked
so that one chunk spans several pages; a local query for a fact printed on one page cites that page alone."""

from __future__ import annotations

import httpx
import pytest

from graphfleet_cli.stack import Stack
from shared.infra.redis.conn import free_port
from tests import document_files as files
from tests.conftest import worker_env
from tests.gateway.helpers import ADMIN
from tests.gateway.live import FAST_LIMITS, TenantApi, unique

pytestmark = pytest.mark.integration

FACT = "Velmora Thistlewick repaired the lighthouse lens."
FACT_PAGE = 4
FILLER = ["The ledger lists crates of rope.", "Tar barrels came ashore at dawn.", "Gulls nest on the old pier.",
          "The ferry left the quay at noon.", "Nets dry along the harbour wall.", "The tide tables hang inside."]


@pytest.fixture(scope="module")
def api(redis_server, tmp_path_factory):
    """An LLM-free stack with its gateway; a chunk is big enough to hold all six short pages."""
    env = worker_env(None, GRAPHFLEET_ADMIN_KEY=ADMIN, GRAPHFLEET_LLM_FREE="true",
                     GRAPHFLEET_CHUNKING__SIZE_TOKENS=600, GRAPHFLEET_CHUNKING__OVERLAP_TOKENS=0)
    stack = Stack(data_dir=tmp_path_factory.mktemp("citation-pages"), redis_url=redis_server.url,
                  worker_concurrency=2, extra_env=env, gateway_port=free_port()).start()
    admin = httpx.Client(base_url=stack.gateway_url, headers={"X-API-Key": ADMIN}, timeout=60.0)
    tenant = unique("pages")
    try:
        assert admin.post("/v1/tenants", json={"id": tenant, "limits": FAST_LIMITS}).status_code == 201
        key = admin.post(f"/v1/tenants/{tenant}/keys", json={"name": "pages"}).json()
        client = TenantApi(stack.gateway_url, tenant, key["api_key"], key["key_id"])
        yield client
        client.close()
    finally:
        admin.close()
        stack.stop()


def test_an_extractive_answer_cites_the_file_and_the_page_of_its_sentence(api):
    pages = [" ".join(FILLER[:i] + FILLER[i + 1:]) for i in range(len(FILLER))]
    pages[FACT_PAGE - 1] = f"{FACT}\n{pages[FACT_PAGE - 1]}"  # one line of its own: a PDF line break splits sentences
    r = api.post("/v1/documents", files=[("files", ("ledger.pdf", files.pdf(pages), "application/pdf"))])
    assert r.status_code == 202, r.text
    view = api.wait_job(r.json()["job_id"])
    assert view["status"] == "succeeded", view

    result = api.query(mode="local", query="Who repaired the lighthouse lens?")
    assert result["status"] == "succeeded", result
    assert result["answer_kind"] == "extractive" and FACT in result["answer"], result["answer"]
    sources = result["sources"]
    quoted = [s for s in sources["sentences"] if s["text"] == FACT]
    assert quoted, sources["sentences"]
    cite = quoted[0]
    assert cite["document_name"] == "ledger.pdf" and sources["document_names"][cite["doc_id"]] == "ledger.pdf"
    assert cite["pages"] == [FACT_PAGE]  # the sentence's own page ...
    chunk_pages = sources["pages"][cite["chunk_id"]]
    assert len(chunk_pages) > 1 and FACT_PAGE in chunk_pages  # ... not the whole range of its chunk
    assert cite["end"] - cite["start"] == len(FACT)
