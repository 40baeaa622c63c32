"""Celery's configuration per broker scheme: Redis, Sentinel, RabbitMQ
(``shared.infra.messaging.queueing.celery_config``).

The settings are checked on their own and by handing them to kombu/Celery for real: a Sentinel URL and master
name reach kombu's sentinel transport, and the RabbitMQ queues are declared as quorum queues on the server."""

from __future__ import annotations

import pytest

from shared.config import Settings
from shared.infra.messaging.queueing import QUEUES, broker_url, celery_config, make_celery

SENTINEL = "sentinel://127.0.0.1:26379;sentinel://127.0.0.1:26380"


def _settings(broker: str | None, **extra) -> Settings:
    return Settings(redis_url="redis://127.0.0.1:6379/0", broker_url=broker, **extra)


def test_redis_broker_keeps_the_visibility_timeout_and_the_queues_classic():
    config = celery_config(_settings(None))
    assert config["broker_url"] == "redis://127.0.0.1:6379/0"
    options = config["broker_transport_options"]
    assert options["visibility_timeout"] == Settings().workers.visibility_timeout_s
    assert "master_name" not in options and "confirm_publish" not in options
    assert all(not q.queue_arguments for q in config["task_queues"])


def test_a_separate_redis_broker_is_used_as_is():
    config = celery_config(_settings("redis://10.0.0.9:6380/2"))
    assert config["broker_url"] == "redis://10.0.0.9:6380/2"
    assert "visibility_timeout" in config["broker_transport_options"]


def test_sentinel_broker_names_the_master_and_keeps_the_visibility_timeout():
    settings = _settings(SENTINEL, broker_sentinel_master="fleet-a")
    config = celery_config(settings)
    assert config["broker_url"] == SENTINEL
    options = config["broker_transport_options"]
    assert options["master_name"] == "fleet-a"
    assert options["visibility_timeout"] == settings.workers.visibility_timeout_s
    assert options["unacked_restore_throttle"] == 1
    app = make_celery(settings)
    with app.connection_for_write() as conn:  # kombu parses the URL into its sentinel transport
        assert conn.transport_cls == "sentinel"
        assert conn.transport_options["master_name"] == "fleet-a"
        assert [alt.split("/")[-1] for alt in conn.alt] == ["127.0.0.1:26379", "127.0.0.1:26380"]


def test_rabbitmq_broker_uses_quorum_queues_and_publisher_confirms():
    config = celery_config(_settings("amqp://u:p@127.0.0.1:5672/v"))
    assert config["broker_url"] == "amqp://u:p@127.0.0.1:5672/v"
    assert config["broker_transport_options"] == {"confirm_publish": True}  # no visibility timeout
    assert {q.name for q in config["task_queues"]} == {*QUEUES, "default"}
    for q in config["task_queues"]:
        assert q.queue_arguments == {"x-queue-type": "quorum"} and q.durable
    assert config["task_default_queue_type"] == "quorum"
    assert config["worker_detect_quorum_queues"] is True
    assert config["task_acks_late"] and config["task_reject_on_worker_lost"]


def test_a_redis_cluster_cannot_be_the_broker():
    with pytest.raises(ValueError, match="cannot be Celery's broker"):
        broker_url(Settings(redis_url="redis+cluster://127.0.0.1:7000/0", broker_url=None))


def test_rabbitmq_declares_the_queues_as_quorum_queues():
    """The configured queues, declared on a real RabbitMQ vhost, are quorum queues (a passive declare with
    another type is refused by the server: PRECONDITION_FAILED)."""
    from amqp.exceptions import PreconditionFailed

    from tests.brokers import rabbit_vhost

    with rabbit_vhost() as vhost:
        settings = _settings(vhost.url)
        app = make_celery(settings)
        with app.connection_for_write() as conn:
            channel = conn.default_channel
            for q in app.conf.task_queues:
                q(channel).declare()
            channel.queue_declare("extractor", durable=True, auto_delete=False,
                                  arguments={"x-queue-type": "quorum"})  # same type: accepted
            with pytest.raises(PreconditionFailed):
                conn.channel().queue_declare("extractor", durable=True, auto_delete=False,
                                             arguments={"x-queue-type": "classic"})


def test_rabbitmq_countdown_goes_through_native_delayed_delivery():
    """A countdown message (``QueryDeadline``) on a quorum queue waits in RabbitMQ's delay exchanges, not in a
    worker's prefetch: it reaches the worker with the delay routing key (``<bits>.reducer``) kombu computes."""
    import threading

    from celery.contrib.testing.worker import start_worker

    from shared.infra.messaging.queueing import QUERY_DEADLINE
    from tests.brokers import rabbit_vhost, take_task_name

    with rabbit_vhost() as vhost:
        app = make_celery(_settings(vhost.url))
        app.conf.task_queues = [x for x in app.conf.task_queues if x.name == "reducer"]
        ran, keys = threading.Event(), []
        take_task_name(app, QUERY_DEADLINE)

        @app.task(name=QUERY_DEADLINE, bind=True, shared=False)  # shared: it would join every later app
        def _deadline(self, **_fields):
            keys.append(self.request.delivery_info.get("routing_key"))
            ran.set()

        try:
            with start_worker(app, pool="threads", concurrency=1, perform_ping_check=False, shutdown_timeout=30):
                app.send_task(QUERY_DEADLINE, kwargs={"tenant": "t", "job_id": "q1"}, countdown=2)
                assert ran.wait(60)
        finally:
            app.close()
    assert keys[0] != "reducer" and keys[0].endswith(".reducer"), keys
