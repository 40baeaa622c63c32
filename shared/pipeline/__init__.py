"""Ingestion stages as plain functions over explicit dependencies (stores, callables, settings).

Celery tasks in ``workers/`` load ids, call one of these, and enqueue what it returns.
"""
