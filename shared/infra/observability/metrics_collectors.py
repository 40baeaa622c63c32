"""Scrape-time collectors (read Redis and the broker when Prometheus scrapes; never written to multiprocess
files)."""

from __future__ import annotations

import logging

from prometheus_client.core import GaugeMetricFamily

from shared.config import get_settings
from shared.infra.messaging.broker_probe import default_probe
from shared.infra.messaging.consumers import CONSUMER_WINDOW_S
from shared.infra.messaging.queueing import QUEUES
from shared.infra.redis.keys import consumers_key

log = logging.getLogger(__name__)


class QueueDepthCollector:
    """``graphfleet_queue_depth{queue}`` (messages waiting: LLEN of each kombu list on Redis, a passive
    declare's ready count on RabbitMQ), ``graphfleet_queue_unacked`` (delivered, not acked: the ``unacked``
    hash on Redis; absent on RabbitMQ, which cannot say cheaply) and ``graphfleet_queue_consumers{queue}``
    (workers whose heartbeat in the *state* Redis is at most ``window_s`` old; 0 when none, so every known
    queue always has the series). Nothing at all when Redis or the broker cannot be read (alert: absent).

    ``redis`` is the state Redis; ``probe`` the broker's (default: ``broker_probe.default_probe``, built on
    first scrape)."""

    def __init__(self, redis, queues: list[str] | None = None, window_s: float = CONSUMER_WINDOW_S, probe=None):
        self.redis = redis
        self.queues = list(queues or QUEUES)
        self.window_s = window_s
        self.probe = probe

    @staticmethod
    def _families():
        return (GaugeMetricFamily("graphfleet_queue_depth", "Messages waiting in the queue", labels=["queue"]),
                GaugeMetricFamily("graphfleet_queue_unacked", "Messages delivered to workers and not acked yet"),
                GaugeMetricFamily("graphfleet_queue_consumers", "Workers consuming the queue (recent heartbeat)",
                                  labels=["queue"]))

    def describe(self):
        return list(self._families())

    def _read(self) -> tuple[list[int], int | None, list[int]]:
        if self.probe is None:
            self.probe = default_probe(get_settings(), self.redis, cached=True)
        depths = self.probe.depths(self.queues)
        pending = self.probe.unacked()
        seconds, micros = self.redis.time()
        since = seconds + micros / 1e6 - self.window_s
        pipe = self.redis.pipeline(transaction=False)
        for q in self.queues:
            pipe.zcount(consumers_key(q), since, "+inf")
        return [depths[q] for q in self.queues], pending, pipe.execute()

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
        yield depth
        if pending is not None:
            unacked.add_metric([], float(pending))
            yield unacked
        yield consumers
