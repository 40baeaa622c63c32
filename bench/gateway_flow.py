"""A timed flow through the gateway: start Redis + workers + gateway with the simulator at each latency,
create a tenant and key, ingest the sample corpus over HTTP (JSON batch), poll the job, then one query
per mode (``?wait``), printing wall seconds per step.

    .venv/bin/python -m bench.gateway_flow [--latency 0 200] [--concurrency 16] [--out bench/results/gateway.jsonl]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import SAMPLE, emit, machine, redis_server, sim_stats, simulator
from graphfleet_cli.stack import Stack
from shared.infra.redis_conn import free_port

ADMIN_KEY = "adm-bench-gateway-flow"
QUERIES = {
    "local": "Who is Ebenezer Scrooge and how does he change?",
    "global": "What are the main themes of the story?",
    "naive": "What happens on Christmas morning?",
    "hybrid": "How is Bob Cratchit related to Scrooge?",
    "causal": "Why does Scrooge change his ways?",
}
POLL_S = 0.05


class Timer:
    def __init__(self):
        self.steps: dict[str, float] = {}

    def step(self, name: str, started: float) -> float:
        self.steps[name] = round(time.perf_counter() - started, 3)
        print(f"  {name:<28} {self.steps[name]:8.3f} s", flush=True)
        return self.steps[name]


def _tenant(gw: httpx.Client, tenant: str) -> dict:
    admin = {"X-API-Key": ADMIN_KEY}
    gw.post("/v1/tenants", json={"id": tenant, "limits": {"requests_per_minute": 100_000}}, headers=admin)
    key = gw.post(f"/v1/tenants/{tenant}/keys", json={"name": "bench"}, headers=admin).raise_for_status().json()
    return {"X-API-Key": key["api_key"]}


def _wait_job(gw: httpx.Client, headers: dict, job_id: str) -> dict:
    polls = 0
    while True:
        view = gw.get(f"/v1/jobs/{job_id}", headers=headers).raise_for_status().json()
        polls += 1
        if view["status"] in ("succeeded", "failed", "canceled"):
            view["polls"] = polls
            return view
        time.sleep(POLL_S)


def run_flow(latency: float, concurrency: int, out: Path | None) -> dict:
    timer = Timer()
    print(f"== gateway flow, simulator latency {latency:g} ms, {concurrency} threads per LLM worker", flush=True)
    text = SAMPLE.read_text(encoding="utf-8-sig")
    with simulator(latency_ms=latency) as llm, redis_server() as redis_url, tempfile.TemporaryDirectory() as tmp:
        env = {"GRAPHFLEET_LLM_BASE_URL": llm, "GRAPHFLEET_LLM_API_KEY": "sk-bench", "GRAPHFLEET_ADMIN_KEY": ADMIN_KEY}
        started = time.perf_counter()
        stack = Stack(data_dir=Path(tmp), redis_url=redis_url, worker_concurrency=concurrency, extra_env=env,
                      gateway_port=free_port()).start()
        try:
            timer.step("stack+gateway start", started)
            with httpx.Client(base_url=stack.gateway_url, timeout=300) as gw:
                started = time.perf_counter()
                headers = _tenant(gw, "bench")
                timer.step("tenant + key", started)
                started = time.perf_counter()
                r = gw.post("/v1/documents", headers=headers, json={"documents": [
                    {"text": text, "id": "christmas-carol", "title": SAMPLE.name}]}).raise_for_status()
                timer.step("ingest submit (202)", started)
                view = _wait_job(gw, headers, r.json()["job_id"])
                total = timer.step("ingest until succeeded", started)
                assert view["status"] == "succeeded", view
                usage = view["usage"]
                print(f"  ingestion: {view['progress']['chunks_total']} chunks, {usage['calls']} LLM calls, "
                      f"{usage['prompt_tokens'] + usage['completion_tokens']} tokens, stage starts "
                      f"{view['stage_times']}", flush=True)
                answers = {}
                for mode, question in QUERIES.items():
                    started = time.perf_counter()
                    q = gw.post("/v1/queries", params={"wait": 60}, headers=headers,
                                json={"mode": mode, "query": question, "response_type": "bullet_points"})
                    body = q.json()
                    if q.status_code == 202:
                        body = _wait_query(gw, headers, body["query_id"])
                    timer.step(f"query {mode}", started)
                    answers[mode] = {"status": body["status"], "answer_kind": body.get("answer_kind"),
                                     "calls": (body.get("total_usage") or {}).get("calls")}
                record = {"bench": "gateway_flow", "latency_ms": latency, "concurrency": concurrency,
                          "steps_s": timer.steps, "ingest_seconds": total, "chunks": view["progress"]["chunks_total"],
                          "ingest_llm_calls": usage["calls"], "queries": answers, "simulator": _sim_summary(llm),
                          "machine": machine()}
                emit(record, out)
                return record
        finally:
            stack.stop()


def _sim_summary(llm: str) -> dict:
    stats = sim_stats(llm)
    return {"chat_calls": stats["chat"]["calls"], "prompt_tokens": stats["chat"]["prompt_tokens"],
            "completion_tokens": stats["chat"]["completion_tokens"], "embedding_calls": stats["embeddings"]["calls"],
            "errors": stats["errors"]}


def _wait_query(gw: httpx.Client, headers: dict, query_id: str) -> dict:
    while True:
        body = gw.get(f"/v1/queries/{query_id}", headers=headers).raise_for_status().json()
        if body["status"] in ("succeeded", "failed", "canceled"):
            return body
        time.sleep(POLL_S)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, nargs="+", default=[0.0, 200.0])
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    for latency in args.latency:
        run_flow(latency, args.concurrency, args.out)


if __name__ == "__main__":
    main()
