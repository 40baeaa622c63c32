"""A fan-out's messages (``shared.infra.messaging.messages.send_all``) against real brokers: over Redis in one publish
batch (one pipeline), over Sentinel and RabbitMQ too, through the gateway's locked producer, and every message
still delivered when the batch's flush fails."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
import redis
from kombu import Consumer
from kombu.transport import redis as kombu_redis

from api_gateway.state import LockedCelery
from shared.config import Settings
from shared.infra.messaging import messages
from shared.infra.messaging import queueing as q
from shared.infra.messaging.messages import READY_AT, ExtractChunk, Message, QueryDeadline, send, send_all
from shared.infra.store.warmup import warm_sender
from tests.brokers import rabbit_vhost, sentinel_group


@pytest.fixture()
def flushes(monkeypatch):
    """The number of commands each kombu publish batch flushed (a spy: the real flush runs)."""
    seen: list[int] = []
    real = kombu_redis.PublishBatch.flush

    def spy(self):
        seen.append(self._buffered)
        return real(self)

    monkeypatch.setattr(kombu_redis.PublishBatch, "flush", spy)
    return seen


def _fan_out(tenant: str, job_id: str, n: int = 5) -> list[Message]:
    return [ExtractChunk(tenant, job_id, f"c{i}") for i in range(n)]


def _received(celery, queue: str, count: int) -> list[tuple[dict, dict]]:
    """(kwargs, headers) of ``count`` messages consumed from ``queue`` in delivery order, each acknowledged."""
    got: list = []
    with celery.connection_for_read() as conn, conn.channel() as channel:
        def take(body, message):
            got.append((body[1] if isinstance(body, list) else json.loads(body)[1], message.headers))
            message.ack()

        with Consumer(channel, queues=[celery.amqp.queues[queue]], accept=["json"], callbacks=[take]):
            while len(got) < count:
                conn.drain_events(timeout=10)
    return got


def test_a_fan_out_goes_to_a_redis_broker_in_one_batch_in_order(redis_server, broker_redis, tenant, flushes):
    celery = q.make_celery(Settings(redis_url=redis_server.url, broker_url=broker_redis.url))
    try:
        send_all(celery, _fan_out(tenant, "job-b1"))
        assert flushes == [5]  # one pipeline of 5 LPUSHes, not 5 round trips
        got = _received(celery, "extractor", 5)
        assert [kw["chunk_id"] for kw, _ in got] == [f"c{i}" for i in range(5)]
        assert all(kw == {"tenant": tenant, "job_id": "job-b1", "chunk_id": kw["chunk_id"]} for kw, _ in got)
        assert got[0][1]["kwargsrepr"] == repr({"tenant": tenant, "job_id": "job-b1", "chunk_id": "c0"})
        assert got[0][1]["task"] == ExtractChunk.TASK
        send_all(celery, _fan_out(tenant, "job-b2", 1))  # one message: sent as it is, no batch
        assert flushes == [5] and _received(celery, "extractor", 1)[0][0]["job_id"] == "job-b2"
    finally:
        celery.close()


def test_when_the_batch_cannot_be_flushed_every_message_is_sent_one_by_one(
        redis_server, broker_redis, tenant, monkeypatch):
    """A broker error at the flush (outside Celery's publish retry) loses no message: each is sent again with
    Celery's retries."""
    failed: list[int] = []

    def refuse(self):
        failed.append(self._buffered)
        self.discard()
        raise redis.ConnectionError("broker restarted")

    monkeypatch.setattr(kombu_redis.PublishBatch, "flush", refuse)
    celery = q.make_celery(Settings(redis_url=redis_server.url, broker_url=broker_redis.url))
    try:
        send_all(celery, _fan_out(tenant, "job-f1", 4))
        assert failed == [4]
        assert sorted(kw["chunk_id"] for kw, _ in _received(celery, "extractor", 4)) == ["c0", "c1", "c2", "c3"]
        assert redis.Redis.from_url(broker_redis.url).llen("extractor") == 0  # none twice
    finally:
        celery.close()


def test_a_large_fan_out_goes_in_batches_and_a_failed_one_is_resent_alone(
        redis_server, broker_redis, tenant, monkeypatch):
    """More than ``BATCH_MESSAGES`` messages go in several batches, each flushed once; when one batch's flush
    fails, only its messages are sent again: none of an earlier, flushed batch arrives twice."""
    monkeypatch.setattr(messages, "BATCH_MESSAGES", 3)
    flushed: list[int] = []
    real = kombu_redis.PublishBatch.flush

    def second_fails(self):
        flushed.append(self._buffered)
        if len(flushed) == 2:
            self.discard()
            raise redis.ConnectionError("broker restarted")
        return real(self)

    monkeypatch.setattr(kombu_redis.PublishBatch, "flush", second_fails)
    celery = q.make_celery(Settings(redis_url=redis_server.url, broker_url=broker_redis.url))
    try:
        send_all(celery, _fan_out(tenant, "job-l1", 7))
        assert flushed == [3, 3, 1]
        got = [kw["chunk_id"] for kw, _ in _received(celery, "extractor", 7)]
        assert sorted(got) == [f"c{i}" for i in range(7)]  # each once: the first batch was not sent again
        assert redis.Redis.from_url(broker_redis.url).llen("extractor") == 0
    finally:
        celery.close()


def test_the_gateways_locked_producer_sends_a_batch(redis_server, broker_redis, tenant, flushes):
    """The gateway serialises its sends (``LockedCelery``); a multi-document submission holds the lock for the
    whole batch and re-enters it for each message."""
    app = q.make_celery(Settings(redis_url=redis_server.url, broker_url=broker_redis.url))
    try:
        send_all(LockedCelery(app), _fan_out(tenant, "job-g1", 3))
        assert flushes == [3]
        assert [kw["chunk_id"] for kw, _ in _received(app, "extractor", 3)] == ["c0", "c1", "c2"]
    finally:
        app.close()


def test_a_fan_out_through_sentinel_goes_in_one_batch(tmp_path, tenant, flushes):
    with sentinel_group(tmp_path) as group:
        celery = q.make_celery(Settings(redis_url="redis://unused", broker_url=group.url))
        try:
            send_all(celery, _fan_out(tenant, "job-s1", 3))
            assert flushes == [3]
            assert [kw["chunk_id"] for kw, _ in _received(celery, "extractor", 3)] == ["c0", "c1", "c2"]
        finally:
            celery.close()


def test_rabbitmq_has_no_batches_and_gets_every_message(redis_server, tenant, flushes):
    with rabbit_vhost() as vhost:
        celery = q.make_celery(Settings(redis_url=redis_server.url, broker_url=vhost.url))
        try:
            send_all(celery, _fan_out(tenant, "job-a1", 3))
            assert flushes == []  # published one by one, at once
            assert [kw["chunk_id"] for kw, _ in _received(celery, "extractor", 3)] == ["c0", "c1", "c2"]
        finally:
            celery.close()


def test_warming_the_sender_declares_every_queue_and_sends_nothing(redis_server, broker_redis):
    """What a worker (and a prefork child, and the gateway) runs before its first send: the producer connects
    and every queue is declared, and no message is published."""
    celery = q.make_celery(Settings(redis_url=redis_server.url, broker_url=broker_redis.url))
    try:
        warm_sender(celery)
        broker = redis.Redis.from_url(broker_redis.url, decode_responses=True)
        keys = set(broker.keys("*"))
        bound = {member.split("\x06\x16")[-1] for key in keys if key.startswith("_kombu.binding.")
                 for member in broker.smembers(key)}  # exchange -> "routing key, pattern, queue" members
        assert set(celery.amqp.queues) <= bound
        assert not [k for k in keys if broker.type(k) == "list"]  # no queue holds a message
        with celery.producer_or_acquire() as producer:  # the pooled producer is connected already
            assert producer.connection.connected
    finally:
        celery.close()


def test_each_message_says_when_it_is_ready_to_run_a_delayed_one_when_its_delay_ends(redis_server, broker_redis,
                                                                                       tenant):
    """The ``READY_AT`` header the workers observe ``graphfleet_task_queue_wait_seconds`` from: a fan-out's messages
    are ready when published; a countdown (a query's deadline) or an eta is not a wait in the queue."""
    celery = q.make_celery(Settings(redis_url=redis_server.url, broker_url=broker_redis.url))
    try:
        before = time.time()
        send_all(celery, _fan_out(tenant, "job-r1", 2))
        send(celery, QueryDeadline(tenant, "q-r1"), countdown=30)
        due = datetime.fromtimestamp(before + 90, tz=UTC)
        send(celery, QueryDeadline(tenant, "q-r2"), eta=due, headers={"x-other": "kept"})
        after = time.time()
        fanned = [headers[READY_AT] for _kw, headers in _received(celery, "extractor", 2)]
        assert all(before <= t <= after for t in fanned)
        delayed = {kw["job_id"]: headers for kw, headers in _received(celery, "reducer", 2)}
        assert before + 30 <= delayed["q-r1"][READY_AT] <= after + 30
        assert delayed["q-r2"][READY_AT] == pytest.approx(before + 90)
        assert delayed["q-r2"]["x-other"] == "kept"  # headers given by the caller go along
    finally:
        celery.close()
