"""Scrape-time collectors (read Redis when Prometheus scrapes; never written to multiprocess files)."""

from __future__ import annotations

import logging

from prometheus_client.core import GaugeMetricFamily

log = logging.getLogger(__name__)

# kombu's Redis transport keeps unacknowledged (reserved, acks_late) messages in this hash.
UNACKED_KEY = "unacked"
# kombu's priority sub-queues are "<queue>\x06\x16<n>"; graphfleet sends no priorities, so n=0 (bare name).
PRIORITY_SEP = "\x06\x16"


class QueueDepthCollector:
    """``graphfleet_queue_depth{queue}`` (LLEN of each Celery queue list) and ``graphfleet_queue_unacked``."""

    def __init__(self, redis, queues: list[str] | None = None):
        from shared.infra.queueing import QUEUES

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
            for q in self.queues:
                pipe.llen(q)
                for n in (3, 6, 9):
                    pipe.llen(f"{q}{PRIORITY_SEP}{n}")
            pipe.hlen(UNACKED_KEY)
            values = pipe.execute()
        except Exception as exc:  # noqa: BLE001 - a scrape must not fail because Redis is away
            log.warning("queue depth collection failed: %s", exc)
            return
        for i, q in enumerate(self.queues):
            depth.add_metric([q], float(sum(values[i * 4 : i * 4 + 4])))
        unacked.add_metric([], float(values[-1]))
        yield depth
        yield unacked
