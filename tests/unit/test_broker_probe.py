"""The broker-neutral probe (``shared.infra.messaging.broker_probe``) against real brokers: a Redis apart from the
state, a Sentinel group through a failover, and a RabbitMQ vhost. Messages are written by Celery itself
(``shared.infra.messaging.messages.send``); consumers are real kombu consumers or a real in-process Celery worker."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import redis
from kombu import Connection, Consumer

from shared.config import Settings
from shared.infra.messaging import queueing as q
from shared.infra.messaging.broker_probe import AmqpProbe, RedisProbe, broker_readiness, make_probe
from shared.infra.messaging.messages import ExtractChunk, send
from shared.infra.redis.keys import BROKER_UNACKED_INDEX, active_jobs_key, watchdog_key
from shared.pipeline.watchdog import Watchdog
from tests.brokers import rabbit_vhost, sentinel_group, take_task_name
from tests.unit.test_watchdog import _running_job


def _settings(state_url: str, broker: str) -> Settings:
    return Settings(redis_url=state_url, broker_url=broker, workers={"watchdog_interval_s": 1, "stall_timeout_s": 10})


def _until(predicate, what: str, timeout: float = 30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"gave up waiting for {what}")


def _hold(conn: Connection, celery, queue: str, count: int):
    """A kombu consumer on ``queue`` that receives ``count`` messages and acks none; returns (channel, held)."""
    channel = conn.channel()
    held: list = []
    consumer = Consumer(channel, queues=[celery.amqp.queues[queue]], accept=["json"],
                        callbacks=[lambda _body, message: held.append(message)])
    consumer.qos(prefetch_count=count)
    consumer.consume()
    while len(held) < count:
        conn.drain_events(timeout=10)
    return channel, held


def test_redis_probe_reads_the_broker_not_the_state(redis_server, redis_client, broker_redis, tenant):
    settings = _settings(redis_server.url, broker_redis.url)
    celery = q.make_celery(settings)
    probe = make_probe(settings)
    try:
        send(celery, ExtractChunk(tenant, "job-r1", "c1"))
        send(celery, ExtractChunk(tenant, "job-r1", "c2"))
        assert isinstance(probe, RedisProbe) and probe.ping()
        assert probe.depths(["extractor", "parser"]) == {"extractor": 2, "parser": 0}
        assert redis_client.llen("extractor") == 0  # nothing went to the state Redis
        assert probe.unacked() == 0
        assert probe.consumers(["extractor"]) is None  # Redis cannot say: the readiness check asks the workers
        assert probe.jobs_with_messages({"job-r1", "job-r2"}, ["extractor"]) == {"job-r1"}
        assert broker_readiness(probe, celery, ["extractor"]) == (True, {"extractor": False})  # no worker
    finally:
        celery.close()
        probe.close()


def test_sentinel_probe_and_lease_renewal_follow_the_primary(tmp_path, tenant):
    """Through Sentinel the probe and the lease renewal (``celery_patches.redis_leases``: kombu's own channel
    pool) read and write the *current* primary, also after a failover."""
    from shared.infra.messaging.celery_patches.redis_leases import renew_held

    with sentinel_group(tmp_path) as group:
        settings = _settings("redis://unused", group.url)
        celery = q.make_celery(settings)
        probe = make_probe(settings)
        try:
            send(celery, ExtractChunk(tenant, "job-s1", "c1"))
            send(celery, ExtractChunk(tenant, "job-s1", "c2"))
            assert probe.depths(["extractor"]) == {"extractor": 2}
            with celery.connection_for_read() as conn:
                channel, held = _hold(conn, celery, "extractor", 1)
                tag = str(held[0].delivery_tag)
                assert probe.unacked() == 1 and probe.depths(["extractor"]) == {"extractor": 1}
                assert probe.jobs_with_messages({"job-s1", "job-other"}, ["extractor"]) == {"job-s1"}
                worker = SimpleNamespace(task_consumer=SimpleNamespace(channel=channel))
                old_host, old_port = group.master_addr()
                old = redis.Redis(host=old_host, port=old_port)
                old.zadd(BROKER_UNACKED_INDEX, {tag: 1.0})
                assert renew_held(worker) == 1 and old.zscore(BROKER_UNACKED_INDEX, tag) > 1.0
                old.zadd(BROKER_UNACKED_INDEX, {tag: 2.0})
                old.execute_command("WAIT", 1, 5000)  # on the replica before the failover
                host, port = group.failover()
                assert (host, port) != (old_host, old_port)
                new = redis.Redis(host=host, port=port)
                assert new.zscore(BROKER_UNACKED_INDEX, tag) == 2.0

                def renewed() -> bool:
                    try:
                        renew_held(worker)
                    except redis.ConnectionError:  # the pool's first use after the failover: retried
                        return False
                    return new.zscore(BROKER_UNACKED_INDEX, tag) > 2.0

                _until(renewed, "the lease renewed on the new primary")
                assert _until(lambda: probe.depths(["extractor"]) == {"extractor": 1}, "the probe on the new primary")
                assert probe.unacked() == 1
        finally:
            celery.close()
            probe.close()


def test_rabbitmq_probe_counts_ready_messages_and_consumers(redis_server, tenant):
    with rabbit_vhost() as vhost:
        settings = _settings(redis_server.url, vhost.url)
        celery = q.make_celery(settings)
        probe = make_probe(settings, app=celery)
        try:
            assert isinstance(probe, AmqpProbe) and probe.ping()
            for chunk in ("c1", "c2", "c3"):
                send(celery, ExtractChunk(tenant, "job-a1", chunk))
            assert probe.depths(["extractor", "parser"]) == {"extractor": 3, "parser": 0}  # parser: not declared
            assert probe.unacked() is None
            assert probe.jobs_with_messages({"job-a1", "job-a2"}, ["extractor"]) == {"job-a1", "job-a2"}
            with celery.connection_for_read() as conn:
                _hold(conn, celery, "extractor", 3)
                assert probe.depths(["extractor"]) == {"extractor": 0}
                assert probe.consumers(["extractor", "parser"]) == {"extractor": 1, "parser": 0}
                assert broker_readiness(probe, celery, ["extractor", "parser"]) == (
                    True, {"extractor": True, "parser": False})
                # held by a consumer that answers no inspect: any job may be in there
                assert probe.jobs_with_messages({"job-a1", "job-a2"}, ["extractor"]) == {"job-a1", "job-a2"}
            # the holder's connection closed: RabbitMQ requeues its unacked messages at once
            _until(lambda: probe.depths(["extractor"]) == {"extractor": 3}, "the messages requeued")
        finally:
            celery.close()
            probe.close()


def test_rabbitmq_probe_sees_which_job_a_celery_worker_holds(redis_server, tenant):
    """A real (in-process) Celery worker runs one job's task and holds it unacked: only that job has messages."""
    from celery.contrib.testing.worker import start_worker

    with rabbit_vhost() as vhost:
        settings = _settings(redis_server.url, vhost.url)
        celery = q.make_celery(settings)
        probe = make_probe(settings, app=q.make_celery(settings))
        release, started = threading.Event(), threading.Event()
        take_task_name(celery, q.EXTRACT)

        @celery.task(name=q.EXTRACT, shared=False)  # shared: it would join every later app
        def _extract(**_fields):
            started.set()
            release.wait(60)

        try:
            celery.conf.task_queues = [x for x in celery.conf.task_queues if x.name == "extractor"]
            with start_worker(celery, pool="threads", concurrency=1, perform_ping_check=False, shutdown_timeout=30):
                send(celery, ExtractChunk(tenant, "job-w1", "c1"))
                assert started.wait(30)
                assert probe.jobs_with_messages({"job-w1", "job-w2"}, ["extractor"]) == {"job-w1"}
                release.set()
                _until(lambda: probe.jobs_with_messages({"job-w1"}, ["extractor"]) == set(), "the task acked")
        finally:
            release.set()
            celery.close()
            probe.close()


