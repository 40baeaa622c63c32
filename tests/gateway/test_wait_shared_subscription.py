"""Every ``?wait`` of a gateway process listens through one shared Redis subscription (``ChannelListener``), not a
connection per held request; a subscription that Redis drops is mended, and an end published while it was down
is not missed. Real Redis (single or cluster), no worker: the tests end the jobs the way a worker does."""

from __future__ import annotations

import asyncio
import threading
import time

from redis.cluster import RedisCluster

from shared.config import reset_settings_cache
from shared.infra.jobs.status import RECHECK_ENV, AsyncJobStatus
from shared.infra.jobs.store import JobStore
from shared.infra.messaging.channel_listener import KEEP_CHANNEL, ChannelListener
from shared.infra.redis.conn import aconnect, to_str
from shared.infra.redis.keys import Keys
from tests.clusters import subscribers
from tests.gateway.helpers import db_url, with_a_document


def _nodes(client) -> list:
    """A client per Redis server behind ``client`` (one, or every cluster node)."""
    if isinstance(client, RedisCluster):
        return [node.redis_connection for node in client.get_nodes()]
    return [client]


def _pubsub_connections(client) -> int:
    """Connections in pubsub mode, over every node (``CLIENT LIST``'s ``sub`` count)."""
    return sum(1 for node in _nodes(client) for c in node.client_list() if int(c.get("sub", 0)) > 0)


def _kill_pubsub_connections(client) -> None:
    for node in _nodes(client):
        node.client_kill_filter(_type="pubsub")


