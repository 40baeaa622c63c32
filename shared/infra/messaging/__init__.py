"""How processes tell each other things: task names and queues (``queueing``), the task messages,
the broker probe, consumer heartbeats, the gateway's shared pub/sub subscription, and every workaround
of Celery or kombu internals (``celery_patches``)."""
