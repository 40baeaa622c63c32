"""Celery signal handlers -> task metrics; tier label; pipeline helpers (single-process registry)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from celery import Celery
from prometheus_client import REGISTRY

from shared.infra.messaging.messages import READY_AT
from shared.infra.messaging.queueing import EXTRACT, ROUTES
from shared.infra.observability import metrics as m
from tests.brokers import take_task_name
from workers.metrics_signals import install as install_celery_signal_handlers


def value(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture(scope="module")
def app():
    app = Celery("metrics-test", set_as_current=False)
    app.conf.update(task_always_eager=True, task_eager_propagates=False, broker_url="memory://")
    install_celery_signal_handlers(app)
    install_celery_signal_handlers(app)  # idempotent
    take_task_name(app, EXTRACT)

    @app.task(name=EXTRACT, shared=False)  # shared: it would join every later app
    def extract(x):
        return x * 2

    @app.task(name="graphfleet.test_boom", shared=False)
    def boom():
        raise ValueError("boom")

    @app.task(name="graphfleet.test_flaky", shared=False, bind=True, max_retries=1, default_retry_delay=0)
    def flaky(self):
        if self.request.retries < 1:
            raise self.retry(exc=RuntimeError("again"))
        return "ok"

    app.graphfleet_tasks = (extract, boom, flaky)
    return app


def test_task_success_counts_and_duration(app):
    extract = app.graphfleet_tasks[0]
    queue = ROUTES[EXTRACT]
    before = {o: value("graphfleet_tasks_total", queue=queue, task=EXTRACT, outcome=o)
              for o in ("started", "succeeded", "failed")}
    count_before = value("graphfleet_task_duration_seconds_count", queue=queue, task=EXTRACT)
    assert extract.apply(args=(21,)).get() == 42
    assert value("graphfleet_tasks_total", queue=queue, task=EXTRACT, outcome="started") == before["started"] + 1
    assert value("graphfleet_tasks_total", queue=queue, task=EXTRACT, outcome="succeeded") == before["succeeded"] + 1
    assert value("graphfleet_tasks_total", queue=queue, task=EXTRACT, outcome="failed") == before["failed"]
    assert value("graphfleet_task_duration_seconds_count", queue=queue, task=EXTRACT) == count_before + 1
    assert value("graphfleet_tasks_in_progress", queue=queue, task=EXTRACT) == 0


def test_a_tasks_wait_in_the_queue_is_observed_from_when_its_message_was_ready(app):
    extract = app.graphfleet_tasks[0]
    queue = ROUTES[EXTRACT]

    def observed() -> tuple[float, float, float]:
        return (value("graphfleet_task_queue_wait_seconds_count", queue=queue, task=EXTRACT),
                value("graphfleet_task_queue_wait_seconds_sum", queue=queue, task=EXTRACT),
                value("graphfleet_task_queue_wait_seconds_bucket", queue=queue, task=EXTRACT, le="1.0"))

    count, total, within_1s = observed()
    extract.apply(args=(1,), headers={READY_AT: time.time() - 2.0})  # ready 2 s ago
    assert observed()[0] == count + 1
    assert 2.0 <= observed()[1] - total < 60
    assert observed()[2] == within_1s  # not in the 1 s bucket
    after_first = observed()
    extract.apply(args=(1,), headers={READY_AT: time.time() + 30})  # the sender's clock ahead: observed as 0
    assert observed() == (count + 2, after_first[1], within_1s + 1)
    extract.apply(args=(1,))  # a message sent without the header (another client): not observed
    extract.apply(args=(1,), headers={READY_AT: "yesterday"})
    assert observed()[0] == count + 2


def test_task_failure_and_retry(app):
    _extract, boom, flaky = app.graphfleet_tasks
    boom.apply()
    assert value("graphfleet_tasks_total", queue="unknown", task="graphfleet.test_boom", outcome="failed") == 1
    assert value("graphfleet_tasks_total", queue="unknown", task="graphfleet.test_boom", outcome="succeeded") == 0
    flaky.apply()
    assert value("graphfleet_tasks_total", queue="unknown", task="graphfleet.test_flaky", outcome="retried") == 1
    assert value("graphfleet_tasks_total", queue="unknown", task="graphfleet.test_flaky", outcome="succeeded") == 1


def test_tier_attribute_and_embedding_stage():
    rec = SimpleNamespace(tenant="t1", job_id="j", stage="community_report", model="gpt-4o", prompt_tokens=1000,
                          completion_tokens=200, latency_s=1.5, cache_hit=False, cost_usd=0.0045, kind="chat",
                          retries=0, error=None, queue="reporter", tier="premium")
    # stage "community_report" is folded into the canonical "report"
    labels = {"model": "gpt-4o", "stage": "report", "queue": "reporter", "tier": "premium"}
    before = value("graphfleet_llm_tokens_total", direction="input", **labels)
    m.usage_listener(rec)
    assert value("graphfleet_llm_tokens_total", direction="input", **labels) == before + 1000
    assert value("graphfleet_llm_tokens_total", direction="output", **labels) >= 200
    assert value("graphfleet_llm_cost_usd_total", **labels) >= 0.0045


def test_job_and_chunk_helpers():
    before = value("graphfleet_jobs_total", kind="ingest", status="succeeded", tier="standard")
    m.record_job_submitted("ingest")
    m.record_job_finished("ingest", "succeeded", 12.5)
    m.record_chunks(5)
    m.record_chunks(1, "failed")
    m.record_chunks(0)
    assert value("graphfleet_jobs_total", kind="ingest", status="succeeded", tier="standard") == before + 1
    assert value("graphfleet_job_duration_seconds_count", kind="ingest", status="succeeded", tier="standard") >= 1
    assert value("graphfleet_chunks_processed_total", outcome="ok") >= 5


def test_metrics_response_single_process_mode():
    m.record_task("query", "graphfleet.query", "started")
    body, ctype = m.metrics_response()
    assert ctype.startswith("text/plain")
    assert b"graphfleet_tasks_total" in body
