"""The capacity table of docs/scaling.md, computed from the measured per-unit figures of
bench/results/capacity.jsonl (``bench.capacity``).

    .venv/bin/python -m bench.capacity_model [bench/results/capacity.jsonl] [--chunks-per-doc 11] ...

Every assumption is a flag and is printed with the table. The per-chunk figures are those of the largest run of
each extraction path (``--path llm`` by default: the LLM extracts, the expensive case).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from bench.capacity_report import grouped_stages, load, table

LOADS = [(10, 100), (10, 1_000), (100, 10_000), (1_000, 10_000)]  # tenants x documents/day per tenant
CPU_GROUPS = ["ingest", "merge", "cluster", "query"]


def unit_figures(rows: list[dict], path: str) -> dict:
    r = max((x for x in rows if x["extraction"] == path), key=lambda x: x["chunks"])
    n = r["chunks"]
    stages = grouped_stages(r)
    cache = r["families"]["families"].get("llm_cache", {}).get("bytes", 0)
    grown = r["memory_after_ingest"]["used_memory"] - r["memory_before"]["used_memory"]
    cpu: dict[str, float] = {}
    for s in r["stages"]:
        for k, v in s["cpu_seconds"].items():
            cpu[k] = cpu.get(k, 0.0) + v
    return {"run": f"{n:,} chunks ({path})", "bytes_kept": (grown - cache) / n, "bytes_cache": cache / n,
            "state_ops": sum(g["ops"] for g in stages.values()) / n,
            "redis_cpu_s": sum(g["cpu"] for g in stages.values()) / n,
            "broker_msgs": sum(g["msgs"] for g in stages.values()) / n,
            "broker_ops": (sum(g["bops"] for g in stages.values()) - r["broker_idle_ops_per_s"] * r["seconds"]) / n,
            "cpu_s": {g: cpu.get(g, 0.0) / n for g in CPU_GROUPS},
            "tokens": sum(r["tokens_by_stage"].values()) / n, "llm_calls": r["llm_calls"] / n}


def plan(tenants: int, docs: int, u: dict, a) -> dict:
    chunks_day = tenants * docs * a.chunks_per_doc
    peak = chunks_day / (a.busy_hours * 3600)  # chunks/s while documents arrive
    kept = chunks_day * a.retention_days * u["bytes_kept"]
    cache = chunks_day * min(a.retention_days, a.cache_days) * u["bytes_cache"]
    memory = kept + cache
    ops = peak * u["state_ops"] + a.queries_per_tenant_day * tenants / (a.busy_hours * 3600) * a.ops_per_query
    by_memory, by_ops = math.ceil(memory / (a.shard_gb * 1e9)), math.ceil(ops / a.shard_ops)
    by_cpu = math.ceil(peak * u["redis_cpu_s"] / a.redis_util)  # a shard is one Redis main thread
    procs = {g: math.ceil(peak * s / a.core_util) for g, s in u["cpu_s"].items()}
    llm_inflight = peak * u["llm_calls"] * a.llm_latency_s  # calls waiting on the LLM at once
    procs["ingest"] = max(procs["ingest"], math.ceil(llm_inflight / a.threads))
    tpm = peak * 60 * u["tokens"]
    limits = {  # rates only (memory is a matter of retention): units of each resource the load needs
        "LLM TPM": tpm / a.tpm_limit, "Redis ops": max(ops / a.shard_ops, peak * u["redis_cpu_s"] / a.redis_util),
        "broker": peak * u["broker_ops"] / a.broker_ops,
        "worker CPU": sum(peak * s for s in u["cpu_s"].values()) / (a.host_cores * a.core_util)}
    first = max(limits, key=limits.get)
    return {"load": f"{tenants:,} x {docs:,}", "chunks_day": chunks_day, "peak": peak, "memory_gb": memory / 1e9,
            "gb_day": chunks_day * (u["bytes_kept"] + u["bytes_cache"]) / 1e9, "by_memory": by_memory,
            "by_ops": by_ops, "by_cpu": by_cpu, "shards": max(3, by_memory, by_ops, by_cpu), "ops": ops,
            "procs": procs,
            "broker_msgs": peak * u["broker_msgs"],
            "broker_ops": peak * u["broker_ops"], "tpm": tpm, "rpm": peak * 60 * u["llm_calls"], "first": first,
            "limits": limits}


def render(u: dict, a, plans: list[dict]) -> str:
    rows = [[p["load"], f"{p['chunks_day']:,.0f}", f"{p['peak']:,.1f}", f"{p['gb_day']:,.1f}",
             f"{p['memory_gb']:,.0f}", f"{p['ops']:,.0f}",
             f"{p['shards']} ({p['by_memory']} / {p['by_ops']} / {p['by_cpu']})",
             " / ".join(str(p["procs"][g]) for g in CPU_GROUPS), f"{p['broker_msgs']:,.0f}",
             f"{p['tpm'] / 1e6:,.1f} M", f"{p['rpm']:,.0f}",
             " > ".join(f"{k} {v:,.2g}" for k, v in sorted(p["limits"].items(), key=lambda kv: -kv[1]))]
            for p in plans]
    head = ["tenants x docs/day", "chunks/day", "peak chunks/s", "Redis GB/day", f"Redis GB after {a.retention_days} d",
            "state ops/s (peak)", "state masters (by memory / ops / Redis CPU)",
            "worker processes ingest / merge / cluster / query", "broker msgs/s", "LLM TPM", "LLM RPM",
            "rate limits, units needed (LLM budgets, shards, broker nodes, hosts)"]
    figures = (f"Per chunk ({u['run']}): {u['bytes_kept']:,.0f} B kept + {u['bytes_cache']:,.0f} B LLM cache "
               f"(expires after {a.cache_days} d), {u['state_ops']:.0f} state ops, "
               f"{1e6 * u['redis_cpu_s']:,.0f} µs state-Redis CPU, {u['broker_msgs']:.2f} broker messages "
               f"({u['broker_ops']:.1f} broker ops), {u['tokens']:,.0f} LLM tokens in {u['llm_calls']:.2f} calls, "
               "worker CPU ms " + ", ".join(f"{g} {1000 * s:.1f}" for g, s in u["cpu_s"].items()) + ".")
    assumptions = (f"Assumptions: {a.chunks_per_doc} chunks/document; documents arrive over {a.busy_hours} h a day; "
                   f"{a.retention_days} days kept; {a.queries_per_tenant_day} queries/tenant/day at "
                   f"{a.ops_per_query} ops each; a shard = {a.shard_gb} GB, {a.shard_ops:,} ops/s and its main thread "
                   f"busy at most {a.redis_util:.0%}, at least 3 masters; a core at {a.core_util:.0%}; "
                   f"LLM calls of {a.llm_latency_s} s on {a.threads} threads "
                   f"per ingest process; LLM budget {a.tpm_limit / 1e6:,.0f} M TPM; broker {a.broker_ops:,} ops/s a "
                   f"node; a host = {a.host_cores} cores.")
    per_tenant = a.shard_gb * 1e9 / (u["bytes_kept"] + u["bytes_cache"])
    ceiling = (f"One tenant's keys share a slot, so the largest tenant must fit in one master: {a.shard_gb} GB / "
               f"{(u['bytes_kept'] + u['bytes_cache']) / 1e3:,.0f} KB = {per_tenant:,.0f} chunks "
               f"({per_tenant / a.chunks_per_doc:,.0f} documents) per tenant.")
    return "\n\n".join([figures, assumptions, ceiling, table(head, rows)]) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("jsonl", nargs="?", type=Path, default=Path(__file__).parent / "results" / "capacity.jsonl")
    ap.add_argument("--path", choices=["llm", "fast"], default="llm")
    ap.add_argument("--chunks-per-doc", type=float, default=11)
    ap.add_argument("--busy-hours", type=float, default=8)
    ap.add_argument("--retention-days", type=int, default=30)
    ap.add_argument("--cache-days", type=int, default=7)
    ap.add_argument("--queries-per-tenant-day", type=int, default=1000)
    ap.add_argument("--ops-per-query", type=int, default=1200)
    ap.add_argument("--shard-gb", type=float, default=25)
    ap.add_argument("--shard-ops", type=int, default=50_000)
    ap.add_argument("--redis-util", type=float, default=0.5)
    ap.add_argument("--core-util", type=float, default=0.7)
    ap.add_argument("--llm-latency-s", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("--tpm-limit", type=float, default=30e6)
    ap.add_argument("--broker-ops", type=int, default=50_000)
    ap.add_argument("--host-cores", type=int, default=16)
    a = ap.parse_args()
    u = unit_figures(load(a.jsonl), a.path)
    print(render(u, a, [plan(t, d, u, a) for t, d in LOADS]))


if __name__ == "__main__":
    main()
