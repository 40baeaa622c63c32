"""Log format of every graphfleet process: ``GRAPHFLEET_LOG_FORMAT=text`` (default, unchanged) or ``json``.

In ``json`` mode every log record is one JSON object on one line (``ts``, ``level``, ``logger``, ``message``,
``process``, ``exc`` when there is a traceback, and the context known at the time): in a worker, while a task
runs, ``task``, ``task_id``, ``queue`` and, for job tasks, ``job_id`` and ``tenant`` (bound by the
``task_prerun``/``task_postrun`` signals, so Celery's own "Task ... succeeded/raised" lines carry them too); in
the gateway, fields passed with ``extra=`` (a submission logs ``job_id``, ``tenant``, ``kind``).

The formatter is ~20 lines of stdlib ``json`` instead of python-json-logger: no new runtime dependency for the
gateway and worker images, and the field names are ours to keep stable.

* Gateway: ``api_gateway.app.create_app`` calls :func:`configure_logging` (root and uvicorn loggers).
* Workers: ``workers/celery_app.py`` calls :func:`install_celery` (Celery keeps ``worker_hijack_root_logger``
  False, so the handlers Celery sets up are kept and only their formatter changes, on ``after_setup_logger``
  and ``after_setup_task_logger``).
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from datetime import UTC, datetime

_EMPTY: dict = {}  # never mutated: bind() sets a new dict
_CONTEXT: contextvars.ContextVar[dict] = contextvars.ContextVar("graphfleet_log_context", default=_EMPTY)  # noqa: B039
_RECORD_ATTRS = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", "taskName", "color_message"}  # color_message: uvicorn's ANSI copy of the message
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


def bind(**fields) -> contextvars.Token:
    """Add fields to the log context of this thread/task; ``reset(token)`` restores the previous one."""
    return _CONTEXT.set({**_CONTEXT.get(), **{k: v for k, v in fields.items() if v is not None}})


def reset(token: contextvars.Token) -> None:
    _CONTEXT.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
               "level": record.levelname, "logger": record.name, "message": record.getMessage(),
               "process": record.process, **_CONTEXT.get()}
        out.update({k: v for k, v in vars(record).items() if k not in _RECORD_ATTRS and not k.startswith("_")})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.stack_info:
            out["stack"] = record.stack_info
        return json.dumps(out, default=str, ensure_ascii=False)


def use_json(logger: logging.Logger) -> None:
    """Give every handler of ``logger`` the JSON formatter (a stderr handler when it has none)."""
    if not logger.handlers:
        logger.addHandler(logging.StreamHandler(sys.stderr))
    for handler in logger.handlers:
        handler.setFormatter(JsonFormatter())


def json_enabled(settings) -> bool:
    return getattr(settings, "log_format", "text") == "json"


def configure_logging(settings) -> None:
    """Gateway/CLI processes: in json mode the root logger writes JSON to stderr at ``settings.log_level`` and
    uvicorn's loggers propagate to it. Text mode leaves logging as it was."""
    if not json_enabled(settings):
        return
    root = logging.getLogger()
    use_json(root)
    root.setLevel(getattr(settings, "log_level", "INFO").upper())
    for name in UVICORN_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers, logger.propagate = [], True


# ------------------------------------------------------------------ Celery workers
def _task_fields(task, args, kwargs) -> dict:
    from shared.infra.messaging.queueing import ROUTES

    request = getattr(task, "request", None)
    delivery = getattr(request, "delivery_info", None) or {}
    fields = {"task": task.name, "task_id": getattr(request, "id", None),
              "queue": delivery.get("routing_key") or ROUTES.get(task.name)}
    message = getattr(task, "message", None)  # job tasks (workers/shell.py JobTask) carry their message type
    if message is not None:
        try:
            msg = message.from_call(tuple(args or ()), dict(kwargs or {}))
            fields.update(job_id=msg.job_id, tenant=msg.tenant)
        except Exception:  # noqa: BLE001 - a malformed message is the task's problem, not the logger's
            pass
    return fields


def install_celery(get_settings) -> None:
    """Connect the worker's logging signals (``get_settings()`` is read when the worker sets up logging)."""
    from celery.signals import after_setup_logger, after_setup_task_logger, celeryd_init, task_postrun, task_prerun

    from shared.infra.messaging.celery_patches.celery_log_handlers import mark_provisional

    def _early(**_kwargs) -> None:
        """Before Celery sets up logging, its start-up warnings (e.g. running as root) are JSON lines too."""
        if json_enabled(get_settings()):
            logging.captureWarnings(True)
            root = logging.getLogger()
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(JsonFormatter())
            handler._graphfleet_early = True
            root.addHandler(handler)
            mark_provisional(root)  # Celery still adds its own handler (e.g. ``-f logfile``)

    def _format(logger=None, **_kwargs) -> None:
        if logger is not None and json_enabled(get_settings()):
            early = [h for h in logger.handlers if getattr(h, "_graphfleet_early", False)]
            if len(early) < len(logger.handlers):
                for handler in early:
                    logger.removeHandler(handler)
            use_json(logger)

    def _bind(task=None, args=None, kwargs=None, **_kw) -> None:
        if task is not None:
            _CONTEXT.set(_task_fields(task, args, kwargs))

    def _unbind(**_kwargs) -> None:
        _CONTEXT.set(_EMPTY)

    celeryd_init.connect(_early, weak=False)
    after_setup_logger.connect(_format, weak=False)
    after_setup_task_logger.connect(_format, weak=False)
    task_prerun.connect(_bind, weak=False)
    task_postrun.connect(_unbind, weak=False)
