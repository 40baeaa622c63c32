"""The HTTP gateway: tenants and API keys, ingestion, jobs, queries, usage, quotas, graph access.

It enqueues by task name (``shared.infra.messaging.queueing``) and never imports ``workers``.
"""
