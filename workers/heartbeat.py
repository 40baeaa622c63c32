"""Consumer heartbeats: every worker's main process records, every ``workers.heartbeat_interval_s``, that it
consumes its queues (one sorted set per queue, member = the worker's node name, score = Redis ``TIME``).
The gateway's scrape-time collector exports ``graphfleet_queue_consumers{queue}`` from them, so a queue whose
consumers are gone (container removed, not just failing its scrape) shows 0 and ``GraphfleetQueueHasNoConsumer``
fires. A clean shutdown removes the worker at once; a killed one ages out
after ``shared.infra.messaging.consumers.CONSUMER_WINDOW_S``.

Heartbeats live in the *state* Redis (``runtime().redis``), not in the broker: they work the same whatever the
broker (Redis, Sentinel, RabbitMQ) and the gateway reads them with its state client."""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutdown

from shared.infra.messaging.consumers import record_consumer, retire_consumer
from workers.runtime import runtime

log = logging.getLogger(__name__)
_stop = threading.Event()


def consumed_queues(consumer) -> list[str]:
    return sorted(q for q in consumer.app.amqp.queues.consume_from if q != "celery")


def _loop(node: str, queues: list[str]) -> None:
    rt = runtime()
    interval = max(0.1, float(rt.settings.workers.heartbeat_interval_s))
    while True:
        try:
            record_consumer(rt.redis, node, queues)
        except Exception:  # noqa: BLE001 - Redis down or restarting: try again at the next interval
            log.warning("consumer heartbeat failed; retrying in %.1f s", interval, exc_info=True)
        if _stop.wait(interval):
            break
    try:
        retire_consumer(rt.redis, node, queues)
    except Exception:  # noqa: BLE001 - the entries age out after CONSUMER_WINDOW_S anyway
        log.warning("could not remove the consumer heartbeats of %s", node, exc_info=True)


def install(app) -> None:
    state: dict = {}

    @worker_ready.connect(weak=False)
    def _start(sender=None, **_kwargs) -> None:
        _stop.clear()
        node, queues = sender.hostname, consumed_queues(sender)
        thread = threading.Thread(target=_loop, args=(node, queues), name="graphfleet-heartbeat", daemon=True)
        state["thread"] = thread
        thread.start()

    @worker_shutdown.connect(weak=False)
    def _halt(**_kwargs) -> None:
        _stop.set()
        thread = state.get("thread")
        if thread is not None:
            thread.join(timeout=5)  # let it remove this worker from the consumer sets
