"""Benchmark helpers: a simulator subprocess, an embedded Redis and a worker stack."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from shared.infra.redis_conn import EmbeddedRedis, free_port

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "graphfleet_cli" / "sample" / "christmas_carol.txt"

# Distinct local questions about the Carol (people, places, things of the story): a bench that asks one
# question again and again measures the per-process memo of its context's token counts, not the context
# build a new question pays. Benches cycle through these (`carol_question`).
_CAROL_SUBJECTS = (
    "Ebenezer Scrooge", "Jacob Marley", "Bob Cratchit", "Tiny Tim", "Scrooge's nephew Fred", "Mrs. Cratchit",
    "Mr. Fezziwig", "Belle", "the Ghost of Christmas Past", "the Ghost of Christmas Present",
    "the Ghost of Christmas Yet to Come", "Martha Cratchit", "Peter Cratchit", "Topper", "Dick Wilkins", "Old Joe",
    "Mrs. Dilber", "Fan, Scrooge's sister", "Ignorance and Want", "the portly gentlemen collecting for the poor",
)
_CAROL_TEMPLATES = ("Who is {} and what do they do in the story?", "What happens to {} and why does it matter?")
CAROL_QUESTIONS = tuple(t.format(s) for t in _CAROL_TEMPLATES for s in _CAROL_SUBJECTS)


def carol_question(i: int) -> str:
    """The ``i``-th question of the cycle, marked with ``i`` so that no LLM cache answers a repeat."""
    return f"{CAROL_QUESTIONS[i % len(CAROL_QUESTIONS)]} (run {i})"


@contextlib.contextmanager
def simulator(latency_ms: float = 0.0, seed: int = 7, ms_per_completion_token: float = 0.0, **flags):
    """The LLM simulator in a subprocess: ``latency_ms`` per request, plus ``ms_per_completion_token`` per token
    of a chat answer (12.5: a model generating 80 tokens/s); other ``flags`` become its ``--flags``."""
    port = free_port()
    cmd = [sys.executable, "-m", "llm_simulator", "--port", str(port), "--latency-ms", str(latency_ms),
           "--seed", str(seed)]
    if ms_per_completion_token:
        cmd += ["--ms-per-completion-token", str(ms_per_completion_token)]
    for key, value in flags.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
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
    from graphfleet_cli.stack import Stack

    extra = {"GRAPHFLEET_LLM_BASE_URL": llm_url or "", "GRAPHFLEET_LLM_API_KEY": "sk-bench",
             **{k: str(v) for k, v in env.items()}}
    with tempfile.TemporaryDirectory() as tmp:
        s = Stack(data_dir=Path(tmp), redis_url=redis_url, worker_concurrency=concurrency, processes=processes,
                  extra_env=extra)
        s.start()
        try:
            yield s
        finally:
            s.stop()


def sim_stats(llm_url: str) -> dict:
    return httpx.get(llm_url.removesuffix("/v1") + "/stats").json()


def emit(record: dict, out: Path | None = None) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    if out:
        with out.open("a") as fh:
            fh.write(line + "\n")


def machine() -> dict:
    """What the figures were measured on: CPU model and count, memory, kernel, Python."""
    import platform

    cpu = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                if line.startswith("model name")), platform.processor() or platform.machine())
    mem_kb = next((int(line.split()[1]) for line in _read("/proc/meminfo").splitlines()
                   if line.startswith("MemTotal:")), 0)
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "memory_gib": round(mem_kb / 1024**2, 1),
            "kernel": platform.release(), "arch": platform.machine(), "python": sys.version.split()[0],
            "platform": sys.platform}


def own_versions() -> dict:
    """graphfleet's side of the measurement: the project and the libraries its hot paths run on."""
    import importlib.metadata as md

    from shared.infra.redis_conn import redis_server_binary

    out = {}
    for dist in ("graphfleet", "celery", "kombu", "redis", "igraph", "leidenalg", "tiktoken", "openai", "numpy",
                 "bm25s", "pydantic"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    try:
        server = subprocess.run([redis_server_binary(), "--version"], capture_output=True, text=True, timeout=10)
        out["redis-server"] = next((w.split("=", 1)[1] for w in server.stdout.split() if w.startswith("v=")), None)
    except (OSError, RuntimeError, subprocess.SubprocessError):
        out["redis-server"] = None
    return out


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def wait_gateway(url: str, timeout: float = 60.0) -> None:
    """Wait until the gateway at ``url`` answers ``/healthz`` with 200."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("gateway did not start")
