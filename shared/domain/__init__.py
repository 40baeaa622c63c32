"""The domain: chunking, extraction, merge, clustering, reports, query, retrieval, token budgets, prompts.

Pure code: no Redis, Celery, HTTP or Prometheus import (tests/unit/test_layers.py enforces it). Storage is
reached only through the protocols of ``shared.domain.storage``.
"""
