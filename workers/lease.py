"""The lease thread of every worker's main process (where kombu receives and acks messages, whatever the pool).

Several times per ``workers.lease_renew_interval_s`` it renews the leases of the messages this worker holds and puts
back those whose lease has aged past ``lease_expiry`` (two renewal intervals and a margin, 32 s by default): their
worker is gone, whoever restarted it or not (``graphfleet up``'s supervisor, Compose, Kubernetes, nobody). How, on
kombu's Redis bookkeeping: ``shared.infra.messaging.celery_patches.redis_leases``. On RabbitMQ there is nothing to renew
(the broker redelivers the messages of a closed connection at once), so no thread is started.
"""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutdown

from shared.infra.messaging.celery_patches.redis_leases import tend
from shared.infra.messaging.queueing import (
    LEASE_CHECKS_PER_INTERVAL,
    broker_url,
    is_amqp,
    lease_expiry,
    lease_renew_interval,
)
from workers.runtime import runtime

log = logging.getLogger(__name__)
_stop = threading.Event()


def _loop(consumer) -> None:
    settings = runtime().settings
    every = lease_renew_interval(settings) / LEASE_CHECKS_PER_INTERVAL
    expiry = lease_expiry(settings)
    while not _stop.wait(every):
        try:
            tend(consumer, expiry)
        except Exception:  # noqa: BLE001 - Redis down or restarting: try again at the next pass
            log.warning("could not renew or check the message leases; retrying in %.1f s", every, exc_info=True)


def install(app) -> None:
    @worker_ready.connect(weak=False)
    def _start(sender=None, **_kwargs) -> None:
        _stop.clear()
        if is_amqp(broker_url(runtime().settings)):
            return  # RabbitMQ: redeliveries are the broker's job
        threading.Thread(target=_loop, args=(sender,), name="graphfleet-lease", daemon=True).start()

    @worker_shutdown.connect(weak=False)
    def _halt(**_kwargs) -> None:
        _stop.set()