def test_watchdog_on_rabbitmq_resumes_only_when_nothing_is_in_the_broker(redis_server, redis_client, tenant):
    redis_client.delete(active_jobs_key(), watchdog_key())
    with rabbit_vhost() as vhost:
        settings = _settings(redis_server.url, vhost.url)
        celery = q.make_celery(settings)
        probe = make_probe(settings, app=celery)
        sent: list = []
        dog = Watchdog(redis_client, settings, lambda msg: sent.append((msg.TASK, msg.args())), probe=probe)
        try:
            job = _running_job(redis_client, tenant)
            send(celery, ExtractChunk(tenant, "job-elsewhere", "c7"))  # a ready message: cannot tell whose
            for now in (1000, 1011, 1012, 1013):
                assert dog.sweep(now=now) == []
            with celery.connection_for_write() as conn:
                conn.default_channel.queue_purge("extractor")
            assert dog.sweep(now=1014) == []  # absent from the broker once
            resumed = dog.sweep(now=1015)  # twice: resumed
            assert [(t, j) for t, j, _steps in resumed] == [(tenant, job)]
            assert sent == [(q.EXTRACT, [tenant, job, "c2"])]
        finally:
            redis_client.delete(active_jobs_key(), watchdog_key())
            celery.close()
            probe.close()
