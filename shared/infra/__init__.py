"""Infrastructure: everything that talks to Redis, the broker, the LLM or a vector store. It may import the
domain; the domain never imports it. One sub-package per concern:

* ``redis/``: connections (and the embedded redis-server), the key layout, its one-time migration;
* ``jobs/``: job state and its Lua scripts, waiting for a job's end, submitting ingestions and queries, a query's
  record and its map/reduce state;
* ``tenancy/``: tenants and their API keys, tiers, quotas, the per-call usage records and the ledger over them;
* ``messaging/``: task names, queues and the Celery app, the task messages, the broker probe, consumer heartbeats,
  the gateway's shared pub/sub subscription, and every Celery/kombu workaround (``celery_patches/``);
* ``observability/``: Prometheus metrics and their collectors, OpenTelemetry traces, the log format;
* ``llm/``: the LLM and embedding clients, the answer cache, the global rate limit;
* ``store/``: the graph, document, community and vector stores, their per-process read caches and warm-up.

``child_procs`` (child processes that end with their parent) serves the embedded Redis and ``graphfleet up``.
"""
