"""The gateway's readiness (``Gateway.readiness``, ``/readyz``) on each broker: the state Redis and the broker
are both pinged, and a queue counts as consumed per the broker (RabbitMQ: its consumer counts; Redis: the
workers' ``active_queues``). Real servers, real kombu consumers; no worker processes."""

from __future__ import annotations

from kombu import Consumer

from api_gateway.state import Gateway
from shared.config import Settings
from shared.infra.messaging.queueing import QUEUES
from shared.infra.redis.conn import EmbeddedRedis
from tests.brokers import rabbit_vhost


def _gateway(state_url: str, broker_url: str) -> Gateway:
    return Gateway.build(Settings(redis_url=state_url, broker_url=broker_url, admin_key="adm-test"))


def test_readiness_with_a_separate_redis_broker_without_workers(redis_server, tmp_path):
    broker = EmbeddedRedis(tmp_path / "broker", persist=False).start()
    try:
        state = _gateway(redis_server.url, broker.url)._probe()
        assert state["redis"] is True and state["broker"] is True
        assert state["ready"] is False and set(state["queues"]) == set(QUEUES) and not any(state["queues"].values())
        broker.stop()
        state = _gateway(redis_server.url, broker.url)._probe()
        assert state["broker"] is False and state["ready"] is False
    finally:
        broker.stop()


def test_readiness_on_rabbitmq_counts_the_consumers_of_every_queue(redis_server):
    with rabbit_vhost() as vhost:
        gw = _gateway(redis_server.url, vhost.url)
        state = gw._probe()
        assert state["redis"] and state["broker"] and not state["ready"]
        app = gw.celery.app
        with app.connection_for_read() as conn:
            channel = conn.channel()
            queues = [app.amqp.queues[q] for q in QUEUES]
            consumer = Consumer(channel, queues=queues[:-1], accept=["json"])
            consumer.consume()
            state = gw._probe()
            assert not state["ready"] and state["queues"][QUEUES[-1]] is False
            assert all(state["queues"][q] for q in QUEUES[:-1])
            consumer.add_queue(queues[-1])
            consumer.consume()
            assert gw._probe() == {"ready": True, "redis": True, "broker": True, "queues": dict.fromkeys(QUEUES, True)}
