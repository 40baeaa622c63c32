"""Ctrl-C in the terminal of ``graphfleet up``: SIGINT to the whole foreground process group.

A real ``graphfleet up`` in a process group of its own (as a shell runs it), LLM calls to the project's
simulator (slow enough that an ingestion is still running when the test presses Ctrl-C), a real HTTP request
held on ``GET /v1/jobs/{id}?wait=60`` when the signal comes."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest

from llm_simulator.config import SimConfig
from llm_simulator.server import start_in_thread
from shared.infra.redis.conn import free_port
from tests.integration.cli_proc import UpProcess, cli_env
from tests.integration.up_procs import children, gone, named, redis_servers, wait_gone

pytestmark = [pytest.mark.integration, pytest.mark.own_servers]  # its own Redis: the layout changes nothing

HELD_S = 60  # the held request's ?wait
SAFETY_TIMEOUT_S = 90.0  # a hung request or stop fails the test instead of blocking it; never a pass criterion


@pytest.fixture()
def slow_llm():
    """A simulator whose every answer takes long: an ingestion stays running for the whole test."""
    url, stop = start_in_thread(SimConfig(port=0, seed=7, latency_ms=30_000))
    yield url
    stop()


def _ingest(gateway: str, admin_key: str) -> tuple[dict, str]:
    """A tenant's key and the id of an ingestion job it submitted through the gateway."""
    admin = {"X-API-Key": admin_key}
    with httpx.Client(base_url=gateway, timeout=30) as http:
        assert http.post("/v1/tenants", json={"id": "ctrlc"}, headers=admin).status_code == 201
        key = http.post("/v1/tenants/ctrlc/keys", json={"name": "t"}, headers=admin).json()["api_key"]
        who = {"X-API-Key": key}
        text = "Ebenezer Scrooge kept the counting-house with Bob Cratchit, his clerk, in the cold of December."
        r = http.post("/v1/documents", json={"documents": [{"text": text}]}, headers=who)
        assert r.status_code == 202, r.text
        return who, r.json()["job_id"]


def _held(gateway: str, who: dict, job_id: str, out: dict) -> None:
    try:
        out["response"] = httpx.get(f"{gateway}/v1/jobs/{job_id}", params={"wait": HELD_S}, headers=who,
                                    timeout=SAFETY_TIMEOUT_S)
    except httpx.HTTPError as exc:  # a connection closed without an answer: clean, but no answer
        out["error"] = exc


def test_ctrl_c_stops_the_gateway_first_answers_held_requests_and_leaves_nothing_running(tmp_path, slow_llm):
    """The held request gets its answer (200, the job still running), not the 500 of a gateway whose Redis
    got the terminal's SIGINT and went first; the gateway exits while Redis still runs; afterwards no process of
    the stack is left. The banner named the LLM the stack uses."""
    data = tmp_path / "data"
    env = cli_env(data, GRAPHFLEET_LLM_BASE_URL=slow_llm, GRAPHFLEET_LLM_API_KEY="sk-test",
                  GRAPHFLEET_WORKERS__SOFT_SHUTDOWN_TIMEOUT_S="2")
    with UpProcess(["--port", str(free_port()), "--processes", "1"], env) as up:  # start_new_session=True
        up.wait_for("Ctrl-C to stop")
        assert up.field("LLM").startswith(slow_llm), up.lines
        gateway, admin_key = up.field("gateway"), up.field("admin key").split()[0]
        procs = children(up.proc.pid)
        [gateway_proc] = named(procs, "uvicorn")
        [redis_proc] = redis_servers(data)
        who, job_id = _ingest(gateway, admin_key)
        out: dict = {}
        held = threading.Thread(target=_held, args=(gateway, who, job_id, out))
        held.start()
        time.sleep(2)  # the request reaches the gateway and waits there (the job runs for far longer)
        assert held.is_alive(), out

        os.killpg(os.getpgid(up.proc.pid), signal.SIGINT)  # Ctrl-C: the terminal's whole foreground group
        assert not wait_gone([gateway_proc]), "the gateway did not stop"
        redis_alive_after_gateway = not gone(redis_proc)
        held.join(SAFETY_TIMEOUT_S)
        assert up.proc.wait(SAFETY_TIMEOUT_S) == 0, up.lines
        up.stop()

    assert "error" not in out, out
    response = out["response"]
    assert response.status_code == 200, response.text
    assert response.json()["status"] in ("queued", "running"), response.json()
    assert redis_alive_after_gateway, "Redis stopped before the gateway"
    assert not wait_gone(procs), "processes of the stack left running"
    assert up.lines[-1] == f"stopped; data kept in {data}", up.lines
