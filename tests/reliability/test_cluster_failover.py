"""Fault test on a real Redis Cluster (3 masters, each with a replica, from the ``redis-server`` binary):
the master serving a tenant's slot is killed mid-ingestion, its replica is promoted, and every tenant's job
still ends with the graph of an undisturbed run. The broker is a Redis of its own (a cluster holds state
only), so the kill touches no queued message."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from graphfleet_cli.local_client import LocalClient
from shared.infra.redis.conn import EmbeddedRedis
from shared.infra.redis.keys import Keys
from shared.infra.store.redis_graph import GraphStore
from tests.clusters import RedisClusterServers
from tests.integration.helpers import graph_snapshot, start_stack
from tests.reliability.conftest import FAST_WATCHDOG, excerpt, sim, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.own_servers]

TENANTS = ["east", "west", "north", "south"]


def test_a_killed_cluster_master_is_replaced_and_every_tenant_on_it_recovers(tmp_path):
    """Guarantee: state on a cluster survives losing a master. Redis replicates asynchronously, so writes
    acknowledged just before the kill may be missing on the promoted replica; the pipeline's steps are
    idempotent and the job watchdog re-sends what a stalled job misses, so each job ends ``succeeded`` with
    the same graph as an undisturbed tenant. Checked: with the cluster client's retry turned off
    (``shared.infra.redis.conn.cluster_retry`` at 0 retries) the first read of the moved slot fails with
    ``ConnectionError: ... Connection refused`` instead of waiting for the promoted replica."""
    cluster = RedisClusterServers(tmp_path / "cluster", masters=3, replicas=1).start()
    broker = EmbeddedRedis(tmp_path / "broker", persist=True).start()
    doc = excerpt(tmp_path, 0, 40_000)
    try:
        with sim(latency_ms=300) as llm:
            stack = start_stack(cluster.url, tmp_path / "stack", llm, concurrency=4,
                                GRAPHFLEET_BROKER_URL=broker.url, **FAST_WATCHDOG)
            try:
                client = LocalClient(cluster.url, broker_url=broker.url)
                steady = client.wait("steady", client.ingest_files("steady", [doc])["job_id"], timeout=600)
                assert steady["status"] == "succeeded", steady
                expected = graph_snapshot(GraphStore(client.redis, "steady"))

                jobs = {t: client.ingest_files(t, [doc])["job_id"] for t in TENANTS}
                victim = cluster.master_of(Keys(TENANTS[0]).job(jobs[TENANTS[0]]))
                moved = [t for t in TENANTS if cluster.master_of(Keys(t).job(jobs[t])) == victim]
                wait_for(lambda: client.job(TENANTS[0], jobs[TENANTS[0]])["progress"]["chunks_done"] >= 1,
                          "extraction under way")
                cluster.kill(victim)
                promoted = cluster.wait_failover(victim, Keys(TENANTS[0]).job(jobs[TENANTS[0]]))
                assert promoted != victim

                with ThreadPoolExecutor(len(TENANTS)) as pool:
                    views = dict(zip(TENANTS, pool.map(lambda t: client.wait(t, jobs[t], timeout=600), TENANTS),
                                     strict=True))
                for tenant, view in views.items():
                    assert view["status"] == "succeeded", (tenant, tenant in moved, view)
                    assert view["failures"] == [], (tenant, view["failures"])
                    assert graph_snapshot(GraphStore(client.redis, tenant)) == expected, tenant
                assert TENANTS[0] in moved
            finally:
                stack.stop()
    finally:
        broker.stop()
        cluster.stop()
