"""A log handler added before Celery sets up logging does not stop Celery from adding its own.

Upstream behaviour: Celery's ``Logging.setup_handlers`` adds its handler (stderr, or ``-f logfile``) only to a logger
that has none yet (``Logging._is_configured``), unless the logger carries Celery's private flag
``_rudimentary_setup``. ``shared.infra.observability.log_setup`` adds a JSON handler to the root logger before that, so
Celery's start-up warnings are JSON lines too, and marks it provisional with :func:`mark_provisional`.

Applies to: celery 5.7 (``APPLIES_TO``). Delete when Celery no longer reads ``_rudimentary_setup`` (the early handler
would then keep Celery's from being added: move the early handler to Celery's ``setup_logging`` signal instead).
"""

from __future__ import annotations

import logging

APPLIES_TO = {"celery": ">=5.7,<5.8"}


def mark_provisional(logger: logging.Logger) -> None:
    """Celery still adds its own handler to ``logger``, whatever handlers it has now."""
    logger._rudimentary_setup = True
