"""Runs the job watchdog (``shared.pipeline.watchdog``) in a daemon thread of every worker's main
process; a Redis lock makes one sweep at a time across the fleet, so any number of workers may run it.

The watchdog reads job state from the state Redis and asks the *broker* which jobs still have messages
through ``shared.infra.messaging.broker_probe`` (Redis, Sentinel's current primary, or RabbitMQ)."""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutdown

from shared.infra.messaging.broker_probe import make_probe
from shared.infra.messaging.messages import send
from shared.pipeline.watchdog import Watchdog
from workers.runtime import runtime

log = logging.getLogger(__name__)
_stop = threading.Event()


def _loop(app) -> None:
    rt = runtime()
    probe = make_probe(rt.settings, app=app, state_redis=rt.redis)
    watchdog = Watchdog(rt.redis, rt.settings, lambda msg: send(app, msg), probe=probe)
    interval = max(0.2, float(rt.settings.workers.watchdog_interval_s))
    while not _stop.wait(interval):
        try:
            watchdog.sweep()
        except Exception:  # noqa: BLE001 - Redis or the broker down or restarting: try again at the next interval
            log.warning("job watchdog sweep failed; retrying in %.1f s", interval, exc_info=True)
    probe.close()


def install(app) -> None:
    @worker_ready.connect(weak=False)
    def _start(**_kwargs) -> None:
        _stop.clear()
        threading.Thread(target=_loop, args=(app,), name="graphfleet-watchdog", daemon=True).start()

    @worker_shutdown.connect(weak=False)
    def _halt(**_kwargs) -> None:
        _stop.set()
