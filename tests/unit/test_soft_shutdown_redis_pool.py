"""celery_patches/shutdown_acks.py on a real Redis broker: a signal that comes while the worker's main thread holds
redis-py's connection pool lock. The helpers are ``test_soft_shutdown``'s (kombu's own objects: its event loop,
Celery's ``call_soon_ack``)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from celery.worker import state
from kombu import Connection, Consumer, Queue
from kombu.asynchronous import Hub

from shared.infra.messaging.celery_patches import shutdown_acks, soft_shutdown
from shared.infra.redis.conn import connect
from tests.unit.test_soft_shutdown import _exiting_worker, _Request, _run_loop_once, _schedule


def test_on_redis_a_signal_inside_a_pool_call_acks_what_finished_and_requeues_none_of_it(broker_redis, monkeypatch):
    """The signal can come while the loop's thread holds redis-py's connection pool lock (here: inside
    ``ConnectionPool.release``, as the loop acks a finished task). The wait's acks ran on a thread of their own, which
    waited for that lock ``ACK_JOIN_S``; the exit then put the finished tasks' messages back, and they ran again (a
    CI run: one task admitted twice). They run on the handler's thread, which owns the lock: nothing finished is
    requeued, and the wait ends once the task still running at the signal finished and was acked."""
    with Connection(broker_redis.url) as producer:
        producer.SimpleQueue("acked-before").put({"task": "finished before the signal"})
        producer.SimpleQueue("acked-during").put({"task": "finished in the wait"})
    conn, got, hub = Connection(broker_redis.url), [], Hub()
    consumer = Consumer(conn.channel(), queues=[Queue("acked-before"), Queue("acked-during")],
                        callbacks=[lambda _body, message: got.append(message)])
    consumer.consume()
    while len(got) < 2:
        conn.drain_events(timeout=2)
    held = {m.delivery_info["routing_key"]: m for m in got}
    running = _Request()
    state.active_requests.add(running)

    def finish_in_the_wait():  # its pool thread: the task ends, its ack is scheduled
        time.sleep(0.2)
        state.active_requests.discard(running)
        _schedule(hub, held["acked-during"].ack_log_error)
        running.acknowledged = True

    worker, _exits, _hooks = _exiting_worker(monkeypatch, SimpleNamespace(task_consumer=consumer, hub=None), 30.0)
    at_exit: dict = {}
    redis = connect(broker_redis.url)
    monkeypatch.setattr(soft_shutdown.os, "_exit", lambda code: at_exit.update(
        code=code, unacked=redis.hlen("unacked"), queued=redis.llen("acked-before") + redis.llen("acked-during")))
    pool = consumer.channel.pool
    owns = pool.owns_connection

    signalled: list = []

    def signal_inside_release(connection):  # called by ConnectionPool.release with its lock held
        if not signalled:
            signalled.append(1)
            assert pool._lock._is_owned()
            threading.Thread(target=finish_in_the_wait).start()
            soft_shutdown._wait_then_requeue(worker)
        return owns(connection)

    monkeypatch.setattr(pool, "owns_connection", signal_inside_release)
    try:
        _schedule(hub, held["acked-before"].ack_log_error)
        started = time.monotonic()
        _run_loop_once(hub)  # the loop runs the first ack: its pipeline gives its connection back
        assert at_exit == {"code": soft_shutdown.EXIT_CODE, "unacked": 0, "queued": 0}
        assert time.monotonic() - started < shutdown_acks.ACK_JOIN_S
        assert held["acked-before"].acknowledged and held["acked-during"].acknowledged
    finally:
        state.active_requests.discard(running)
        monkeypatch.undo()
        conn.release()