async def _until(check, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def test_many_waits_share_one_subscription_and_each_is_woken_by_its_own_end(redis_server, gw_redis):
    tenant, count = "t-many", 40
    jobs = JobStore(gw_redis, tenant)
    ids = [f"q{i}" for i in range(count)]
    for job_id in ids:
        jobs.create(job_id, "query")
    channels = [Keys(tenant).job_done_channel(job_id) for job_id in ids]

    async def scenario() -> tuple[list[bool], int, int]:
        client = aconnect(db_url(redis_server))
        try:
            before = _pubsub_connections(gw_redis)
            status = AsyncJobStatus(client, tenant)
            # the safety re-read only after an hour: only the end messages can end these waits
            waits = [asyncio.create_task(status.wait_finished(job_id, 30, recheck_s=3600)) for job_id in ids]
            await _until(lambda: all(subscribers(gw_redis, ch) == 1 for ch in channels))
            during = _pubsub_connections(gw_redis) - before
            assert not any(w.done() for w in waits)
            for job_id in ids[::2]:  # half of them end; the others' waits must not wake
                jobs.finish(job_id, "succeeded")
            ended = await asyncio.gather(*waits[::2])
            assert not any(w.done() for w in waits[1::2])
            for job_id in ids[1::2]:
                jobs.finish(job_id, "failed", error="boom")
            ended += await asyncio.gather(*waits[1::2])
            return ended, during, ChannelListener.of(client).channels
        finally:
            await ChannelListener.close_for(client)
            await client.aclose()

    ended, during, left = asyncio.run(scenario())
    assert ended == [True] * count
    assert during == 1, f"{count} waits held {during} pubsub connections"
    assert left == 0 and all(subscribers(gw_redis, ch) == 0 for ch in channels)  # each unsubscribed when done


def test_a_dropped_subscription_is_mended_and_an_end_missed_meanwhile_is_seen(redis_server, gw_redis):
    """``CLIENT KILL TYPE pubsub`` (as a Redis restart or a failover does to a subscriber): the listener
    connects again and re-subscribes; an end that turned final while nobody listened is found by the re-read the
    reconnection triggers, and a later end message wakes its waiter again. Re-reads are hourly: neither the
    first wait nor the second can end in time any other way."""
    tenant = "t-mend"
    jobs = JobStore(gw_redis, tenant)
    jobs.create("q1", "query")
    jobs.create("q2", "query")
    k = Keys(tenant)

    async def scenario() -> tuple[bool, bool, int]:
        client = aconnect(db_url(redis_server))
        try:
            status = AsyncJobStatus(client, tenant)
            first = asyncio.create_task(status.wait_finished("q1", 30, recheck_s=3600))
            second = asyncio.create_task(status.wait_finished("q2", 30, recheck_s=3600))
            await _until(lambda: subscribers(gw_redis, k.job_done_channel("q2")) == 1)
            gw_redis.hset(k.job("q1"), "status", "succeeded")  # final, its message lost
            _kill_pubsub_connections(gw_redis)
            missed = await first
            await _until(lambda: subscribers(gw_redis, k.job_done_channel("q2")) == 1)
            assert not second.done()
            jobs.finish("q2", "succeeded")
            return missed, await second, ChannelListener.of(client).connects
        finally:
            await ChannelListener.close_for(client)
            await client.aclose()

    missed, woken, connects = asyncio.run(scenario())
    assert missed is True and woken is True
    assert connects >= 2


def test_held_requests_through_the_gateway_share_one_subscription(api, alice, gw_redis, gw_env):
    """Ten ``POST /v1/queries?wait=30`` held at once by one gateway: one pubsub connection between them (its
    start-up one), and each answered by its own query's end."""
    gw_env.setenv(RECHECK_ENV, "3600")
    reset_settings_cache()
    count, k = 10, Keys("alice")
    with_a_document(gw_redis, "alice")
    before = _pubsub_connections(gw_redis)
    answers: list = []

    def ask(i: int) -> None:
        answers.append(api.post("/v1/queries", params={"wait": 30}, headers=alice["headers"],
                                json={"mode": "local", "query": f"Who is Bob Cratchit? ({i})"}))

    threads = [threading.Thread(target=ask, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while True:
        ids = [to_str(x) for x in gw_redis.zrange(k.jobs(), 0, -1)]
        if len(ids) == count and all(subscribers(gw_redis, k.job_done_channel(i)) == 1 for i in ids):
            break
        assert time.monotonic() < deadline, "the held requests did not all subscribe"
        time.sleep(0.01)
    held = _pubsub_connections(gw_redis) - before
    assert subscribers(gw_redis, KEEP_CHANNEL) >= 1
    jobs = JobStore(gw_redis, "alice")
    for query_id in ids:
        jobs.finish(query_id, "succeeded", result=f'{{"answer": "{query_id}", "answer_kind": "llm"}}')
    for thread in threads:
        thread.join(timeout=20)
    assert held == 0, f"{count} held requests opened {held} pubsub connections beside the gateway's own"
    assert sorted(r.status_code for r in answers) == [200] * count
    assert sorted(r.json()["answer"] for r in answers) == sorted(ids)
    assert all(r.json()["status"] == "succeeded" for r in answers)


def test_a_followed_query_gets_each_event_once_across_a_dropped_subscription(redis_server, gw_redis):
    """A stream's events (``QueryEvents``) come through the shared subscription too: an event published while it
    was down comes from the query's event log once it is back, and none comes twice."""
    from shared.infra.jobs.query_state import QueryEvents, QueryStore

    tenant = "t-stream"
    store = QueryStore(gw_redis, tenant)

    async def events(feed: QueryEvents, count: int) -> list[tuple[str, dict]]:
        got: list[tuple[str, dict]] = []
        deadline = time.monotonic() + 20
        while len(got) < count:
            assert time.monotonic() < deadline, f"only {got}"
            message = await feed.next(0.2)
            if message is not None and message[0] != "seen":
                got.append(message)
        return got

    async def scenario() -> tuple[list, list, list, bool]:
        client = aconnect(db_url(redis_server))
        feed = QueryEvents(client, tenant, "q1")
        try:
            await feed.subscribe()
            store.publish("q1", "token", {"text": "one"})
            before = await events(feed, 1)
            _kill_pubsub_connections(gw_redis)
            store.publish("q1", "token", {"text": "two"})  # whether the listener is back yet or not
            await _until(lambda: ChannelListener.of(client).connects >= 2)
            await _until(lambda: subscribers(gw_redis, Keys(tenant).query_events("q1")) == 1)
            store.publish("q1", "token", {"text": "three"})
            after = await events(feed, 2)
            extra = await feed.next(0.3)
            return before, after, [] if extra is None or extra[0] == "seen" else [extra], feed.seen == 3
        finally:
            await feed.close()
            await ChannelListener.close_for(client)
            await client.aclose()

    before, after, extra, counted = asyncio.run(scenario())
    assert before == [("token", {"text": "one"})]
    assert after == [("token", {"text": "two"}), ("token", {"text": "three"})]
    assert extra == [] and counted


def test_a_burst_of_reads_past_the_pool_waits_for_connections_instead_of_failing(redis_server, gw_redis):
    """300 status reads at once on the gateway's asyncio client (a burst of held requests arriving together): a
    single Redis's pool and a cluster client's per-node pool both hold 100 connections at most in redis-py 8,
    past which a command failed ("Too many connections", a 500 at the gateway); now every read is answered."""
    tenant = "t-burst"
    jobs = JobStore(gw_redis, tenant)
    for i in range(300):
        jobs.create(f"q{i}", "query")

    async def scenario() -> list:
        client = aconnect(db_url(redis_server))
        try:
            status = AsyncJobStatus(client, tenant)
            return await asyncio.gather(*(status.status(f"q{i}") for i in range(300)), return_exceptions=True)
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) == ["queued"] * 300
