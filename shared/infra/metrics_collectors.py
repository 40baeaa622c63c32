"""Scrape-time collectors (read Redis when Prometheus scrapes; never written to multiprocess files)."""

from __future__ import annotations

import logging

from prometheus_client.core import GaugeMetricFamily

from shared.infra.broker import CONSUMER_WINDOW_S
from shared.infra.keys import BROKER_UNACKED, broker_queue_keys, consumers_key
from shared.infra.queueing import QUEUES

log = logging.getLogger(__name__)



class QueueDepthCollector:
    """``graphfleet_queue_depth{queue}`` (LLEN of each Celery queue list), ``graphfleet_queue_unacked`` and
    ``graphfleet_queue_consumers{queue}`` (workers whose heartbeat is at most ``window_s`` old; 0 when none, so
    every known queue always has the series). Nothing at all when Redis cannot be read (alert: absent)."""

    def __init__(self, redis, queues: list[str] | None = None, window_s: float = CONSUMER_WINDOW_S):
        self.redis = redis
        self.queues = list(queues or QUEUES)
        self.window_s = window_s

    @staticmethod
    def _families():
        return (GaugeMetricFamily("graphfleet_queue_depth", "Messages waiting in the queue", labels=["queue"]),
                GaugeMetricFamily("graphfleet_queue_unacked", "Messages delivered to workers and not acked yet"),
                GaugeMetricFamily("graphfleet_queue_consumers", "Workers consuming the queue (recent heartbeat)",
                                  labels=["queue"]))

    def describe(self):
        return list(self._families())

    def _read(self) -> tuple[list[int], int, list[int]]:
        seconds, micros = self.redis.time()
        since = seconds + micros / 1e6 - self.window_s
        pipe = self.redis.pipeline(transaction=False)
        per_queue = len(broker_queue_keys(""))
        for q in self.queues:
            for key in broker_queue_keys(q):
                pipe.llen(key)
        pipe.hlen(BROKER_UNACKED)
        for q in self.queues:
            pipe.zcount(consumers_key(q), since, "+inf")
        values = pipe.execute()
        n = len(self.queues)
        depths = [sum(values[i * per_queue : (i + 1) * per_queue]) for i in range(n)]
        return depths, values[n * per_queue], values[n * per_queue + 1 :]

    def collect(self):
        depth, unacked, consumers = self._families()
        try:
            depths, pending, counts = self._read()
        except Exception as exc:  # noqa: BLE001 - a scrape must not fail because Redis is away
            log.warning("queue depth collection failed: %s", exc)
            return
        for q, d, c in zip(self.queues, depths, counts, strict=True):
            depth.add_metric([q], float(d))
            consumers.add_metric([q], float(c))
        unacked.add_metric([], float(pending))
        yield depth
        yield unacked
        yield consumers
