"""Scrape-time collectors (read Redis when Prometheus scrapes; never written to multiprocess files)."""

from __future__ import annotations

import logging

from prometheus_client.core import GaugeMetricFamily

from shared.infra.keys import BROKER_UNACKED, broker_queue_keys
from shared.infra.queueing import QUEUES

log = logging.getLogger(__name__)


class QueueDepthCollector:
    """``graphfleet_queue_depth{queue}`` (LLEN of each Celery queue list) and ``graphfleet_queue_unacked``."""

    def __init__(self, redis, queues: list[str] | None = None):
        self.redis = redis
        self.queues = list(queues or QUEUES)

    def describe(self):
        return [
            GaugeMetricFamily("graphfleet_queue_depth", "Messages waiting in the queue", labels=["queue"]),
            GaugeMetricFamily("graphfleet_queue_unacked", "Messages delivered to workers and not acked yet"),
        ]

    def collect(self):
        depth = GaugeMetricFamily("graphfleet_queue_depth", "Messages waiting in the queue", labels=["queue"])
        unacked = GaugeMetricFamily("graphfleet_queue_unacked", "Messages delivered to workers and not acked yet")
        try:
            pipe = self.redis.pipeline(transaction=False)
            per_queue = len(broker_queue_keys(""))
            for q in self.queues:
                for key in broker_queue_keys(q):
                    pipe.llen(key)
            pipe.hlen(BROKER_UNACKED)
            values = pipe.execute()
        except Exception as exc:  # noqa: BLE001 - a scrape must not fail because Redis is away
            log.warning("queue depth collection failed: %s", exc)
            return
        for i, q in enumerate(self.queues):
            depth.add_metric([q], float(sum(values[i * per_queue : (i + 1) * per_queue])))
        unacked.add_metric([], float(values[-1]))
        yield depth
        yield unacked
