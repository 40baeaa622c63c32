"""Optional OpenTelemetry traces: gateway request -> Celery message -> worker task, one trace per submission.

Off by default. ``GRAPHFLEET_OTEL_ENABLED=true`` (and the ``otel`` extra installed) turns it on; the
exporter follows the standard environment: ``OTEL_TRACES_EXPORTER`` (``otlp`` default, ``console``, ``none``),
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (OTLP over HTTP/protobuf),
``OTEL_SERVICE_NAME`` (default ``graphfleet-gateway`` / ``graphfleet-worker``), ``OTEL_TRACES_SAMPLER``...
``GRAPHFLEET_OTEL_FILE=/path`` writes finished spans as JSON lines to that file instead (tests, debugging).

* Gateway (``instrument_gateway``): FastAPI's native OpenTelemetry support (0.142+, on by default, uses the
  global TracerProvider set here) opens a server span per request, e.g. ``POST /v1/queries``;
  opentelemetry-instrumentation-fastapi is not used: it refuses an app whose middleware stack is wrapped, as
  ``GatewayApp``'s is, and would duplicate the native spans. A ``before_task_publish`` handler opens a producer
  span ``send <task>`` under the request's span and injects its context (W3C ``traceparent``) into the Celery
  message headers (the Celery instrumentation's own publish hook only handles tasks registered in the sending
  process; the gateway sends by name).
* Workers (``install_celery``): ``opentelemetry-instrumentation-celery`` opens a consumer span ``run/<task>``
  per task, child of the context in the message headers, and propagates it into the messages the task sends,
  so every stage of a job joins the trace of the request that submitted it.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)
_state: dict = {}


def enabled(settings) -> bool:
    return bool(getattr(settings, "otel_enabled", False))


def _exporter_processor(settings):
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

    path = getattr(settings, "otel_file", None)
    if path:
        out = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
        return SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=lambda s: s.to_json(indent=None) + "\n"))
    kind = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")[0].strip().lower()
    if kind == "none":
        return None
    if kind == "console":
        return BatchSpanProcessor(ConsoleSpanExporter())
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return BatchSpanProcessor(OTLPSpanExporter())


def tracer_provider(settings, service: str):
    """This process's TracerProvider (built once), or None when tracing is off or not installed."""
    if not enabled(settings):
        return None
    if "provider" in _state:
        return _state["provider"]
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        log.warning("GRAPHFLEET_OTEL_ENABLED is set but OpenTelemetry is not installed (the `otel` extra)")
        _state["provider"] = None
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME",
                                                                                        service)}))
    processor = _exporter_processor(settings)
    if processor is not None:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    _state["provider"] = provider
    return provider


# ------------------------------------------------------------------ gateway
def instrument_gateway(app, settings) -> bool:
    """Server spans for ``app`` and trace context in every Celery message it sends."""
    provider = tracer_provider(settings, "graphfleet-gateway")
    if provider is None:
        return False
    from celery.signals import before_task_publish

    if not hasattr(app, "_native_telemetry"):
        log.warning("this FastAPI has no native OpenTelemetry support (0.142+): no request spans")
    if not _state.get("publish_hook"):
        before_task_publish.connect(_inject_into_message, weak=False)
        _state["publish_hook"] = True
    return True


def _inject_into_message(sender=None, headers=None, routing_key=None, **_kwargs) -> None:
    from opentelemetry import trace
    from opentelemetry.propagate import inject

    if headers is None or "traceparent" in headers:
        return
    tracer = trace.get_tracer("graphfleet.gateway", tracer_provider=_state.get("provider"))
    with tracer.start_as_current_span(f"send {sender}", kind=trace.SpanKind.PRODUCER,
                                      attributes={"messaging.system": "celery",
                                                  "messaging.destination.name": routing_key or "",
                                                  "messaging.message.id": headers.get("id", "")}):
        inject(headers)


# ------------------------------------------------------------------ workers
def install_celery(get_settings) -> None:
    """Instrument the worker when it starts (``worker_init``; prefork children inherit it; the batch exporter's
    thread is restarted after fork by the SDK), flush at shutdown."""
    from celery.signals import worker_init, worker_process_shutdown, worker_shutdown

    def _start(**_kwargs) -> None:
        provider = tracer_provider(get_settings(), "graphfleet-worker")
        if provider is None:
            return
        from opentelemetry.instrumentation.celery import CeleryInstrumentor

        CeleryInstrumentor().instrument(tracer_provider=provider)

    worker_init.connect(_start, weak=False)
    worker_shutdown.connect(lambda **_kw: flush(), weak=False)  # prefork children exit without atexit hooks
    worker_process_shutdown.connect(lambda **_kw: flush(), weak=False)


def flush() -> None:
    """Export the spans still buffered (the gateway at shutdown; workers flush at exit on their own)."""
    provider = _state.get("provider")
    if provider is not None:
        provider.force_flush()


def reset() -> None:
    """Stop tracing in this process (tests): disconnect the publish hook and shut the provider down."""
    from celery.signals import before_task_publish

    before_task_publish.disconnect(_inject_into_message)
    provider = _state.pop("provider", None)
    _state.clear()
    if provider is not None:
        provider.shutdown()
