"""``celery_patches.redis_leases.reclaim_unrenewed`` against a real Redis broker: the messages a SIGKILLed consumer
process held go back on their queue, each once; a message a live consumer holds and renewed stays with it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from shared.config import Settings
from shared.infra.messaging import queueing as q
from shared.infra.messaging.celery_patches.redis_leases import (
    reclaim_unrenewed,
    renew_leases,
    restore_if_older,
    restore_older,
)
from shared.infra.messaging.messages import ExtractChunk, send_all
from shared.infra.redis.conn import connect
from shared.infra.redis.keys import BROKER_UNACKED, BROKER_UNACKED_INDEX, broker_queue_keys

QUEUE = "extractor"

# A consumer that takes ``n`` messages without acknowledging them, says which, and waits to be killed.
CONSUMER = textwrap.dedent("""
    import sys, time
    from shared.config import Settings
    from shared.infra.messaging import queueing as q
    app = q.make_celery(Settings(redis_url=sys.argv[1], broker_url=sys.argv[1]))
    channel = app.connection_for_read().default_channel
    print(" ".join(channel.basic_get(sys.argv[2], no_ack=False).delivery_tag for _ in range(int(sys.argv[3]))),
          flush=True)
    time.sleep(600)
""")


def _held(client) -> set[str]:
    return {tag.decode() for tag in client.hkeys(BROKER_UNACKED)}


def _chunk_id(message) -> str:
    body = message.body if isinstance(message.body, (list, dict)) else json.loads(message.body)
    return body[1]["chunk_id"]


def test_a_killed_consumers_messages_go_back_and_a_live_ones_stay(broker_redis, tenant):
    url = broker_redis.url  # the broker, named: whatever the test layout's GRAPHFLEET_BROKER_URL
    celery = q.make_celery(Settings(redis_url=url, broker_url=url))
    client = connect(url)
    proc = None
    try:
        send_all(celery, [ExtractChunk(tenant, "job-r1", f"c{i}") for i in range(4)])
        with celery.connection_for_read() as live:
            held = live.default_channel.basic_get(QUEUE, no_ack=False)  # a live worker's delivery: c0
            proc = subprocess.Popen([sys.executable, "-c", CONSUMER, url, QUEUE, "2"], stdout=subprocess.PIPE,
                                    text=True, cwd=os.getcwd())
            dead_tags = proc.stdout.readline().split()
            assert len(dead_tags) == 2 and _held(client) == {held.delivery_tag, *dead_tags}
            os.kill(proc.pid, signal.SIGKILL)  # no channel close, no restore at shutdown: as a killed worker
            proc.wait()
            died_at = time.time()
            assert renew_leases(client, [held.delivery_tag], now=died_at + 1) == 1  # the live worker's lease thread

            with celery.connection_for_write() as conn:
                assert reclaim_unrenewed(conn, died_at) == 2
                assert reclaim_unrenewed(conn, died_at) == 0  # nothing left to put back: safe to repeat

            assert _held(client) == {held.delivery_tag}  # still the live worker's
            assert client.zrange(BROKER_UNACKED_INDEX, 0, -1) == [held.delivery_tag.encode()]
            assert _chunk_id(held) == "c0"
            channel = live.default_channel
            again = [channel.basic_get(QUEUE, no_ack=True) for _ in range(3)]
            assert sorted(_chunk_id(m) for m in again) == ["c1", "c2", "c3"]  # the killed one's two, and c3, once
            assert channel.basic_get(QUEUE, no_ack=True) is None
            held.ack()
        assert client.hlen(BROKER_UNACKED) == 0
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        client.close()
        celery.close()


def test_expired_leases_go_back_once_and_the_callers_own_stay(broker_redis, tenant):
    """``restore_older`` as every live worker's lease thread runs it: a message whose lease is older than the
    cut-off goes back once however many workers look (kombu's transaction per tag); the tags the caller holds
    itself (``keep``) stay with it even when their lease looks old."""
    url = broker_redis.url
    celery = q.make_celery(Settings(redis_url=url, broker_url=url))
    client = connect(url)
    try:
        send_all(celery, [ExtractChunk(tenant, "job-r2", f"c{i}") for i in range(2)])
        with celery.connection_for_read() as conn:
            channel = conn.default_channel
            own, orphan = (channel.basic_get(QUEUE, no_ack=False) for _ in range(2))
            cutoff = time.time() + 1  # both leases are older than this
            with celery.connection_for_write() as other:
                assert restore_older(channel, cutoff, keep=frozenset({own.delivery_tag})) == 1
                assert restore_older(other.default_channel, cutoff, keep=frozenset({own.delivery_tag})) == 0
            assert _held(client) == {own.delivery_tag}
            back = channel.basic_get(QUEUE, no_ack=True)
            assert _chunk_id(back) == _chunk_id(orphan) and channel.basic_get(QUEUE, no_ack=True) is None
            own.ack()
    finally:
        client.close()
        celery.close()


def test_a_stale_list_of_expired_leases_puts_back_no_message_taken_again(broker_redis, tenant):
    """Two live workers' lease threads list the same expired tag; the first puts the message back and a worker takes
    it again (a redelivery keeps its delivery tag) before the second acts on its list. The second must leave it with
    its new holder: the lease is reread in the put-back's transaction, so the task is not run a third time."""
    url = broker_redis.url
    celery = q.make_celery(Settings(redis_url=url, broker_url=url))
    client = connect(url)
    try:
        send_all(celery, [ExtractChunk(tenant, "job-r3", "c0")])
        with celery.connection_for_read() as conn:
            channel = conn.default_channel
            orphan = channel.basic_get(QUEUE, no_ack=False)
            tag = orphan.delivery_tag
            renew_leases(client, [tag], now=time.time() - 60)  # its worker died a minute ago
            cutoff = time.time() - 30
            stale = [t.decode() for t in client.zrangebyscore(BROKER_UNACKED_INDEX, "-inf", f"({cutoff}")]
            assert stale == [tag]  # what the second worker's thread read
            with celery.connection_for_write() as first:
                assert restore_older(first.default_channel, cutoff) == 1
            again = channel.basic_get(QUEUE, no_ack=False)  # taken again: same tag, a fresh lease
            assert again.delivery_tag == tag and _held(client) == {tag}
            with celery.connection_for_write() as second, second.default_channel.conn_or_acquire() as redis:
                assert restore_if_older(second.default_channel, stale[0], cutoff, redis) is False
            assert _held(client) == {tag}  # still with its new holder, and not queued
            assert not any(client.llen(key) for key in broker_queue_keys(QUEUE))
            again.ack()
    finally:
        client.close()
        celery.close()
