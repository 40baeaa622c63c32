"""Celery worker processes: thin task shells around ``shared`` functions."""
