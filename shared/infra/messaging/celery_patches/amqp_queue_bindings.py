"""RabbitMQ: every configured queue exists before Celery binds them all to its delayed-delivery exchanges.

Upstream behaviour: with native delayed delivery (countdown messages on quorum queues,
``shared.infra.messaging.queueing.quorum_queue``), Celery's ``DelayedDelivery`` bootstep binds *every* configured queue
(``app.amqp.queues``) to the delayed-delivery exchanges at worker start, while the worker declares only the queues
it consumes; the binding of the others fails ("Failed to bind queue ...", logged as critical) until their own worker
runs, and a countdown message routed to an unbound queue is dropped (celery/celery#9960). :func:`declare_queues`,
run on ``worker_init`` (:func:`shared.infra.messaging.celery_patches.on_worker_init`), declares them all first. Public
API only; on Redis it does nothing.

Applies to: celery 5.7 (``APPLIES_TO``). Delete when Celery binds only the queues a worker declares, or declares
the queues it binds (``DelayedDelivery._bind_queues`` no longer iterates ``app.amqp.queues`` as a whole).
"""

from __future__ import annotations

import logging
from urllib.parse import urlparse

APPLIES_TO = {"celery": ">=5.7,<5.8"}
log = logging.getLogger(__name__)


def declare_queues(worker) -> None:
    """RabbitMQ only: declare every configured queue (and its exchange) before the consumer starts."""
    app = getattr(worker, "app", None)
    # the broker's scheme is read here, not through ``queueing``: queueing installs this folder's patches
    if app is None or urlparse(app.conf.broker_url or "").scheme not in ("amqp", "amqps", "pyamqp"):
        return
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=3)
            channel = conn.default_channel
            for queue in app.conf.task_queues or []:
                queue(channel).declare()
    except Exception:  # noqa: BLE001 - the broker is not up yet: the consumer's own retries take over
        log.warning("could not declare the queues before starting", exc_info=True)
