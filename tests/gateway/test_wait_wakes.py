"""``POST /v1/queries?wait=N`` is woken by the query's end-of-job message, whatever the final status, and
re-reads the status in case that message was lost. The gateway runs in-process on its own Redis database
(no worker consumes its queue), so the test ends each query itself, the way a worker would."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from shared.config import reset_settings_cache
from shared.infra.job_status import RECHECK_ENV, AsyncJobStatus
from shared.infra.jobs import JobStore
from shared.infra.keys import Keys
from shared.infra.redis_conn import aconnect, to_str
from tests.clusters import subscribers
from tests.gateway.helpers import db_url


def _when_waiting(redis, tenant: str, end) -> threading.Thread:
    """In a thread: once the tenant's query exists and its waiter has subscribed to the end message, call
    ``end(jobs, query_id)``."""
    def run() -> None:
        k, deadline = Keys(tenant), time.monotonic() + 20
        while time.monotonic() < deadline:
            ids = [to_str(x) for x in redis.zrange(k.jobs(), 0, -1)]
            if ids and subscribers(redis, k.job_done_channel(ids[0])) > 0:
                end(JobStore(redis, tenant), ids[0])
                return
            time.sleep(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("status", ["succeeded", "failed", "canceled"])
def test_wait_returns_the_final_query_when_its_end_message_arrives(api, alice, gw_redis, gw_env, status):
    # the safety re-read comes only after an hour: only the end message can end this wait within ?wait=30
    gw_env.setenv(RECHECK_ENV, "3600")
    reset_settings_cache()

    def end(jobs: JobStore, query_id: str) -> None:
        if status == "canceled":
            assert jobs.cancel(query_id)
        else:
            jobs.finish(query_id, status, result='{"answer": "Bob is a clerk.", "answer_kind": "llm"}')

    ender = _when_waiting(gw_redis, "alice", end)
    r = api.post("/v1/queries", params={"wait": 30}, headers=alice["headers"],
                 json={"mode": "local", "query": "Who is Bob Cratchit?"})
    ender.join(timeout=5)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == status
    if status != "canceled":
        assert body["answer"] == "Bob is a clerk."


def test_wait_without_an_end_answers_202_when_the_time_is_up(api, alice):
    r = api.post("/v1/queries", params={"wait": 0.3}, headers=alice["headers"],
                 json={"mode": "local", "query": "Who is Bob Cratchit?"})
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "queued" and r.headers["Location"] == r.json()["location"]


def test_a_lost_end_message_is_caught_by_the_status_re_read(redis_server, gw_redis):
    """The status turns final without a message (as after a Redis restart lost it): the re-read sees it."""
    jobs = JobStore(gw_redis, "t-lost")
    jobs.create("q1", "query")

    async def wait() -> bool:
        client = aconnect(db_url(redis_server))
        try:
            waiting = asyncio.create_task(AsyncJobStatus(client, "t-lost").wait_finished("q1", 30, recheck_s=0.05))
            await asyncio.sleep(0.2)
            assert not waiting.done()  # the job is still queued
            gw_redis.hset(jobs.k.job("q1"), "status", "succeeded")  # no publish
            return await waiting
        finally:
            await client.aclose()

    assert asyncio.run(wait()) is True


def test_the_end_message_of_another_tenants_job_does_not_end_the_wait(redis_server, gw_redis):
    mine, theirs = JobStore(gw_redis, "t-mine"), JobStore(gw_redis, "t-theirs")
    mine.create("q1", "query")
    theirs.create("q1", "query")

    async def wait() -> bool:
        client = aconnect(db_url(redis_server))
        try:
            waiting = asyncio.create_task(AsyncJobStatus(client, "t-mine").wait_finished("q1", 0.5, recheck_s=3600))
            while subscribers(gw_redis, mine.k.job_done_channel("q1")) == 0:
                await asyncio.sleep(0.01)
            theirs.finish("q1", "succeeded")
            return await waiting
        finally:
            await client.aclose()

    assert asyncio.run(wait()) is False
