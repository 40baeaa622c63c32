"""Stacks a suite runs against: the LLM simulator in a subprocess, an embedded Redis, a worker stack."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.harness.results import ROOT
from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.stack import Stack
from shared.infra.jobs.ingest_submit import DocumentInput, submit_ingestion
from shared.infra.redis.conn import EmbeddedRedis, free_port


@contextlib.contextmanager
def simulator(latency_ms: float = 0.0, seed: int = 7, ms_per_completion_token: float = 0.0):
    """The LLM simulator in a subprocess, its base URL."""
    port = free_port()
    cmd = [sys.executable, "-m", "llm_simulator", "--port", str(port), "--latency-ms", str(latency_ms),
           "--seed", str(seed), "--ms-per-completion-token", str(ms_per_completion_token)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                httpx.get(base + "/v1/models", timeout=0.5)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield base + "/v1"
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def redis_server():
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp), persist=False).start()
        try:
            yield server.url
        finally:
            server.stop()


@contextlib.contextmanager
def stack(redis_url: str, llm_url: str | None, concurrency: int = 16, processes: int = 1, **env):
    extra = {"GRAPHFLEET_LLM_BASE_URL": llm_url or "", "GRAPHFLEET_LLM_API_KEY": "sk-bench",
             **{k: str(v) for k, v in env.items()}}
    with tempfile.TemporaryDirectory() as tmp, Stack(data_dir=Path(tmp), redis_url=redis_url, extra_env=extra,
                                                     worker_concurrency=concurrency, processes=processes) as s:
        yield s


@contextlib.contextmanager
def client_stack(llm_url: str | None, concurrency: int = 16, processes: int = 1, **env):
    """A fresh Redis and a worker stack on it: (redis URL, the stack, a ``LocalClient``)."""
    with redis_server() as url, stack(url, llm_url, concurrency, processes, **env) as st:
        yield url, st, LocalClient(url)


def ingest_docs(client, tenant: str, docs: list, timeout: float) -> tuple[dict, dict]:
    """One ingestion job of (title, text) documents: (the job, its view once finished)."""
    inputs = [DocumentInput(text=text, title=title) for title, text in docs]
    job = submit_ingestion(client.redis, client.celery, tenant, inputs, client.settings)
    return job, client.wait(tenant, job["job_id"], timeout=timeout)
