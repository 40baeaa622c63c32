"""Every workaround of Celery, kombu or py-amqp internals, in one place.

Each module says which upstream behaviour it works around, the versions it applies to (``APPLIES_TO``, checked
against the installed ones by ``tests/unit/test_celery_patches.py``, which also fails when a patched or read
internal changes shape) and when to delete it. After a Celery, kombu or py-amqp upgrade, run that test first.

Patches (they replace an upstream function; applied by :func:`install`, never at import):

* :mod:`.redis_broken_connection`: a Redis restart or failover mid-task reconnects the consumer instead of
  stopping it (kombu ``QoS.restore_unacked``, ``Channel._connparams``);
* :mod:`.redis_channel_client`: one Redis client per kombu channel, not one per command (``Channel.conn_or_acquire``);
* :mod:`.soft_shutdown` with :mod:`.shutdown_acks` and :mod:`.shutdown_pool`: SIGTERM acks what finishes during the
  soft shutdown and requeues what a threads pool still runs (Celery ``WorkController.wait_for_soft_shutdown``,
  ``Consumer.call_soon_ack``, ``TaskPool.on_apply``; helpers :mod:`.shutdown_inflight`, :mod:`.main_stack`).

Reaches into private state (functions the features call; nothing replaced):

* :mod:`.redis_leases`: leases on the messages a worker holds, in kombu's Redis bookkeeping (``workers/lease.py``,
  ``graphfleet up``'s supervisor);
* :mod:`.amqp_queue_bindings`: RabbitMQ queues declared before Celery binds them for delayed delivery (on
  ``worker_init``, :func:`on_worker_init`);
* :mod:`.amqp_probe_channel`: the broker probe's channel opened afresh after RabbitMQ closed it;
* :mod:`.celery_log_handlers`: an early JSON log handler does not keep Celery from adding its own.

Workers call :func:`on_worker_init` from Celery's ``worker_init`` signal (before the pool and the consumer exist, as
the patches need); a process that only sends messages and reads the broker (the gateway, the CLI) calls
``install(worker=False)`` when it builds its Celery app (``shared.infra.messaging.queueing.make_celery``).
"""

from __future__ import annotations

# the modules whose install() applies a patch; the worker-only ones import Celery's worker machinery
CLIENT_PATCHES = ("redis_channel_client",)
WORKER_PATCHES = ("redis_broken_connection", "soft_shutdown")


def install(worker: bool = True) -> None:
    """Apply the patches (idempotent). ``worker=False``: only those a process that sends messages uses."""
    from importlib import import_module

    for name in CLIENT_PATCHES + (WORKER_PATCHES if worker else ()):
        import_module(f"{__name__}.{name}").install()


def on_worker_init(sender=None, **_kwargs) -> None:
    """Celery's ``worker_init``: every patch, then the queues declared for delayed delivery (RabbitMQ)."""
    from shared.infra.messaging.celery_patches.amqp_queue_bindings import declare_queues

    install()
    declare_queues(sender)
