"""``POST /v1/queries?wait=N`` is woken by the query's end-of-job message, whatever the final status, and
re-reads the status in case that message was lost. The gateway runs in-process on its own Redis database
(no worker consumes its queue), so the test ends each query itself, the way a worker would."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from shared.config import reset_settings_cache
from shared.infra.jobs.status import RECHECK_ENV, AsyncJobStatus
from shared.infra.jobs.store import JobStore
from shared.infra.redis.conn import aconnect, to_str
from shared.infra.redis.keys import Keys
from tests.clusters import subscribers
from tests.gateway.helpers import db_url, with_a_document


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

    with_a_document(gw_redis, "alice")
    ender = _when_waiting(gw_redis, "alice", end)
    r = api.post("/v1/queries", params={"wait": 30}, headers=alice["headers"],
                 json={"mode": "local", "query": "Who is Bob Cratchit?"})
    ender.join(timeout=5)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == status
    if status != "canceled":
        assert body["answer"] == "Bob is a clerk."


def test_wait_without_an_end_answers_202_when_the_time_is_up(api, alice, gw_redis):
    with_a_document(gw_redis, "alice")
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


@pytest.mark.parametrize("fail_at", ["subscribe", "get_message"])
def test_a_failing_subscription_leaves_the_status_re_reads(redis_server, gw_redis, fail_at):
    """A pubsub that cannot subscribe (a cluster node gone: a pubsub is not routed around it as commands are), or
    whose connection drops mid-wait: the gateway's wait carries on by re-reading the status, and sees the end,
    as the blocking wait does (one rule, ``jobs.status._Listen``), instead of failing the request."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    class Broken:
        async def subscribe(self, *channels):
            if fail_at == "subscribe":
                raise RedisConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")

        async def get_message(self, **_kwargs):
            raise RedisConnectionError("Connection closed by server.")

        async def aclose(self):
            raise RedisConnectionError("already gone")

    class Client:  # the real client, but its pubsubs fail
        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return getattr(self.real, name)

        def pubsub(self, **_kwargs):
            return Broken()

    jobs = JobStore(gw_redis, "t-broken")
    jobs.create("q1", "query")

    async def wait() -> bool:
        client = aconnect(db_url(redis_server))
        try:
            waiting = asyncio.create_task(AsyncJobStatus(Client(client), "t-broken").wait_finished("q1", 30, 0.05))
            await asyncio.sleep(0.2)
            assert not waiting.done()  # the job is still queued
            jobs.finish("q1", "succeeded")
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
            # 3 s: time for the subscription on a busy machine (a wait that ended before it was seen subscribed left
            # this loop spinning); the wait then ends at its deadline, not at the other tenant's message
            waiting = asyncio.create_task(AsyncJobStatus(client, "t-mine").wait_finished("q1", 3.0, recheck_s=3600))
            deadline = time.monotonic() + 20
            while subscribers(gw_redis, mine.k.job_done_channel("q1")) == 0:
                assert not waiting.done() and time.monotonic() < deadline, "the wait never subscribed to its channel"
                await asyncio.sleep(0.01)
            theirs.finish("q1", "succeeded")
            return await waiting
        finally:
            await client.aclose()

    assert asyncio.run(wait()) is False


def _end_when_waited_on(redis, tenant: str, job_id: str, end) -> threading.Thread:
    """In a thread: once a waiter has subscribed to ``job_id``'s end message, call ``end(jobs)``."""
    def run() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if subscribers(redis, Keys(tenant).job_done_channel(job_id)) > 0:
                end(JobStore(redis, tenant))
                return
            time.sleep(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_job_held_with_wait_is_answered_when_its_end_message_arrives(api, alice, gw_redis, gw_env):
    """``GET /v1/jobs/{id}?wait=N`` (what the SDK's ``wait_job`` sends): an unfinished job is held until its end
    message, then shown finished (no Retry-After); only the message can end it within ``?wait`` here."""
    gw_env.setenv(RECHECK_ENV, "3600")
    reset_settings_cache()
    JobStore(gw_redis, "alice").create("ingest-held", "ingest", doc_ids=["d1"])
    ender = _end_when_waited_on(gw_redis, "alice", "ingest-held",
                                lambda jobs: jobs.finish("ingest-held", "succeeded", result='{"documents": 1}'))
    r = api.get("/v1/jobs/ingest-held", params={"wait": 30}, headers=alice["headers"])
    ender.join(timeout=5)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "succeeded" and r.json()["result"] == {"documents": 1}
    assert "Retry-After" not in r.headers


def test_a_job_held_with_wait_is_shown_as_it_is_when_the_time_is_up(api, alice, gw_redis):
    JobStore(gw_redis, "alice").create("ingest-slow", "ingest", doc_ids=["d1"])
    r = api.get("/v1/jobs/ingest-slow", params={"wait": 0.3}, headers=alice["headers"])
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "queued" and r.headers["Retry-After"] == "2"


def test_waiting_on_a_finished_unknown_or_other_tenants_job(api, alice, gw_redis):
    """A finished job is answered at once, an unknown one (or another tenant's) is a 404, held or not."""
    jobs = JobStore(gw_redis, "alice")
    jobs.create("ingest-done", "ingest")
    jobs.finish("ingest-done", "failed", error="every chunk failed")
    r = api.get("/v1/jobs/ingest-done", params={"wait": 60}, headers=alice["headers"])
    assert r.status_code == 200 and r.json()["status"] == "failed" and r.json()["error"] == "every chunk failed"
    JobStore(gw_redis, "bob").create("bobs-job", "ingest")
    for job_id in ("no-such-job", "bobs-job"):
        r = api.get(f"/v1/jobs/{job_id}", params={"wait": 60}, headers=alice["headers"])
        assert r.status_code == 404, r.text
    assert api.get("/v1/jobs/ingest-done", params={"wait": -1}, headers=alice["headers"]).status_code == 422
