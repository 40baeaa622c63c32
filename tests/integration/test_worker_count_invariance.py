"""The graph does not depend on how many worker threads/processes did the work."""

from __future__ import annotations

import pytest

from graphfleet_cli.local_client import LocalClient
from shared.infra.store.redis_graph import GraphStore
from tests.conftest import SAMPLE
from tests.integration.helpers import graph_snapshot, start_stack

pytestmark = pytest.mark.integration


def _run(redis_url: str, data_dir, simulator: str, processes: int, tenant: str) -> dict:
    # N worker processes per queue group, one task at a time each
    stack = start_stack(redis_url, data_dir, simulator, concurrency=1, processes=processes)
    try:
        client = LocalClient(redis_url)
        job = client.ingest_files(tenant, [SAMPLE])
        view = client.wait(tenant, job["job_id"], timeout=900)
        assert view["status"] == "succeeded", view
        return graph_snapshot(GraphStore(client.redis, tenant))
    finally:
        stack.stop()


def test_four_worker_processes_and_one_build_the_same_graph(redis_server, simulator, tmp_path):
    four = _run(redis_server.url, tmp_path / "a", simulator, 4, "inv-four")
    one = _run(redis_server.url, tmp_path / "b", simulator, 1, "inv-one")
    assert four["entities"] == one["entities"]
    assert four["relations"] == one["relations"]
    assert four["communities"] == one["communities"]
    assert len(four["entities"]) > 100
