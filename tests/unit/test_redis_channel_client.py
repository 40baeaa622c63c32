"""``shared.infra.messaging.celery_patches.redis_channel_client``: kombu's Redis transport sends its commands through
one client per channel, on the channel's current pool, and acks from many threads at once all reach a real Redis."""

from __future__ import annotations

import threading

import pytest
from kombu import Connection
from kombu.transport import redis as kombu_redis

from shared.infra.messaging.celery_patches import patching, redis_channel_client


@pytest.fixture
def installed():
    was_patched = patching.is_patched(kombu_redis.Channel, "conn_or_acquire")
    redis_channel_client.install()
    yield
    if not was_patched:
        patching.restore(kombu_redis.Channel, "conn_or_acquire")


def test_a_channel_sends_through_one_client_until_its_pool_changes(broker_redis, installed):
    with Connection(broker_redis.url) as conn:
        channel = conn.default_channel
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second and first.connection_pool is channel.pool
        given = channel._create_client()
        with channel.conn_or_acquire(given) as client:
            assert client is given  # a caller's own client is used as it is
        channel._pool = None  # as kombu drops it with a broken connection
        with channel.conn_or_acquire() as rebuilt:
            assert rebuilt is not first and rebuilt.connection_pool is channel.pool


def test_messages_acked_from_many_threads_all_reach_redis(broker_redis, installed):
    """As on a Celery ``threads`` pool: the consumer receives, each task's thread acks through the shared client."""
    with Connection(broker_redis.url) as conn, conn.SimpleQueue("kc-threads") as queue:
        for i in range(400):
            queue.put({"i": i})
        received = [queue.get(timeout=10) for _ in range(400)]
        channel = queue.channel
        with channel.conn_or_acquire() as client:
            assert client.hlen(channel.qos.unacked_key) == 400  # delivered, not acked yet

        def ack(part: list) -> None:
            for message in part:
                message.ack()

        threads = [threading.Thread(target=ack, args=(received[t::8],)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert sorted(m.payload["i"] for m in received) == list(range(400))
        with channel.conn_or_acquire() as client:
            assert client.hlen(channel.qos.unacked_key) == 0  # every ack reached Redis
            assert client.zcard(channel.qos.unacked_index_key) == 0
