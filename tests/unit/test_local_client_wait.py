"""``LocalClient.wait`` (``graphfleet ingest --wait`` on the local stack, and the benches): the job's view once it
ended, woken by its end-of-job message instead of polling the view; with the progress line too; a job that does
not exist is told at once, one that does not end times out."""

from __future__ import annotations

import threading

import pytest

from graphfleet_cli.local_client import LocalClient
from shared.infra.jobs.store import JobStore


def _client_with_a_job(redis_server, tenant: str, monkeypatch, on_read=None):
    """A client, the store of its tenant with one queued ingestion ``j``, and the list of the views it reads
    (``on_read(views)`` runs before each read)."""
    client = LocalClient(redis_server.url)
    jobs = JobStore(client.redis, tenant)
    jobs.create("j", "ingest")
    views, read_view = [], client.job

    def job(t, j):
        views.append(j)
        if on_read:
            on_read(views)
        return read_view(t, j)

    monkeypatch.setattr(client, "job", job)
    return client, jobs, views


def test_wait_returns_the_view_of_a_job_once_its_end_wakes_it(redis_server, tenant, monkeypatch):
    client, jobs, views = _client_with_a_job(redis_server, tenant, monkeypatch)
    ender = threading.Timer(0.6, lambda: jobs.finish("j", "succeeded", result='{"documents": 1}'))
    ender.start()
    try:
        view = client.wait(tenant, "j", timeout=60)
    finally:
        ender.cancel()
    assert view["status"] == "succeeded" and view["result"] == {"documents": 1}
    assert views == ["j"]  # woken by the end, the view is read once, after it (a poll read it every 100 ms)


def test_wait_with_progress_redraws_the_line_until_the_job_ends(redis_server, tenant, monkeypatch):
    def end_at_the_third_read(views):  # two redraws of a running job come first
        if len(views) == 3:
            JobStore(client.redis, tenant).finish("j", "succeeded", result="{}")

    client, _jobs, views = _client_with_a_job(redis_server, tenant, monkeypatch, end_at_the_third_read)
    assert client.wait(tenant, "j", timeout=60, progress=True)["status"] == "succeeded"
    assert len(views) == 4  # three redraws (the third ends the job), then the view the wait returns


def test_wait_for_a_job_that_does_not_exist_says_so_at_once(redis_server, tenant):
    client = LocalClient(redis_server.url)
    with pytest.raises(LookupError, match="no job missing"):
        client.wait(tenant, "missing", timeout=3600)


def test_wait_for_a_job_that_does_not_end_times_out(redis_server, tenant, monkeypatch):
    client, _jobs, views = _client_with_a_job(redis_server, tenant, monkeypatch)
    with pytest.raises(TimeoutError, match="not finished after 0.3s"):
        client.wait(tenant, "j", timeout=0.3)
    assert views == []  # no view is read for a job that did not end
